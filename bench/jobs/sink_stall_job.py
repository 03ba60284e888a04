"""Short jobs one after another, timed, then SparkContext.stop() timed: what a
stalled or absent Graphite endpoint does to a Spark application."""

import sys
import time

from pyspark.sql import SparkSession

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
spark = SparkSession.builder.appName("sparkscope-bench-sink-stall").getOrCreate()
print("APP_ID", spark.sparkContext.applicationId, flush=True)
for i in range(rounds):
    began = time.monotonic()
    spark.range(0, 2_000_000, 1, 4).selectExpr("sum(id)").collect()
    print("JOB_SECONDS", round(time.monotonic() - began, 3), flush=True)
    time.sleep(1.0)  # a sink period between jobs, so reports pile up
began = time.monotonic()
spark.stop()
print("STOP_SECONDS", round(time.monotonic() - began, 3), flush=True)
