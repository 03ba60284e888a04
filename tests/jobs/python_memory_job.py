"""Python workers that each hold a known amount of memory (MiB, first
argument, default 300) for a few seconds, longer than the executors' metric
poll, so that it shows in Python RSS."""

import sys
import time

from pyspark.sql import SparkSession

hold_mib = int(sys.argv[1]) if len(sys.argv) > 1 else 300
spark = SparkSession.builder.appName("sparkscope-test-python-memory").getOrCreate()
sc = spark.sparkContext
print("APP_ID", sc.applicationId, flush=True)


def hold(rows):
    block = bytearray(hold_mib * 1024 * 1024)
    for i in range(0, len(block), 4096):  # touch every page: RSS, not just reserved
        block[i] = 1
    time.sleep(6)
    yield sum(1 for _ in rows) + block[0]


sc.parallelize(range(4), 2).mapPartitions(hold).collect()
spark.stop()
