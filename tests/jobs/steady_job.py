"""Keeps both executors busy with short tasks for the given number of seconds,
so that metrics flow steadily while a test breaks parts of the stack."""

import sys
import time

from pyspark.sql import SparkSession

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
spark = SparkSession.builder.appName("sparkscope-test-steady").getOrCreate()
sc = spark.sparkContext
print("APP_ID", sc.applicationId, flush=True)


def work(rows):
    time.sleep(0.5)
    yield sum(rows)


end = time.time() + seconds
rounds = 0
while time.time() < end:
    sc.parallelize(range(400), 4).mapPartitions(work).collect()
    rounds += 1
print("ROUNDS", rounds, flush=True)
spark.stop()
