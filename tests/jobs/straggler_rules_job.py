"""Three stages for the straggler rule, each in its own job group:
- skewed: partition 0 holds 10x the rows of the others, time per row fixed;
- slow_host: every task on executor 1 is slowed (the executor id is the
  name of the working directory Spark's worker gives it);
- multi_wave: 120 uniform short tasks on 2 slots, one early task 25x longer
  that delays nothing.
and one job whose description has every kind of awkward character.
Prints `MARK <json>` per part with its stage ids."""

import json
import os
import time

from pyspark.sql import SparkSession

spark = SparkSession.builder.appName("sparkscope-test-straggler-rules").getOrCreate()
sc = spark.sparkContext
print("APP_ID", sc.applicationId, flush=True)
tracker = sc.statusTracker()


def mark(name, description, action):
    sc.setJobGroup(name, description)
    action()
    stages = sorted(s for j in tracker.getJobIdsForGroup(name) for s in tracker.getJobInfo(j).stageIds)
    print("MARK", json.dumps({"name": name, "stages": stages}), flush=True)


def per_row(index, rows):
    n = 0
    for _ in rows:
        time.sleep(0.004)
        n += 1
    yield n


skewed_rows = [(0, i) for i in range(3000)] + [(p, i) for p in range(1, 8) for i in range(300)]
mark("skewed", "nightly skewed join", lambda: sc.parallelize(skewed_rows, 8).partitionBy(8, lambda k: k)
     .mapPartitionsWithIndex(per_row).collect())


def slow_on_executor_1(index, rows):
    executor = os.path.basename(os.getcwd())
    time.sleep(4.0 if executor == "1" else 0.3)
    yield (executor, sum(1 for _ in rows))


placed = {}
mark("slow_host", "slow host", lambda: placed.update(dict(sc.parallelize(range(800), 8)
                                             .mapPartitionsWithIndex(slow_on_executor_1).collect())))
print("EXECUTORS", json.dumps(sorted(placed)), flush=True)


def early_slow(index, rows):
    time.sleep(2.5 if index == 0 else 0.1)
    yield sum(1 for _ in rows)


mark("multi_wave", "uniform multi-wave", lambda: sc.parallelize(range(1200), 120).mapPartitionsWithIndex(early_slow).collect())

awkward = 'form\ffeed, "quotes", back\\slash, tab\there, new\nline, =equals, unicode é😀, trailing\\'
mark("awkward", awkward, lambda: sc.parallelize(range(4), 2).count())
print("AWKWARD", json.dumps(awkward), flush=True)
spark.stop()
