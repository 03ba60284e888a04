"""Capacity against Spark's own truth: for real runs with Spark's event log
on, the slot-seconds, task-seconds and idle share the report counts are
within 5 % of what the event log says (executors' added and removed
timestamps and cores, each task's launch and finish time): for a run that
holds its executors idle between two phases, and for one under dynamic
allocation whose executors come and go."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparkscope.provision.annotator_jar import ensure_annotator_jar
from sparkscope.report.capacity import capacity
from sparkscope.report.command import make_report
from sparkscope.report.run_facts import RunReader
from sparkscope.spark.conf import annotator_properties
from sparkscope.settings import ROOT

from conftest import run_spark_job

WITHIN = 0.05


def event_log_truth(log_dir: Path, app_id: str) -> dict[str, float]:
    """Slot-seconds, task-seconds and idle share as Spark's event log tells them."""
    path = next(p for p in log_dir.iterdir() if p.name.startswith(app_id))
    added, removed, tasks, end = {}, {}, 0.0, None
    for line in path.read_text().splitlines():
        event = json.loads(line)
        kind = event["Event"]
        if kind == "SparkListenerExecutorAdded":
            added[event["Executor ID"]] = (event["Timestamp"], event["Executor Info"]["Total Cores"])
        elif kind == "SparkListenerExecutorRemoved":
            removed[event["Executor ID"]] = event["Timestamp"]
        elif kind == "SparkListenerTaskEnd":
            info = event["Task Info"]
            tasks += (info["Finish Time"] - info["Launch Time"]) / 1000
        elif kind == "SparkListenerApplicationEnd":
            end = event["Timestamp"]
    assert end is not None and added, f"{path}: no application end or no executor"
    slots = sum(cores * (min(removed.get(e, end), end) - at) / 1000 for e, (at, cores) in added.items())
    return {"slot_seconds": slots, "task_seconds": tasks, "idle_share": 1 - tasks / slots,
            "executors": len(added), "removed": len(removed)}


def capacity_run(stack, tmp_path: Path, conf: dict[str, str], pause_s: str):
    jar = ensure_annotator_jar(ROOT, progress=lambda _: None)
    events = tmp_path / "eventlog"
    events.mkdir()
    run = run_spark_job(stack, "capacity_job.py", tmp_path, args=[pause_s],
                        conf={**annotator_properties(stack.settings, jar), "spark.eventLog.enabled": "true",
                              "spark.eventLog.dir": events.as_uri(), **conf})
    stack.wait_for(f"SELECT \"duration_ms\" FROM \"sparkscope_application\" WHERE \"applicationid\" = "
                   f"'{run.app_id}' AND \"status\" = 'FINISHED'", bool)
    stack.wait_for_telegraf_to_drain()
    reader = RunReader(stack.settings.influx_reader, stack.settings.database)
    facts = reader.read(run.app_id)
    return run, reader, facts, capacity(facts), event_log_truth(events, run.app_id)


def assert_within(cap, truth, label):
    mine = {"slot_seconds": cap.slot_seconds, "task_seconds": cap.task_seconds, "idle_share": cap.idle_share}
    print(f"\n{label}: sparkscope {mine}; event log {truth}")
    for key, value in mine.items():
        assert value == pytest.approx(truth[key], rel=WITHIN), (label, key, value, truth[key])


def test_a_run_idle_between_two_phases_counts_as_the_event_log_and_is_advised(stack, tmp_path):
    run, reader, facts, cap, truth = capacity_run(stack, tmp_path, {}, "20")
    assert truth["executors"] == 2 and cap.executors == 2
    assert_within(cap, truth, "idle between phases")
    assert cap.idle_share > 0.5
    path, _, _, _ = make_report(reader, run.app_id, tmp_path / "report")
    page = path.read_text()
    assert "<h2>Capacity</h2>" in page and "spark.dynamicAllocation.enabled=true" in page, page[-3000:]


def test_executors_that_come_and_go_under_dynamic_allocation_count_as_the_event_log(stack, tmp_path):
    conf = {"spark.dynamicAllocation.enabled": "true", "spark.dynamicAllocation.shuffleTracking.enabled": "true",
            "spark.dynamicAllocation.minExecutors": "0", "spark.dynamicAllocation.initialExecutors": "2",
            "spark.dynamicAllocation.maxExecutors": "2", "spark.dynamicAllocation.executorIdleTimeout": "3s",
            "spark.dynamicAllocation.schedulerBacklogTimeout": "1s"}
    run, _, facts, cap, truth = capacity_run(stack, tmp_path, conf, "12")
    assert truth["removed"] >= 2 and truth["executors"] >= 3, truth  # the first ones went, new ones came
    assert cap.executors == truth["executors"]
    assert_within(cap, truth, "dynamic allocation")
