"""SQL queries, jobs and two stages of equal size: one where partition 0 is
much slower than the rest (a straggler), one evenly balanced. Prints the
driver-side wall-clock bounds of each part as `MARK <name> <start ms> <end ms>`."""

import json
import time

from pyspark.sql import SparkSession

spark = SparkSession.builder.appName("sparkscope-test-annotated").getOrCreate()
sc = spark.sparkContext
print("APP_ID", sc.applicationId, flush=True)


def mark(name, action, group=None):
    started = int(time.time() * 1000)
    action()
    record = {"name": name, "start": started, "end": int(time.time() * 1000)}
    if group:  # the stages this part ran, as Spark numbered them
        tracker = sc.statusTracker()
        record["stages"] = sorted(s for j in tracker.getJobIdsForGroup(group)
                                  for s in tracker.getJobInfo(j).stageIds)
    print("MARK", json.dumps(record), flush=True)


def skewed(index, rows):
    time.sleep(6.0 if index == 0 else 0.3)
    yield sum(1 for _ in rows)


def even(index, rows):
    time.sleep(0.8)
    yield sum(1 for _ in rows)


sc.setJobGroup("skewed", "straggler check")
sc.setJobDescription("skewed job")
mark("skewed", lambda: sc.parallelize(range(800), 8).mapPartitionsWithIndex(skewed).collect(), "skewed")
sc.setJobGroup("even", "straggler check")
sc.setJobDescription("even job")
mark("even", lambda: sc.parallelize(range(800), 8).mapPartitionsWithIndex(even).collect(), "even")
sc.setJobGroup("queries", "sql")

spark.range(0, 200000).createOrReplaceTempView("numbers")
sc.setJobDescription('TPC-DS-like "q1", with, commas')
mark("query-1", lambda: spark.sql("SELECT id % 10 AS k, count(*) FROM numbers GROUP BY id % 10").collect())
sc.setJobDescription("second query\nover two lines")
mark("query-2", lambda: spark.sql("SELECT sum(id) FROM numbers WHERE id % 3 = 0").collect())
# The driver's listener queues, by their threads' names (spark-listener-group-<queue>).
threads = sc._jvm.java.lang.Thread.getAllStackTraces().keySet()
print("QUEUES", json.dumps(sorted(t.getName() for t in threads if t.getName().startswith("spark-listener-group-"))),
      flush=True)
spark.stop()
