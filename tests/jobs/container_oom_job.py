"""Executors 0 and 1 each run in a memory cgroup with a limit (the java wrapper
of tests/test_containers.py puts them there before the JVM starts, as YARN's
and Kubernetes' runtimes do). Two ways past the limit, as users meet them:

1. "python": a Python worker on each executor holds more than the limit
   leaves: the kernel's OOM killer kills the worker (the largest process in
   the cgroup), the executor lives on, the task fails; the job fails after
   its retries and is caught here.
2. "heap": cached data fills the executors' heaps: the JVM grows past the
   limit and the kernel kills it (exit 137); Spark replaces the executor
   (outside any cgroup) and the job finishes.

Prints APP_ID and `MARK <phase> <json>` lines."""

import json
import sys
import time

from pyspark import StorageLevel
from pyspark.sql import SparkSession

PYTHON_MB = int(sys.argv[1])
CACHE_MB_PER_EXECUTOR = int(sys.argv[2])

spark = SparkSession.builder.appName("sparkscope-test-container-oom").getOrCreate()
sc = spark.sparkContext
print("APP_ID", sc.applicationId, flush=True)


def hold_memory(rows):
    held = b"\x01" * (PYTHON_MB << 20)  # written, so resident: a bytearray would stay unbacked
    time.sleep(2)
    yield len(held)


def wait_executors(n, deadline_s=60):
    end = time.time() + deadline_s
    while time.time() < end and sc._jsc.sc().getExecutorMemoryStatus().size() < n + 1:
        time.sleep(0.2)


wait_executors(2)
time.sleep(3)  # a few container samples before anything happens
sc.setJobDescription("python workers past the container limit")
try:
    sc.parallelize(range(2), 2).mapPartitions(hold_memory).collect()
    print("MARK python " + json.dumps({"failed": False}), flush=True)
except Exception as err:  # noqa: BLE001 - the job is meant to fail
    print("MARK python " + json.dumps({"failed": True, "error": str(err)[:300]}), flush=True)
time.sleep(4)  # the oom_kill counts are sampled

sc.setJobDescription("cached data past the container limit")
# About 130 bytes a row in the in-memory columnar cache; random strings do not compress.
rows = 2 * CACHE_MB_PER_EXECUTOR * 1_000_000 // 130
data = spark.range(0, rows, 1, 8).selectExpr("id", "uuid() AS a", "uuid() AS b", "uuid() AS c")
data.persist(StorageLevel.MEMORY_ONLY)
count = data.count()
print("MARK heap " + json.dumps({"count": count}), flush=True)
data.unpersist()
time.sleep(3)
spark.stop()
