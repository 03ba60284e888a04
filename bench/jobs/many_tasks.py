"""N tiny JVM-only tasks (no Python workers), for listener-bus load."""

import json
import sys
import time

from pyspark.sql import SparkSession

tasks = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
spark = SparkSession.builder.appName(f"sparkscope-bench-{tasks}-tasks").getOrCreate()
print("APP_ID", spark.sparkContext.applicationId, flush=True)
started = time.monotonic()
spark.range(0, tasks, 1, tasks).count()
print("JOB_SECONDS", round(time.monotonic() - started, 3), flush=True)

# Spark times every listener on the bus (Dropwizard timers, in ns); read them
# at full precision here, since the Graphite sink rounds to 0.01 ms.
registry = spark.sparkContext._jsc.sc().listenerBus().metrics().metricRegistry()
timers = registry.getTimers()
for name in timers.keySet():
    if name.startswith("listenerProcessingTime."):
        timer = timers.get(name)
        snap = timer.getSnapshot()
        print("LISTENER", json.dumps({"name": name.split(".", 1)[1], "count": timer.getCount(),
                                      "mean_us": snap.getMean() / 1000, "p99_us": snap.get99thPercentile() / 1000}))
counters = registry.getCounters()
for name in counters.keySet():
    if name.endswith("numDroppedEvents"):
        print("DROPPED", json.dumps({"queue": name.split(".")[1], "count": counters.get(name).getCount()}))
sys.stdout.flush()
time.sleep(3)  # a last sink report after the job, before stop
spark.stop()
