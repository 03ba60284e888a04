"""Runs stages of one kind over and over, so that a profile can be taken
while they run; the test steers it through a file holding the phase:
"burn" (a Java UDF that burns CPU in a named method), "nap" (a Java UDF that
sleeps: off CPU) or "stop". Prints APP_ID, then ROUND <phase> per stage."""

import sys
import time
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql.types import LongType

phase_file = Path(sys.argv[1])
limit_s = float(sys.argv[2]) if len(sys.argv) > 2 else 300
spark = SparkSession.builder.appName("sparkscope-test-profiled").getOrCreate()
sc = spark.sparkContext
print("APP_ID", sc.applicationId, flush=True)
spark.udf.registerJavaFunction("burn", "ProfiledUdfs$Burn", LongType())
spark.udf.registerJavaFunction("nap", "ProfiledUdfs$Nap", LongType())

end = time.time() + limit_s
while time.time() < end:
    phase = phase_file.read_text().strip() if phase_file.exists() else "burn"
    if phase not in ("burn", "nap"):
        break
    sc.setJobDescription(f"{phase} round")
    rows = 4_000 if phase == "burn" else 200
    spark.range(0, rows, 1, 2).selectExpr(f"sum({phase}(id))").collect()
    print("ROUND", phase, flush=True)
spark.stop()
