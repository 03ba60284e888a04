"""Two phases, each longer than the thread sampler's 10 s period, with their
start and end printed (epoch ms):
- JVM: SQL that hashes strings, so task threads run on a CPU;
- PYTHON: a Python function that spins in the PySpark workers while the task
  threads wait for their answers.
Argument: seconds per phase."""

import sys
import time

from pyspark.sql import SparkSession


def burn_in_python(seconds):
    end = time.time() + seconds
    n = 0
    while time.time() < end:
        n += sum(i * i for i in range(1000))
    return n


def wait_for_executors(spark, n, deadline_s=120):
    """Both executors registered before any task: local-cluster starts them a
    few seconds apart, and the first would otherwise run every task."""
    end = time.time() + deadline_s
    while spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() < n + 1 and time.time() < end:
        time.sleep(0.2)


spark = SparkSession.builder.appName("sparkscope-test-cpu-then-python").getOrCreate()
sc = spark.sparkContext
print("APP_ID", sc.applicationId, flush=True)
wait_for_executors(spark, 2)
seconds = float(sys.argv[1])
started = time.time()
print("JVM_START", int(started * 1000), flush=True)
while time.time() < started + seconds:
    spark.range(0, 6_000_000, 1, 2).selectExpr("sum(hash(sha2(cast(id as string), 256)))").collect()
print("JVM_END", int(time.time() * 1000), flush=True)
print("PYTHON_START", int(time.time() * 1000), flush=True)
sc.parallelize([seconds / 2] * 4, 4).map(burn_in_python).collect()
print("PYTHON_END", int(time.time() * 1000), flush=True)
spark.stop()
