"""A workload with a known memory need: caches a dataset of a size given on
the command line (MiB, default 64) and runs a wide aggregation over it. Before
it stops, prints what Spark's own REST API says the peaks were, per executor
and per stage: `REST_EXECUTORS <json>`, `REST_STAGES <json>`."""

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
for stage in rest("stages"):
    if stage["status"] != "COMPLETE":
        continue
    detail = rest(f"stages/{stage['stageId']}/{stage['attemptId']}")
    stages[f"{stage['stageId']}.{stage['attemptId']}"] = {
        executor: summary.get("peakMemoryMetrics") for executor, summary in detail["executorSummary"].items()}
print("REST_STAGES", json.dumps(stages), flush=True)
print("REST_EXECUTORS", json.dumps({e["id"]: e.get("peakMemoryMetrics") for e in rest("allexecutors")}),
      flush=True)
spark.stop()
