"""A small real workload: shuffles, caches, spills, writes and reads files,
runs Python workers, and keeps both executors busy for several sink periods,
so that every executor reports activity and memory on every dashboard panel."""

import sys
import tempfile
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

spark = (SparkSession.builder.appName("sparkscope-test-metrics")
         # Spill every few thousand records: makes spill metrics non-zero on a small job.
         .config("spark.shuffle.spill.numElementsForceSpillThreshold", "20000")
         .getOrCreate())
sc = spark.sparkContext
print("APP_ID", sc.applicationId, flush=True)
started = time.time()

df = spark.range(0, 3_000_000, numPartitions=8).withColumn("k", F.col("id") % 1000)
cached = df.withColumn("v", F.sha2(F.col("id").cast("string"), 256)).cache()
cached.count()  # fills storage memory (OnHeapUnifiedMemory includes it)
for _ in range(2):
    cached.groupBy("k").agg(F.countDistinct("v")).collect()  # shuffle
# A sort that spills, written to and read back from local files.
out = tempfile.mkdtemp(prefix="sparkscope-metrics-job-")
df.repartition(4).sortWithinPartitions(F.col("id").desc()).write.mode("overwrite").parquet(out)
spark.read.parquet(out).groupBy("k").count().collect()


def slow_partition(rows):
    time.sleep(2.0)  # keep tasks active across several sink periods
    yield sum(1 for _ in rows)


sc.parallelize(range(16), 4).mapPartitions(slow_partition).collect()
# ExecutorMetrics are polled every 2 s and reported on the sink period:
# stay up until several reports have left every JVM.
time.sleep(max(0.0, 12.0 - (time.time() - started)))
print("DONE", flush=True)
spark.stop()
sys.exit(0)
