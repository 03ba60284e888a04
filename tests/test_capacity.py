"""Capacity: what a run held (slot-seconds, memory) against what it used
(task-seconds, peaks), by store/figures.py's definitions, on synthetic
executor lifetimes; and report --json's capacity member."""

from __future__ import annotations

import pytest

from sparkscope.report.capacity import capacity, capacity_advice, capacity_document, connect_line, connect_users
from sparkscope.report.command import report_document
from sparkscope.report.advice import advise
from sparkscope.report.run_facts import ExecutorFacts, RunFacts
from sparkscope.store.figures import (
    GIB, MIB, Prices, connect_attribution, executor_memory_bytes, executor_spans, idle_share, idle_stretches, mean_from_percentiles,
    run_capacity, slot_seconds_held,
)

S = 1000  # ms


def added(executor_id, at_s, cores=2):
    return {"time": at_s * S, "event": "added", "executor_id": executor_id, "cores": cores, "host": "h"}


def removed(executor_id, at_s, reason="idle"):
    return {"time": at_s * S, "event": "removed", "executor_id": executor_id, "reason": reason}


def test_executors_added_and_removed_mid_run_hold_their_cores_only_while_they_live():
    events = [added("1", 10), added("2", 20, cores=4), removed("2", 50), added("3", 60)]
    spans = executor_spans(events, run_end_ms=100 * S)
    assert [(s.executor_id, s.cores, s.seconds, s.removed) for s in spans] == [
        ("1", 2, 90, False), ("2", 4, 30, True), ("3", 2, 40, False)]
    assert slot_seconds_held(spans) == 2 * 90 + 4 * 30 + 2 * 40
    # Within a window (a stage from 40 s to 70 s): 1 all 30 s, 2 for 10 s, 3 for 10 s.
    assert slot_seconds_held(spans, 40 * S, 70 * S) == 2 * 30 + 4 * 10 + 2 * 10


def test_a_lost_executor_counts_to_its_loss_and_its_replacement_from_its_addition():
    events = [added("1", 0, 1), added("2", 0, 1), removed("2", 30, "Command exited with code 137"),
              added("3", 35, 1)]
    spans = {s.executor_id: s for s in executor_spans(events, run_end_ms=60 * S)}
    assert (spans["2"].seconds, spans["3"].seconds) == (30, 25)
    assert slot_seconds_held(spans.values()) == 60 + 30 + 25


def test_the_runs_end_closes_executors_never_removed_and_removals_after_it_count_to_it():
    events = [added("1", 0), removed("1", 120), added("2", 5)]
    spans = {s.executor_id: s for s in executor_spans(events, run_end_ms=100 * S)}
    assert spans["1"].seconds == 100 and spans["2"].seconds == 95 and not spans["2"].removed


def test_the_driver_holds_slots_only_in_local_mode():
    events = [added("driver", 0, 4), added("1", 0, 2)]
    assert [s.executor_id for s in executor_spans(events, 10 * S)] == ["1"]
    assert {s.executor_id for s in executor_spans(events, 10 * S, local_mode=True)} == {"driver", "1"}


def test_idle_share_is_one_minus_used_over_held():
    assert idle_share(25, 100) == 0.75 and idle_share(120, 100) == 0.0
    assert idle_share(None, 100) is None and idle_share(10, 0) is None


def test_an_idle_stretch_is_found_from_active_task_samples_past_the_threshold():
    span = executor_spans([added("1", 0)], 300 * S)[0]
    busy_idle_busy = [(t * S, 1.0 if t < 30 or 150 <= t < 160 else 0.0) for t in range(0, 300, 10)]
    assert idle_stretches(busy_idle_busy, span, 60) == [(30 * S, 150 * S), (160 * S, 300 * S)]
    assert idle_stretches(busy_idle_busy, span, 200) == []
    # An executor that never ran a task is idle from its addition.
    assert idle_stretches([(t * S, 0.0) for t in range(20, 100, 10)], span, 60) == [(0, 300 * S)]


def test_executor_memory_is_the_heap_plus_overhead_as_spark_sizes_a_container():
    assert executor_memory_bytes({}) == GIB + 384 * MIB
    assert executor_memory_bytes({"spark.executor.memory": "8g"}) == 8 * GIB + int(8 * GIB * 0.1)
    assert executor_memory_bytes({"spark.executor.memory": "2g", "spark.executor.memoryOverhead": "1g",
                                  "spark.executor.pyspark.memory": "512m"}) == 3.5 * GIB


def test_memory_held_against_peaks_and_cost_only_with_prices():
    events = [added("1", 0, 2), added("2", 0, 2), removed("2", 1800)]
    settings = {"spark.executor.memory": "2g", "spark.executor.memoryOverhead": "1g"}
    peaks = {"1": {"JVMHeapMemory": GIB / 2}, "2": {"JVMHeapMemory": GIB}}
    cap = run_capacity(events, 3600 * S, 3600 * S, settings, peaks, {})
    assert cap.slot_seconds == 2 * 3600 + 2 * 1800 and cap.core_hours == 3
    assert cap.task_seconds == 3600 and cap.idle_share == pytest.approx(1 - 3600 / 10800)
    assert cap.memory_gb_seconds == 3 * 3600 + 3 * 1800 and cap.gb_hours == 4.5
    assert cap.heap_gb_seconds == 0.5 * 3600 + 1 * 1800
    assert cap.cost is None
    priced = run_capacity(events, 3600 * S, 3600 * S, settings, peaks, {}, prices=Prices(0.04, 0.01, "EUR"))
    assert priced.cost == pytest.approx(3 * 0.04 + 4.5 * 0.01) and priced.currency == "EUR"


def test_stages_get_the_slots_held_while_they_ran_and_an_estimate_of_their_task_time():
    events = [added("1", 0, 2), added("2", 50, 2)]
    stages = [{"time": 40 * S, "end_time_ms": 60 * S, "stage_id": 3, "attempt": 0, "name": "collect",
               "task_count_seen": 10, "task_p50_ms": 2000, "task_p75_ms": 2000, "task_p95_ms": 2000,
               "task_max_ms": 2000}]
    cap = run_capacity(events, 100 * S, None, {}, {}, {}, stages, Prices(3600.0))
    (stage,) = cap.stages
    assert stage.stage == "3.0" and stage.slot_seconds == 2 * 20 + 2 * 10
    assert stage.task_seconds == 20 and stage.cost == pytest.approx(60)
    assert mean_from_percentiles(1000, 2000, 4000, 10000) == pytest.approx(
        500 + 0.25 * 1500 + 0.2 * 3000 + 0.05 * 7000)


def facts(settings=None, events=None, active=None, run_ms=10_000) -> RunFacts:
    executors = {e: ExecutorFacts(e, cores=1, totals={"run_ms": run_ms / 2}, peaks={"JVMHeapMemory": 100 * MIB})
                 for e in ("0", "1")}
    conf = {"spark.master": "spark://h:7077", "spark.executor.memory": "4g", **(settings or {})}
    run = RunFacts("app-cap", "etl", 0, 100 * S, conf, executors, [], [], [], [])
    run.executor_events = events if events is not None else [added("0", 0, 1), added("1", 0, 1)]
    run.active_tasks = active or {}
    return run


def test_a_run_that_held_its_slots_idle_is_advised_dynamic_allocation_and_a_smaller_executor():
    idle_middle = {e: [(t * S, 1.0 if t < 5 or t > 90 else 0.0) for t in range(0, 100)] for e in ("0", "1")}
    run = facts(active=idle_middle)
    cap = capacity(run)
    assert cap.idle_share == pytest.approx(0.95) and len(cap.idle) == 2
    advice = capacity_advice(run, cap)
    assert any("spark.dynamicAllocation.enabled=true" in line for line in advice), advice
    assert any("smaller executor" in line for line in advice), advice
    dynamic = capacity_advice(run_ := facts({"spark.dynamicAllocation.enabled": "true"}, active=idle_middle),
                              capacity(run_))
    assert any("executorIdleTimeout" in line for line in dynamic), dynamic
    busy = facts(run_ms=190_000, active={e: [(t * S, 1.0) for t in range(100)] for e in ("0", "1")})
    assert not [line for line in capacity_advice(busy, capacity(busy)) if "slot" in line]


def test_report_json_has_the_capacity_member(tmp_path):
    run = facts()
    document = report_document(run, advise(run), [], tmp_path / "r.html", Prices(0.05, None, "USD"))
    cap = document["capacity"]
    assert {"slot_seconds", "task_seconds", "idle_share", "memory", "cost"} <= set(cap)
    assert (cap["slot_seconds"], cap["task_seconds"], cap["idle_share"]) == (200, 10, 0.95)
    assert cap["cost"] == {"amount": pytest.approx(200 / 3600 * 0.05), "currency": "USD"}
    assert capacity_document(run, capacity(run))["cost"] is None


def job(job_id, start_s, end_s, task_ms, user=None, session=None, operation=None, description="q"):
    row = {"time": start_s * S, "job_id": job_id, "end_time_ms": end_s * S, "task_ms": task_ms,
           "task_count": 4, "description": description}
    if session:
        row.update({"connect_user": user, "connect_session": session, "connect_operation": operation})
    return row


def test_a_connect_servers_capacity_is_split_by_share_of_task_time_per_user_session_and_operation():
    run = facts()  # 200 slot-seconds held, 2 x (4 GiB + overhead) of memory
    run.jobs = [job(0, 1, 3, 60_000, "alice", "s-a1", "op-1", "first"), job(1, 3, 9, 20_000, "alice", "s-a1", "op-1"),
                job(2, 10, 12, 40_000, "alice", "s-a2", "op-2"), job(3, 5, 8, 30_000, "bob", "s-b", "op-3"),
                job(4, 20, 21, 50_000)]  # the server's own job: no Connect operation
    cap = capacity(run, Prices(0.36, 0.01, "EUR"))
    who = connect_attribution(run.jobs, cap)
    total = 200_000 / 1000
    assert who.task_seconds == total
    assert [(a.user, a.task_seconds, a.jobs) for a in who.users] == [("alice", 120, 3), ("bob", 30, 1)]
    alice = who.users[0]
    assert alice.share == pytest.approx(120 / total)
    assert alice.slot_seconds == pytest.approx(cap.slot_seconds * 120 / total)
    assert alice.cost == pytest.approx(cap.cost * 120 / total)
    assert alice.memory_gb_seconds == pytest.approx(cap.memory_gb_seconds * 120 / total)
    assert (alice.first_ms, alice.last_ms) == (1 * S, 12 * S)
    assert [(a.session, a.task_seconds) for a in who.sessions] == [("s-a1", 80), ("s-a2", 40), ("s-b", 30)]
    assert [(a.operation, a.description) for a in who.operations][0] == ("op-1", "first")
    assert who.operations_total == 3 and who.other.task_seconds == 50 and who.other.jobs == 1
    # Every held slot-second is someone's: the users' and the server's own jobs' add up to the run's.
    assert sum(a.slot_seconds for a in who.users) + who.other.slot_seconds == pytest.approx(cap.slot_seconds)
    top = connect_attribution(run.jobs, cap, most_operations=1)
    assert len(top.operations) == 1 and top.operations_total == 3
    assert connect_line(who) == ("Spark Connect: 2 users, 3 sessions, 3 operations; share of task time (and of "
                                 "what was held): alice 60%, bob 15%")
    assert connect_line(who, most=1).endswith("alice 60% and 1 more") and connect_line(None) == ""
    document = capacity_document(run, cap)["connect"]
    assert [u["user"] for u in document["users"]] == ["alice", "bob"]
    assert document["not_connect"]["task_seconds"] == 50 and document["operations"][0]["description"] == "first"


def test_a_run_that_is_not_a_connect_servers_has_no_attribution_and_unknown_task_time_no_share():
    run = facts()
    run.jobs = [job(0, 1, 3, 60_000)]
    assert connect_attribution(run.jobs, capacity(run)) is None
    assert capacity_document(run, capacity(run))["connect"] is None
    # Jobs written before the annotator counted task time: owners known, shares not.
    who = connect_attribution([job(0, 1, 3, None, "alice", "s", "o")], capacity(run))
    assert who.users[0].task_seconds == 0 and who.users[0].share is None and who.users[0].slot_seconds is None


def test_the_reports_connect_tables_escape_what_clients_named():
    from sparkscope.report.page import connect_section
    run = facts()
    run.jobs = [job(0, 1, 3, 60_000, "<b>eve</b>", "s-1", "op-1"), job(1, 3, 4, 20_000, "bob", "s-2", "op-2")]
    cap = capacity(run)
    page = connect_section(connect_users(run, cap), cap)
    assert "&lt;b&gt;eve&lt;/b&gt;" in page and "<b>eve" not in page
    assert page.count("<table>") == 3 and "75.0%" in page and "25.0%" in page
    assert connect_section(None, cap) == ""
