"""Three Structured Streaming queries side by side, each on the rate-micro-batch
source (200 rows a batch, event time advancing by the trigger each batch,
from now):

- "keeps_up": a windowed count with a watermark into a memory sink, on a 2 s
  trigger: state rows, a moving watermark, each batch well under its trigger
  (twice the headroom of a 1 s one, which a busy 2-core machine running
  other Spark jobs beside it can eat); event time keeps pace with the clock.
- "falls_behind": 1 s trigger; each batch also sleeps 2.5 s (foreachBatch):
  batches take longer than the trigger, and event time falls 1.5 s further behind the
  clock with every batch.
- "fails": 1 s trigger, no watermark; its third batch raises, which ends the query with
  that exception while the others go on.

Runs argv[1] seconds, stops both, prints APP_ID and `MARK <json>`."""

import json
import sys
import time

from pyspark.sql import SparkSession
from pyspark.sql.functions import window

seconds = float(sys.argv[1])
spark = (SparkSession.builder.appName("sparkscope-test-streaming-progress")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
print("APP_ID", spark.sparkContext.applicationId, flush=True)


def source(advance_ms=1000):
    return (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 200)
            .option("numPartitions", 2).option("startTimestamp", int(time.time() * 1000))
            .option("advanceMillisPerBatch", advance_ms).load())


counts = (source(2000).withWatermark("timestamp", "2 seconds")
          .groupBy(window("timestamp", "2 seconds"))
          .count())
keeps_up = (counts.writeStream.format("memory").queryName("keeps_up").outputMode("append")
            .trigger(processingTime="2 seconds").start())


def slow(batch, batch_id):
    batch.count()
    time.sleep(2.5)


falls_behind = (source().withWatermark("timestamp", "1 second").writeStream.queryName("falls_behind")
                .foreachBatch(slow).trigger(processingTime="1 second").start())


def fail_third(batch, batch_id):
    if batch_id == 2:
        raise RuntimeError("sparkscope test: the third batch fails")
    batch.count()


fails = (source().writeStream.queryName("fails").foreachBatch(fail_third)
         .trigger(processingTime="1 second").start())
time.sleep(seconds)
batches = {q.name: q.lastProgress["batchId"] if q.lastProgress else None for q in (keeps_up, falls_behind)}
batches["fails_exception"] = str(fails.exception()) if fails.exception() else None
keeps_up.stop()
falls_behind.stop()
print("MARK " + json.dumps(batches), flush=True)
time.sleep(1)
spark.stop()
