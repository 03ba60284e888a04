"""Stops the application while a SQL query's stage is half done: 7 of its 8
tasks finish, the 8th sleeps, and the driver calls spark.stop() as a
Ctrl-C or a stopped stream would. Prints `MARK <json>` with the stage id."""

import json
import threading
import time

from pyspark.sql import SparkSession
from pyspark.sql.functions import udf

spark = SparkSession.builder.appName("sparkscope-test-killed").getOrCreate()
sc = spark.sparkContext
print("APP_ID", sc.applicationId, flush=True)


@udf("long")
def slow(x):
    time.sleep(600 if x == 7 else 0.2)
    return x


def run():
    sc.setJobGroup("doomed", "killed mid-stage", interruptOnCancel=True)
    try:
        spark.range(0, 8, 1, 8).select(slow("id").alias("v")).collect()
    except Exception as e:  # the stop below cancels it
        print("JOB ENDED", type(e).__name__, flush=True)


threading.Thread(target=run, daemon=True).start()
tracker = sc.statusTracker()
deadline = time.time() + 120
while time.time() < deadline:
    stages = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
    done = [s for s in stages if s and s.numCompletedTasks >= 7]
    if done:
        print("MARK", json.dumps({"stage": done[0].stageId, "completed": done[0].numCompletedTasks,
                                  "stopped_at": int(time.time() * 1000)}), flush=True)
        break
    time.sleep(0.2)
spark.stop()
