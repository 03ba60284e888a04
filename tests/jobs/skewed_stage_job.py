"""One stage held up by one slow task: 8 tasks on 2 slots, partition 0
sleeps 20 s and the others not at all, so the slowest task takes most of
the stage (the annotator's straggler rule: at least 3x and 2 s more than
the median, and it made the stage end later). The sleep is long because
on a loaded machine a Python task's start alone can take seconds: the
slowest must stay 3x the median however slow every task starts; sleeping
costs no CPU. Prints APP_ID and `MARK <json>` with the stage's id."""

import json
import time

from pyspark.sql import SparkSession

SLOW_S = 20.0

spark = SparkSession.builder.appName("sparkscope-test-skewed-stage").getOrCreate()
sc = spark.sparkContext
print("APP_ID", sc.applicationId, flush=True)


def one_slow(index, rows):
    if index == 0:
        time.sleep(SLOW_S)
    yield sum(1 for _ in rows)


sc.setJobGroup("skewed", "one slow task")
sc.parallelize(range(800), 8).mapPartitionsWithIndex(one_slow).collect()
tracker = sc.statusTracker()
stages = sorted(s for j in tracker.getJobIdsForGroup("skewed") for s in tracker.getJobInfo(j).stageIds)
print("MARK", json.dumps({"stages": stages}), flush=True)
spark.stop()
