"""The annotator's memory peaks are Spark's own: per stage and executor they
equal what Spark's REST API reports as peakMemoryMetrics for the same run,
field by field, on Spark 3.5 and on Spark 4. The process tree's RSS is the
exception: Spark's own process-tree metrics are off as shipped (REST says 0)
and the annotator's fork-free sampler gives those peaks."""

from __future__ import annotations

import json


from sparkscope.provision.annotator_jar import ensure_annotator_jar
from sparkscope.spark.conf import annotator_properties
from sparkscope.spark.submit import ensure_pyspark
from sparkscope.settings import ROOT

from conftest import run_spark_job, SPARK4_VERSION

# From the annotator's process-tree sampler, not Spark's (off as shipped: REST reports 0 for them).
SAMPLED = {"ProcessTreeJVMRSSMemory", "ProcessTreePythonRSSMemory", "ProcessTreeOtherRSSMemory"}
# Back to zero once the work is done, so no heartbeat after the REST read can raise them.
POOLS = ["OnHeapExecutionMemory", "OffHeapExecutionMemory", "OffHeapStorageMemory", "OffHeapUnifiedMemory"]
MEMORY_FIELDS = ["JVMHeapMemory", "OnHeapExecutionMemory", "OnHeapStorageMemory", "OnHeapUnifiedMemory",
                 "ProcessTreeJVMRSSMemory", "DirectPoolMemory"]


def rest_lines(stdout: str, name: str) -> dict:
    return json.loads(next(line.split(" ", 1)[1] for line in stdout.splitlines() if line.startswith(name + " ")))


def points(stack, measurement: str, app_id: str) -> list[dict]:
    series = stack.wait_for(f'SELECT * FROM "{measurement}" WHERE "applicationid" = \'{app_id}\'',
                            lambda s: bool(s))
    columns = series[0]["columns"]
    return [dict(zip(columns, row)) for row in series[0]["values"]]


def peaks_match_spark_rest(stack, tmp_path, spark_home=None):
    jar = ensure_annotator_jar(ROOT, progress=lambda _: None)
    run = run_spark_job(stack, "memory_job.py", tmp_path, spark_home=spark_home, args=["32"],
                        conf={**annotator_properties(stack.settings, jar), "spark.ui.enabled": "true",
                              "spark.ui.port": "0"})
    # Everything the annotator wrote is stored once its last point, the application's end, is: the
    # last stage's peaks left the driver a moment before it, and Telegraf flushes every 2 s.
    stack.wait_for(f"SELECT \"duration_ms\" FROM \"sparkscope_application\" WHERE \"applicationid\" = "
                   f"'{run.app_id}' AND \"status\" = 'FINISHED'", lambda s: bool(s))
    rest_stages = rest_lines(run.stdout, "REST_STAGES")
    rest_executors = rest_lines(run.stdout, "REST_EXECUTORS")
    assert rest_stages, "the job ran no stage Spark reports"

    stage_points = {}
    for p in points(stack, "sparkscope_stage_executor_peaks", run.app_id):
        stage_points[(f'{p["stage_id"]}.{p["attempt"]}', p["executor_id"])] = p
    compared = 0
    for stage, by_executor in rest_stages.items():
        for executor, rest in by_executor.items():
            if not rest:
                continue  # Spark had no metrics for it either
            mine = stage_points.get((stage, executor))
            assert mine is not None, f"no peaks written for stage {stage} on executor {executor}"
            for field, value in rest.items():
                if field in SAMPLED:
                    assert value == 0, (stage, executor, field, "Spark's own process-tree metrics ran")
                    continue
                if mine.get(field) is not None or value:
                    assert mine.get(field) == value, (stage, executor, field)
                    compared += 1
    assert compared >= 20, f"only {compared} stage fields compared"
    # One task's own execution peak (TaskMetrics.peakExecutionMemory), the highest per stage and executor.
    task_peaks = rest_lines(run.stdout, "REST_TASK_PEAKS")
    assert any(peak > 0 for by_executor in task_peaks.values() for peak in by_executor.values()), task_peaks
    for stage, by_executor in task_peaks.items():
        for executor, peak in by_executor.items():
            assert stage_points[(stage, executor)]["TaskPeakExecutionMemory"] == peak, (stage, executor)

    executor_points = {p["executor_id"]: p for p in points(stack, "sparkscope_executor_peaks", run.app_id)}
    for executor, rest in rest_executors.items():
        if not rest:
            continue
        mine = executor_points[executor]
        for field, value in rest.items():
            # A heartbeat between the REST read and the application's end may only raise a peak.
            assert mine[field] >= value, (executor, field)
        for field in POOLS:
            assert mine[field] == rest[field], (executor, field)
    # Each JVM's RSS peak is the sampler's: a JVM's size, never Spark's 0.
    for executor, mine in executor_points.items():
        assert 50 << 20 < mine["ProcessTreeJVMRSSMemory"] < 8 << 30, (executor, mine)
    workers = [e for e in executor_points if e != "driver"]
    assert len(workers) == 2, executor_points.keys()
    # Each pool was used somewhere (Spark 4's adaptive plan may run the whole
    # aggregation on one executor, leaving the other's execution memory at 0).
    for field in MEMORY_FIELDS:
        assert max(executor_points[e][field] for e in workers) > 0, field
    # The whole stage peak is the highest of its executors.
    for p in points(stack, "sparkscope_stage_peaks", run.app_id):
        ran = [v for (s, _), v in stage_points.items() if s == f'{p["stage_id"]}.{p["attempt"]}']
        assert p["JVMHeapMemory"] == max(v["JVMHeapMemory"] for v in ran)
        assert p["executors"] == len(ran)
    settings = points(stack, "sparkscope_memory_conf", run.app_id)
    assert settings[0]["spark.master"].startswith("local-cluster"), settings
    return run


def test_python_worker_memory_shows_in_python_rss_and_in_the_pyspark_advice(stack, tmp_path):
    from sparkscope.report.advice import MIB, advise, parse_size
    from sparkscope.report.run_facts import RunReader

    jar = ensure_annotator_jar(ROOT, progress=lambda _: None)
    run = run_spark_job(stack, "python_memory_job.py", tmp_path, args=["300"],
                        conf=annotator_properties(stack.settings, jar))
    executors = {p["executor_id"]: p for p in points(stack, "sparkscope_executor_peaks", run.app_id)}
    for executor in ("0", "1"):
        assert executors[executor]["ProcessTreePythonRSSMemory"] >= 300 * MIB, executors[executor]
    advice = advise(RunReader(stack.settings.influx_reader, stack.settings.database).read(run.app_id))
    pyspark = {r.key: r.value for r in advice.recommendations}.get("spark.executor.pyspark.memory")
    assert pyspark and parse_size(pyspark) >= 300 * MIB * 1.25, advice.recommendations


def test_stage_and_executor_peaks_equal_sparks_own_on_spark_3(stack, tmp_path):
    peaks_match_spark_rest(stack, tmp_path)


def test_stage_and_executor_peaks_equal_sparks_own_on_spark_4(stack, tmp_path):
    home = ensure_pyspark(SPARK4_VERSION, stack.settings.cache_dir, progress=lambda _: None)
    log = peaks_match_spark_rest(stack, tmp_path, spark_home=home).log.read_text()
    assert "memory peaks are off" not in log
