"""The annotator puts SQL queries, jobs and stages on the dashboards as
regions with the right start and end, flags the stage with one slow task as a
straggler and no balanced stage, and never holds Spark up when InfluxDB is
unreachable."""

from __future__ import annotations

import json
import time

import pytest

from sparkscope.provision.annotator_jar import ensure_annotator_jar
from sparkscope.spark.conf import annotator_properties
from sparkscope.spark.submit import ensure_pyspark
from sparkscope.settings import ROOT

from conftest import run_spark_job, SPARK4_VERSION

DASHBOARD = ROOT / "dashboards" / "spark-executors.json"
SLACK_MS = 1500  # driver wall clock vs. listener event times


@pytest.fixture(scope="module")
def jar():
    return ensure_annotator_jar(ROOT, progress=lambda _: None)


@pytest.fixture(scope="module")
def annotated(stack, jar, tmp_path_factory):
    run = run_spark_job(stack, "annotated_job.py", tmp_path_factory.mktemp("annotated"),
                        conf=annotator_properties(stack.settings, jar))
    marks = {m["name"]: m for m in (json.loads(line.split(" ", 1)[1])
                                    for line in run.stdout.splitlines() if line.startswith("MARK "))}
    stack.wait_for(f'SELECT count("duration_ms") FROM "sparkscope_application" '
                   f'WHERE "applicationid" = \'{run.app_id}\'', lambda s: bool(s))
    return run, marks


def annotation_rows(stack, run, name: str) -> list[dict]:
    """One of the dashboard's annotations as Grafana 12 reads it, the dashboard opened on the run."""
    dashboard = json.loads(DASHBOARD.read_text())
    annotation = next(a for a in dashboard["annotations"]["list"] if a["name"] == name)
    dash = stack.open_dashboard(dashboard, run.started_ms - 60_000, run.ended_ms + 60_000,
                                url_vars={"applicationid": run.app_id})
    rows = dash.annotation_events(annotation)
    for row in rows:
        row["end"], row["label"] = row["timeEnd"], row["text"]
        row["status"] = ",".join(row.get("tags") or [])  # the tags column is the status
    return rows


def within(row: dict, mark: dict) -> bool:
    return mark["start"] - SLACK_MS <= row["time"] < row["end"] <= mark["end"] + SLACK_MS


def listener_queues(run) -> list[str]:
    return next(json.loads(line.split(" ", 1)[1]) for line in run.stdout.splitlines() if line.startswith("QUEUES "))


def test_the_listener_runs_on_sparks_status_queue_not_a_queue_of_its_own(annotated):
    run, _ = annotated
    # spark.extraListeners would add the shared queue: a thread woken for every event.
    assert "spark-listener-group-appStatus" in listener_queues(run)
    assert "spark-listener-group-shared" not in listener_queues(run)


def test_each_sql_query_is_a_region_spanning_its_run(stack, annotated):
    run, marks = annotated
    rows = annotation_rows(stack, run, "SQL queries")
    finished = [r for r in rows if r["status"] != "RUNNING"]
    first = [r for r in finished if 'TPC-DS-like "q1", with, commas' in r["label"]]
    second = [r for r in finished if "second query" in r["label"]]
    assert len(first) == 1 and within(first[0], marks["query-1"]), (first, marks["query-1"])
    assert len(second) == 1 and within(second[0], marks["query-2"]), (second, marks["query-2"])
    # While a query runs, the annotation shows its RUNNING point: a line at its start, no end.
    # (Straight to InfluxDB: Grafana's frames would fold it into the final point at the same time.)
    dashboard = json.loads(DASHBOARD.read_text())
    annotation = next(a for a in dashboard["annotations"]["list"] if a["name"] == "SQL queries")
    dash = stack.open_dashboard(dashboard, run.started_ms - 60_000, run.ended_ms + 60_000,
                                url_vars={"applicationid": run.app_id})
    points = stack.influx(dash.interpolate(annotation["target"]["query"], where="annotation"))[0]
    rows = [dict(zip(points["columns"], values)) for values in points["values"]]
    running = [r for r in rows if r["status"] == "RUNNING" and "second query" in r["text"]]
    assert len(running) == 1 and running[0]["end_time_ms"] is None, running
    assert abs(running[0]["time"] - second[0]["time"]) <= 1, (running, second)


def test_each_job_is_a_region_spanning_its_run(stack, annotated):
    run, marks = annotated
    rows = annotation_rows(stack, run, "Jobs")
    for description, mark in (("skewed job", "skewed"), ("even job", "even")):
        matching = [r for r in rows if description in r["label"] and r["status"] != "RUNNING"]
        assert len(matching) == 1 and within(matching[0], marks[mark]), (description, matching)
    # Each job's tasks' time, launch to finish, summed: 8 tasks that sleep 6 s once and 0.3 s
    # seven times, or 0.8 s each; no Connect owner on a plain application (Spark 3.5).
    jobs = {r[1]: r for r in stack.influx(
        'SELECT "description", "task_ms", "task_count", "connect_session" FROM "sparkscope_job" '
        f'WHERE "applicationid" = \'{run.app_id}\' AND "status" = \'SUCCEEDED\'')[0]["values"]}
    for description, slept_ms in (("skewed job", 6000 + 7 * 300), ("even job", 8 * 800)):
        _, _, task_ms, task_count, session = jobs[description]
        assert task_count == 8 and slept_ms <= task_ms < slept_ms + 8 * 1500 and session is None, jobs


def test_stages_are_regions_and_only_the_skewed_one_is_a_straggler(stack, annotated):
    run, marks = annotated
    stages = [r for r in annotation_rows(stack, run, "Stages") if r["status"] != "RUNNING"]
    (skewed_id,), (even_id,) = marks["skewed"]["stages"], marks["even"]["stages"]
    skewed = [r for r in stages if r["label"].startswith(f"stage {skewed_id}.0:")]
    even = [r for r in stages if r["label"].startswith(f"stage {even_id}.0:")]
    assert len(skewed) == 1 and within(skewed[0], marks["skewed"])
    assert len(even) == 1 and within(even[0], marks["even"])
    stragglers = annotation_rows(stack, run, "Straggler stages")
    assert [r["label"] for r in stragglers if "stage" in r["label"]] == [skewed[0]["label"]]
    assert "STRAGGLER" in skewed[0]["label"] and "STRAGGLER" not in even[0]["label"]


def test_stage_statistics_describe_the_slow_task(stack, annotated):
    run, _ = annotated
    rows = stack.influx(f'SELECT "task_max_ms", "task_p50_ms", "skew_ratio", "num_tasks" FROM "sparkscope_stage" '
                        f'WHERE "applicationid" = \'{run.app_id}\' AND "straggler" = \'true\'')
    columns, values = rows[0]["columns"], rows[0]["values"]
    stage = dict(zip(columns, values[0]))
    assert len(values) == 1 and stage["num_tasks"] == 8
    assert stage["task_max_ms"] >= 5500  # partition 0 sleeps 6 s
    assert stage["task_p50_ms"] * 3 <= stage["task_max_ms"]  # the others 0.3 s
    assert stage["skew_ratio"] == pytest.approx(stage["task_max_ms"] / stage["task_p50_ms"], rel=0.02)


def test_unreachable_influxdb_does_not_hold_spark_up(stack, jar, tmp_path):
    def timed(conf):
        started = time.monotonic()
        run_spark_job(stack, "annotated_job.py", tmp_path, conf=conf)
        return time.monotonic() - started

    closed = dict(annotator_properties(stack.settings, jar), **{"spark.sparkscope.influx.url": "http://127.0.0.1:9"})
    without = timed({})
    with_down = timed(closed)
    # Not a benchmark (bench/listener.py is): a bound loose enough for a loaded
    # machine that a listener waiting on its endpoint per event (hundreds of
    # events, 1 s connect timeout each) would still break by minutes.
    assert with_down < without * 1.5 + 15, f"{with_down:.1f} s unreachable vs {without:.1f} s without"
    log = (tmp_path / "annotated_job.log").read_text().splitlines()
    # A few warnings per writer, never one per event: the listener's, and the driver's
    # container memory sampler's (the same endpoint), each in its own words.
    for writer in ("sparkscope annotator:", "sparkscope container memory:"):
        warnings = [line for line in log if f" WARN annotator: {writer}" in line]
        assert 1 <= len(warnings) <= 3, warnings




def test_the_same_jar_works_on_spark_4(stack, jar, tmp_path):
    home = ensure_pyspark(SPARK4_VERSION, stack.settings.cache_dir, progress=lambda _: None)
    run = run_spark_job(stack, "annotated_job.py", tmp_path, conf=annotator_properties(stack.settings, jar),
                        spark_home=home)
    log = run.log.read_text()
    assert "NoSuchMethodError" not in log and "LinkageError" not in log
    assert "spark-listener-group-shared" not in listener_queues(run)  # Spark 4 has the status queue too
    app = stack.wait_for(f'SELECT "spark_version" FROM "sparkscope_application" '
                         f'WHERE "applicationid" = \'{run.app_id}\' AND "status" = \'FINISHED\'', bool)
    assert app[0]["values"][0][1].startswith("4.")
    stragglers = stack.influx(f'SELECT "num_tasks" FROM "sparkscope_stage" WHERE "applicationid" = '
                              f'\'{run.app_id}\' AND "straggler" = \'true\'')
    assert len(stragglers[0]["values"]) == 1
    queries = stack.influx(f'SELECT "description" FROM "sparkscope_query" WHERE "applicationid" = '
                           f'\'{run.app_id}\' AND "status" = \'SUCCEEDED\'')
    assert any("second query" in v[1] for v in queries[0]["values"])
    # Stages name their job: read from the job start's stageInfos, a Scala 2.13 Seq on Spark 4.
    stages = stack.influx(f'SELECT "job_id", "job_description" FROM "sparkscope_stage" WHERE "applicationid" = '
                          f'\'{run.app_id}\' AND "status" = \'SUCCEEDED\'')
    assert stages and all(v[1] is not None for v in stages[0]["values"]), stages
    assert any(v[2] == "skewed job" for v in stages[0]["values"]), stages
    # and Spark 4's Graphite sink feeds the same schema
    heap = stack.influx(f'SHOW TAG VALUES FROM "JVMHeapMemory" WITH KEY = "executorid" '
                        f'WHERE "applicationid" = \'{run.app_id}\'')
    assert {v[1] for v in heap[0]["values"]} >= {"0", "1"}
