"""Tasks that read text files from a slow mount (src/sparkscope_testkit/slow_fs.py: every
read sleeps in the FUSE daemon), in the executor JVMs: their task threads
wait in the kernel for FUSE's answer (D state, wait channel
request_wait_answer). Argument: the directory of files."""

import sys
import time

from pyspark.sql import SparkSession


def wait_for_executors(spark, n, deadline_s=120):
    """Both executors registered before any task: local-cluster starts them a
    few seconds apart, and the first would otherwise run every task."""
    end = time.time() + deadline_s
    while spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() < n + 1 and time.time() < end:
        time.sleep(0.2)

spark = SparkSession.builder.appName("sparkscope-test-slow-read").getOrCreate()
print("APP_ID", spark.sparkContext.applicationId, flush=True)
wait_for_executors(spark, 2)
# One partition per file, read by the JVM (Hadoop's local file system), 64 KiB per read.
print("LINES", spark.read.text(sys.argv[1]).count(), flush=True)
spark.stop()
