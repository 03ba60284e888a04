"""Starts its executors (one tiny job), then idles for the given seconds,
printing IDLE_START and IDLE_END around the idle window: what an
application with nothing to do costs, per JVM."""

import sys
import time

from pyspark.sql import SparkSession

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 60
spark = SparkSession.builder.appName("sparkscope-bench-idle").getOrCreate()
print("APP_ID", spark.sparkContext.applicationId, flush=True)
spark.range(0, 1000, 1, 4).count()
time.sleep(5)  # executors settle: plugin init, first heartbeats
print("IDLE_START", flush=True)
time.sleep(seconds)
print("IDLE_END", flush=True)
spark.stop()
