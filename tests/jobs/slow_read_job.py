"""Tasks that read text files from a slow mount (tests/support/slow_fs.py: every
read sleeps in the FUSE daemon), in the executor JVMs: their task threads
wait in the kernel for FUSE's answer (D state, wait channel
request_wait_answer). Argument: the directory of files."""

import sys

from pyspark.sql import SparkSession

spark = SparkSession.builder.appName("sparkscope-test-slow-read").getOrCreate()
print("APP_ID", spark.sparkContext.applicationId, flush=True)
# One partition per file, read by the JVM (Hadoop's local file system), 64 KiB per read.
print("LINES", spark.read.text(sys.argv[1]).count(), flush=True)
spark.stop()
