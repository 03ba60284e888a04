"""A Spark Connect client (tests/test_connect.py): one session of one user
that runs `repeats` aggregations over `rows` rows each, in 4 partitions, and
prints its session id (SESSION <id>) and each result. Usage:
connect_client.py sc://127.0.0.1:PORT/ USER ROWS REPEATS"""

import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

url, user, rows, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
spark = SparkSession.builder.remote(f"{url.rstrip('/')}/;user_id={user}").create()
print(f"SESSION {spark.session_id}", flush=True)
for i in range(repeats):
    total = (spark.range(0, rows, 1, 4)
             .select(F.xxhash64(F.col("id"), F.lit(i)).alias("h"))
             .agg(F.sum(F.col("h") % 1000).alias("s"))
             .collect()[0]["s"])
    print(f"RESULT {i} {total}", flush=True)
spark.stop()
