"""A stage where partition 7's first attempt hangs and every later attempt is
quick, on a cluster of two hosts with speculation on: Spark starts a copy
of partition 7 on the other host, the copy wins and the first attempt is
killed. Partition 6 runs long on every attempt, so the stage is still
running when the killed attempt's end arrives (on a 2 x 2-core cluster).
Prints `MARK <json>`."""

import json
import time

from pyspark import TaskContext
from pyspark.sql import SparkSession

spark = SparkSession.builder.appName("sparkscope-test-speculation").getOrCreate()
sc = spark.sparkContext
print("APP_ID", sc.applicationId, flush=True)


def work(index, rows):
    attempt = TaskContext.get().attemptNumber()
    if index == 7 and attempt == 0:
        time.sleep(120)
    elif index == 6:
        time.sleep(25)
    else:
        time.sleep(0.5)
    yield (index, attempt)


sc.setJobGroup("speculation", "speculated stage")
result = sc.parallelize(range(80), 8).mapPartitionsWithIndex(work).collect()
tracker = sc.statusTracker()
stages = sorted(s for j in tracker.getJobIdsForGroup("speculation") for s in tracker.getJobInfo(j).stageIds)
print("MARK", json.dumps({"stages": stages, "attempts": sorted(result)}), flush=True)
spark.stop()
