"""Kills executor 1's JVM (by pid) while a shuffle-map stage still runs,
after it finished some map tasks: Spark re-runs them in the same stage
attempt and posts their old task ends again with reason Resubmitted.
Prints `MARK <json>` with the map stage's id and the pid killed."""

import json
import os
import signal
import subprocess
import time

from pyspark.sql import SparkSession

spark = SparkSession.builder.appName("sparkscope-test-executor-lost").getOrCreate()
sc = spark.sparkContext
app_id = sc.applicationId
print("APP_ID", app_id, flush=True)


def slow_map(index, rows):
    time.sleep(8.0 if index == 7 else 0.7)
    for r in rows:
        yield (r % 4, 1)


def executor_pid(executor_id):
    # -ww: whole command lines, whatever COLUMNS the environment carries (ps cuts at it otherwise).
    out = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if ("CoarseGrainedExecutorBackend" in line and f"--executor-id {executor_id} " in line
                and app_id in line):
            return int(line.split()[0])
    return None


import threading

result = {}


def run():
    sc.setJobDescription("shuffle with a lost executor")
    result["counts"] = sorted(sc.parallelize(range(800), 8).mapPartitionsWithIndex(slow_map)
                              .reduceByKey(lambda a, b: a + b).collect())


worker = threading.Thread(target=run)
worker.start()
tracker = sc.statusTracker()
deadline = time.time() + 120
killed = None
while time.time() < deadline and killed is None:
    for sid in tracker.getActiveStageIds():
        info = tracker.getStageInfo(sid)
        if info and info.numCompletedTasks >= 4:
            pid = executor_pid(1)
            if pid:
                os.kill(pid, signal.SIGKILL)
                killed = {"stage": sid, "pid": pid, "completed_before": info.numCompletedTasks}
                break
    time.sleep(0.1)
worker.join(300)
print("MARK", json.dumps(dict(killed or {}, counts=result.get("counts"))), flush=True)
spark.stop()
