"""A workload with a known memory need: caches a dataset of a size given on
the command line (MiB, default 64) and runs a wide aggregation over it. Before
it stops, prints what Spark's own REST API says the peaks were, per executor
and per stage: `REST_EXECUTORS <json>`, `REST_STAGES <json>`, and each task's own
execution peak, the highest per stage and executor: `REST_TASK_PEAKS <json>`."""

import json
import sys
import urllib.request

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

cache_mib = int(sys.argv[1]) if len(sys.argv) > 1 else 64
spark = SparkSession.builder.appName("sparkscope-test-memory").getOrCreate()
sc = spark.sparkContext
print("APP_ID", sc.applicationId, flush=True)

# 8 bytes per long, 2 columns: about cache_mib MiB once deserialised in memory.
rows = cache_mib * 1024 * 1024 // 16
data = spark.range(0, rows, numPartitions=8).withColumn("k", F.col("id") % 100_003).persist()
print("CACHED_ROWS", data.count(), flush=True)
sc.setJobDescription("wide aggregation")
data.groupBy("k").agg(F.sum("id"), F.countDistinct("id")).collect()


def rest(path):
    with urllib.request.urlopen(f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/{path}", timeout=30) as r:
        return json.load(r)


stages = {}
task_peaks = {}  # per stage and executor: the highest peakExecutionMemory of one task
for stage in rest("stages"):
    if stage["status"] != "COMPLETE":
        continue
    key = f"{stage['stageId']}.{stage['attemptId']}"
    detail = rest(f"stages/{stage['stageId']}/{stage['attemptId']}")
    stages[key] = {
        executor: summary.get("peakMemoryMetrics") for executor, summary in detail["executorSummary"].items()}
    for task in rest(f"stages/{stage['stageId']}/{stage['attemptId']}/taskList?length=100000"):
        peak = (task.get("taskMetrics") or {}).get("peakExecutionMemory")
        if peak is not None:
            by_executor = task_peaks.setdefault(key, {})
            by_executor[task["executorId"]] = max(peak, by_executor.get(task["executorId"], 0))
print("REST_STAGES", json.dumps(stages), flush=True)
print("REST_TASK_PEAKS", json.dumps(task_peaks), flush=True)
print("REST_EXECUTORS", json.dumps({e["id"]: e.get("peakMemoryMetrics") for e in rest("allexecutors")}),
      flush=True)
spark.stop()
