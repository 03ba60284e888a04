"""The derived figures mean one thing each (store/figures.py)."""

from sparkscope.report.advice import gc_share
from sparkscope.report.run_facts import ExecutorFacts, RunFacts
from sparkscope.store.figures import gc_share_of_task_time, gc_share_of_wall_time
from sparkscope.top.data import ExecutorNow


def run_with(totals: dict[str, dict[str, float]]) -> RunFacts:
    executors = {k: ExecutorFacts(k, totals=v) for k, v in totals.items()}
    return RunFacts("app-1", "x", 0, 1, {"spark.master": "spark://h:7077"}, executors, [], [], [], [])


def test_the_reports_gc_share_is_task_gc_time_over_task_run_time_of_the_workers_only():
    run = run_with({"1": {"gc_ms": 30, "run_ms": 100}, "2": {"gc_ms": 10, "run_ms": 300},
                    "driver": {"gc_ms": 500, "run_ms": 1}})
    assert gc_share(run) == gc_share_of_task_time([30, 10], [100, 300]) == 0.1
    assert gc_share(run_with({"1": {"gc_ms": 5}})) is None  # no task ran: no share, not 0 or a division error


def test_tops_gc_share_is_collection_time_per_second_of_wall_time():
    idle_but_collecting = ExecutorNow("1", gc_ms_per_s=250.0)
    assert idle_but_collecting.gc_share == gc_share_of_wall_time(250.0) == 0.25
    assert ExecutorNow("2").gc_share is None
