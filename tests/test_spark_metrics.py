"""A real Spark application in local-cluster mode reports per-executor metrics
through the Graphite sink and Telegraf into InfluxDB, with the stored schema."""

from __future__ import annotations

import dataclasses
import re

import pytest

from conftest import JOBS, SINK_PERIOD_S
from sparkscope.spark.conf import SINK, SINK_REGEX, sparkscope_properties
from sparkscope.spark.submit import run_submit, submit_argv
from sparkscope.store import schema
from sparkscope_testkit.graphite_tap import GraphiteTap

EXECUTORS = {"0", "1"}
ALL_JVMS = EXECUTORS | {"driver"}


# Written by the annotator's process-tree sampler (Spark's own are off as shipped), not through
# Graphite: no username tag.
SAMPLED = {"ProcessTreeJVMRSSMemory", "ProcessTreePythonRSSMemory", "ProcessTreeOtherRSSMemory"}


def per_executor(stack, run, measurement: str, agg: str = "max") -> dict[str, float]:
    by_sink = "" if measurement in SAMPLED else " AND \"username\" = 'spark'"
    series = stack.influx(
        f'SELECT {agg}("value") FROM "{measurement}" WHERE "applicationid" = \'{run.app_id}\'{by_sink} '
        f'GROUP BY "executorid"'
    )
    return {s["tags"]["executorid"]: s["values"][0][1] for s in series}


def test_active_tasks_arrive_per_executor_and_show_work(stack, metrics_run):
    active = per_executor(stack, metrics_run, "threadpool.activeTasks")
    assert set(active) == EXECUTORS  # the driver runs no tasks in local-cluster mode
    assert max(active.values()) >= 1, f"no executor ever reported a running task: {active}"


@pytest.mark.parametrize("measurement", ["JVMHeapMemory", "ProcessTreeJVMRSSMemory", "OnHeapUnifiedMemory"])
def test_executor_memory_arrives_per_executor_and_is_nonzero(stack, metrics_run, measurement):
    peaks = per_executor(stack, metrics_run, measurement)
    assert set(peaks) == ALL_JVMS
    for executor in EXECUTORS:
        assert peaks[executor] > 0, f"{measurement} of executor {executor} is {peaks[executor]}"


def test_executor_rss_is_a_plausible_jvm_size(stack, metrics_run):
    rss = per_executor(stack, metrics_run, "ProcessTreeJVMRSSMemory")
    for executor, value in rss.items():
        assert 50e6 < value < 8e9, f"executor {executor} RSS {value} bytes is not a JVM's"


def test_minor_gc_counts_arrive_per_jvm(stack, metrics_run):
    counts = per_executor(stack, metrics_run, "MinorGCCount")
    assert set(counts) == ALL_JVMS
    assert all(v >= 0 for v in counts.values())


def test_tags_follow_the_stored_schema(stack, metrics_run):
    series = stack.influx(
        f'SHOW SERIES FROM "JVMHeapMemory" WHERE "applicationid" = \'{metrics_run.app_id}\''
    )
    keys = sorted(v[0] for v in series[0]["values"])
    for key in keys:
        measurement, *tags = key.split(",")
        tag_names = {t.split("=")[0] for t in tags}
        assert measurement == "JVMHeapMemory"
        assert {"username", "applicationid", "executorid", "namespace", "host"} <= tag_names
        assert "namespace=ExecutorMetrics" in tags


def test_points_carry_the_time_spark_measured_them(stack, metrics_run):
    rows = stack.influx(
        f'SELECT "value" FROM "threadpool.activeTasks" WHERE "applicationid" = \'{metrics_run.app_id}\''
    )[0]["values"]
    times = [r[0] for r in rows]
    assert metrics_run.started_ms - 2000 <= min(times) and max(times) <= metrics_run.ended_ms + 2000
    assert len(set(times)) >= 5, "the sink should have reported several times during the job"


def test_the_executors_logs_are_kept_beside_the_runs_log_not_in_the_pyspark_package(metrics_run):
    from sparkscope.spark.submit import spark_home

    (home,) = metrics_run.log.parent.glob(f"{metrics_run.log.stem}.spark-*")
    for executor in EXECUTORS:
        stderr = home / "work" / metrics_run.app_id / executor / "stderr"
        assert "CoarseGrainedExecutorBackend" in stderr.read_text(), stderr
    assert not (spark_home() / "work" / metrics_run.app_id).exists()


def test_the_sink_sends_only_what_the_stack_keeps_and_everything_when_it_keeps_all(stack, tmp_path):
    """The shipped sink filter (spark.metrics.conf.*.sink.graphite.regex, generated
    from the schema's read names and sources) is applied by Spark itself: an
    executor sends the sources sparkscope reads most of, and of the others only
    what it reads, counters (failedTasks -> failedTasks.count) and gauges alike;
    a stack that keeps every metric (SPARKSCOPE_UNREAD_METRICS=pass) gets no
    filter, so Spark sends it everything."""
    tap = GraphiteTap((stack.settings.graphite_host, stack.settings.graphite_port))
    sent = {}
    try:
        for unread in ("drop", "pass"):
            props = sparkscope_properties(dataclasses.replace(stack.settings, unread_metrics=unread),
                                          period_s=SINK_PERIOD_S)
            assert (SINK_REGEX in props) == (unread == "drop")
            props[SINK + "port"] = str(tap.port)
            log = tmp_path / f"steady-{unread}.log"
            done = run_submit(submit_argv(JOBS / "steady_job.py", "local-cluster[2,1,1024]", props, ["6"]), log, 240)
            app_id = re.search(r"^APP_ID (\S+)$", done.stdout, re.M)
            assert done.returncode == 0 and app_id, log.read_text()[-2000:]
            # <prefix>.<app>.<executor>.<source>.<measurement>, by executor
            by_jvm: dict[str, set[tuple[str, str]]] = {}
            for path, _ in tap.points(app_id.group(1)):
                _, _, jvm, source, measurement = path.split(".", 4)
                by_jvm.setdefault(jvm, set()).add((source, measurement))
            sent[unread] = by_jvm
    finally:
        tap.close()
    kept = set(schema.SPARK_READ)
    shipped = set().union(*sent["drop"].values())
    # Of the sources not sent whole, only what Telegraf keeps; nothing of the sources sparkscope never reads.
    stray = {(s, m) for s, m in shipped if s not in schema.SINK_WHOLE_SOURCES and m not in kept}
    assert not stray, f"sent and then dropped by Telegraf: {sorted(stray)}"
    assert {s for s, _ in shipped} <= set(schema.SPARK_SOURCES), {s for s, _ in shipped}
    for jvm in ("0", "1"):  # counters, the executor source's and ExecutorMetrics' gauges, the JVM source's
        names = {m for _, m in sent["drop"][jvm]}
        assert {"runTime.count", "succeededTasks.count", "threadpool.activeTasks", "JVMHeapMemory",
                "MinorGCCount", "jvmCpuTime", "heap.max", "filesystem.file.read_bytes"} <= names, names
        assert not [m for s, m in sent["drop"][jvm] if s == "jvm" and m != "heap.max" and "Old-Gen" not in m]
    assert {"tasks.failedTasks.count", "JVMHeapMemory"} <= {m for _, m in sent["drop"]["driver"]}  # app status
    everything = set().union(*sent["pass"].values())
    assert shipped < everything and ("jvm", "heap.used") in everything
    assert len(sent["drop"]["1"]) * 2 < len(sent["pass"]["1"]), (len(sent["drop"]["1"]), len(sent["pass"]["1"]))
    print(f"\nnames an executor sent: {len(sent['drop']['1'])} filtered, {len(sent['pass']['1'])} unfiltered; "
          f"the driver: {len(sent['drop']['driver'])}, {len(sent['pass']['driver'])}")
