"""A run that holds its executors idle between two phases of work: a job of
1.5 s tasks, a sleep in the driver (argv[1] seconds, default 20) while the
executors stay, another job. Under dynamic allocation with a short idle
timeout the executors go during the sleep and new ones come for the second
phase."""

import sys
import time

from pyspark.sql import SparkSession

pause_s = float(sys.argv[1]) if len(sys.argv) > 1 else 20.0
spark = SparkSession.builder.appName("sparkscope-test-capacity").getOrCreate()
sc = spark.sparkContext
print("APP_ID", sc.applicationId, flush=True)


def work(_):
    time.sleep(1.5)
    return 1


sc.setJobDescription("first phase")
assert sc.parallelize(range(4), 4).map(work).sum() == 4
time.sleep(pause_s)
sc.setJobDescription("second phase")
assert sc.parallelize(range(4), 4).map(work).sum() == 4
spark.stop()
