"""A small shuffle that spills, for a run whose spark.local.dir (SPARK_LOCAL_DIRS)
sits on a slow disk: every shuffle and spill file goes there."""

from pyspark.sql import SparkSession

spark = (SparkSession.builder.appName("sparkscope-test-slow-local-dir")
         # Spill every thousand records, so spill files are written too.
         .config("spark.shuffle.spill.numElementsForceSpillThreshold", "1000")
         .getOrCreate())
sc = spark.sparkContext
print("APP_ID", sc.applicationId, flush=True)
pairs = sc.parallelize(range(20_000), 4).map(lambda x: (x % 100, x))
print("GROUPS", pairs.groupByKey(4).mapValues(len).count(), flush=True)
spark.stop()
