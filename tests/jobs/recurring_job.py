"""A recurring PySpark job without descriptions, for comparisons with its
earlier runs: three equal phases, each a DataFrame count (so every query,
job and stage is named `count at NativeMethodAccessorImpl.java:0` and only
its position tells them apart), then one that caches a dataset and one that
reads the cache back.

Arguments: the phase to slow (1-3, 0 for none), how long each of its tasks
sleeps (s), and the cached dataset's size (MiB)."""

import sys
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType

slow_phase, sleep_s, cache_mib = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
spark = SparkSession.builder.appName("sparkscope-test-recurring").getOrCreate()
print("APP_ID", spark.sparkContext.applicationId, flush=True)

PARTITIONS, ROWS_EACH = 2, 1000


def phase(number):
    sleep = sleep_s if number == slow_phase else 0.0

    def keep(x):
        if sleep and x % ROWS_EACH == 0:  # the first row of each partition: every task sleeps once
            time.sleep(sleep)
        return True

    kept = F.udf(keep, BooleanType())
    return spark.range(0, PARTITIONS * ROWS_EACH, numPartitions=PARTITIONS).filter(kept("id")).count()


for n in (1, 2, 3):
    phase(n)
# Random doubles beside the ids: the columnar cache cannot compress them away (16 bytes a row).
data = spark.range(0, cache_mib * 1024 * 1024 // 16, numPartitions=4).withColumn("r", F.rand(7)).persist()
data.count()
# Executors poll their memory every 2 s (spark.executor.metrics.pollingInterval)
# and a task's end carries what was polled while it ran: tasks that each hold
# on for longer than that, with the whole dataset cached, have its storage in
# their peaks, however soon the run ends after.
HOLD_S = 3.0


def hold(rows):
    time.sleep(HOLD_S)
    yield sum(1 for _ in rows)


data.rdd.mapPartitions(hold).sum()
spark.stop()
