"""A small shuffle that spills, for a run whose spark.local.dir (SPARK_LOCAL_DIRS)
sits on a slow disk: every shuffle and spill file goes there."""

from pyspark.sql import SparkSession

spark = (SparkSession.builder.appName("sparkscope-test-slow-local-dir")
         # Spill every 400 records (twice per reduce task), so spill files are written too.
         .config("spark.shuffle.spill.numElementsForceSpillThreshold", "400")
         .getOrCreate())
sc = spark.sparkContext
print("APP_ID", sc.applicationId, flush=True)
# Few records and tasks: every I/O on the slow disk waits 150 ms (a synchronous
# mount: each write commits ext4's journal too), and a handful of them inside
# the stages is all the test needs. One map and one reduce task per executor.
pairs = sc.parallelize(range(2_000), 2).map(lambda x: (x % 100, x))
print("GROUPS", pairs.groupByKey(2).mapValues(len).count(), flush=True)
spark.stop()
