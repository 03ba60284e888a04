"""A structured-streaming query (rate source, 0.5 s trigger) that runs until
a file appears (argv[1]), so a test can look at InfluxDB while it runs.
Prints `BATCH <id>` as each micro-batch completes and, at the end,
`JOBS <json list of the query's job ids>`."""

import json
import os
import sys

from pyspark.sql import SparkSession

stop_file = sys.argv[1]
# 2 shuffle partitions, not 200: each micro-batch stays well under its 0.5 s trigger.
spark = (SparkSession.builder.appName("sparkscope-test-streaming")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
sc = spark.sparkContext
print("APP_ID", sc.applicationId, flush=True)

stream = (spark.readStream.format("rate").option("rowsPerSecond", 50).load()
          .selectExpr("value % 10 AS k").groupBy("k").count())
query = (stream.writeStream.format("memory").queryName("counts").outputMode("complete")
         .trigger(processingTime="500 milliseconds").start())
last = -1
while not os.path.exists(stop_file):
    progress = query.lastProgress
    if progress and progress["batchId"] != last:
        last = progress["batchId"]
        print("BATCH", last, flush=True)
    query.awaitTermination(0.2)
query.stop()
# Structured streaming runs every batch's jobs in the job group of the query's run id.
print("JOBS", json.dumps(sorted(sc.statusTracker().getJobIdsForGroup(str(query.runId)))), flush=True)
spark.stop()
