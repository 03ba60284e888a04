"""TPC-DS queries on Spark, for `sparkscope demo`: the driver program.

spark-submit runs it with one argument, a JSON plan written by the demo:
  {"data_dir": ..., "tables": [...], "schema_cache": path or null, "repetitions": N,
   "queries": [{"name": "q3", "sql": "..."}, ...]}

It prints one JSON object per line on stdout (Spark logs to stderr), which
the demo reads as the run goes:
  {"event": "app", "app_id": ..., "metrics_id": ..., "spark_version": ...}
  {"event": "ready", "seconds": 1.2}                      (tables registered)
  {"event": "query", "name": "q3", "repetition": 1, "status": "ok" | "FAILED",
   "seconds": 2.1, "rows": 100, "start_ms": ..., "end_ms": ..., "error": "first line"}
  {"event": "done", "failed": 0}

A failing query (a missing table, an unsupported construct) is reported and
the next one runs. Each query runs under the job description "TPC-DS <name>"
and the job group "tpcds-<name>", so that the annotator's query and job
events name it.
"""

import json
import os
import re
import sys
import time

from pyspark.sql import SparkSession


def emit(**fields):
    print(json.dumps(fields), flush=True)


def first_line(err):
    """The line that says what went wrong. A Py4JJavaError's own first line only
    names the py4j call ("An error occurred while calling o414.collectToPython."):
    the Java exception's summary is the useful one."""
    java = getattr(err, "java_exception", None)
    text = ""
    if java is not None:
        try:
            text = java.toString()
        except Exception:
            text = ""
    text = (text or str(err)).strip() or type(err).__name__
    return text.splitlines()[0][:300]


def metrics_id(sc):
    """The applicationid tag the metrics and annotations carry: spark.metrics.namespace
    (with ${...} references resolved) if set, else the application id."""
    conf = sc.getConf()
    namespace = conf.get("spark.metrics.namespace", None)
    if not namespace:
        return sc.applicationId
    return re.sub(r"\$\{([^}]+)\}", lambda m: conf.get(m.group(1), m.group(0)), namespace)


def register_tables(spark, data_dir, tables, schema_cache):
    """A temporary view per table. Parquet schema inference runs one Spark job per
    table (about 0.3 s each once warm); schemas found once are kept in
    schema_cache, so later runs register all tables without a job."""
    from pyspark.sql.types import StructType

    known = {}
    if schema_cache and os.path.exists(schema_cache):
        try:
            with open(schema_cache) as f:
                known = json.load(f)
        except (OSError, ValueError):
            known = {}
    inferred = False
    for table in tables:
        reader = spark.read
        if table in known:
            reader = reader.schema(StructType.fromJson(known[table]))
        df = reader.parquet(f"{data_dir}/{table}.parquet")
        if table not in known:
            known[table] = df.schema.jsonValue()
            inferred = True
        df.createOrReplaceTempView(table)
    if schema_cache and inferred:
        try:  # best effort: a read-only data directory only costs the inference next time
            tmp = f"{schema_cache}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                json.dump(known, f)
            os.replace(tmp, schema_cache)
        except OSError:
            pass


def main(plan_path):
    with open(plan_path) as f:
        plan = json.load(f)
    spark = SparkSession.builder.getOrCreate()
    sc = spark.sparkContext
    emit(event="app", app_id=sc.applicationId, metrics_id=metrics_id(sc), spark_version=spark.version,
         master=sc.master)

    started = time.time()
    sc.setJobGroup("tpcds-setup", "TPC-DS setup: register tables")
    register_tables(spark, plan["data_dir"], plan["tables"], plan.get("schema_cache"))
    emit(event="ready", seconds=round(time.time() - started, 3))

    failed = 0
    try:
        for repetition in range(1, plan["repetitions"] + 1):
            for query in plan["queries"]:
                name = query["name"]
                sc.setJobGroup(f"tpcds-{name}", f"TPC-DS {name}")
                sc.setJobDescription(f"TPC-DS {name}")
                start = time.time()
                status, rows, error = "ok", None, None
                try:
                    rows = len(spark.sql(query["sql"]).collect())
                except Exception as err:  # reported, and the run goes on
                    status, error = "FAILED", first_line(err)
                    failed += 1
                end = time.time()
                emit(event="query", name=name, repetition=repetition, status=status,
                     seconds=round(end - start, 3), rows=rows, start_ms=int(start * 1000),
                     end_ms=int(end * 1000), error=error)
        emit(event="done", failed=failed)
    finally:
        # An orderly stop: executors send their last metric reports and the
        # annotator writes the application's end.
        spark.stop()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: spark-submit tpcds_queries.py PLAN.json")
    main(sys.argv[1])
