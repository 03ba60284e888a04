"""A run as comparison sees it: its own figures (duration, task time, GC
share, shuffle, spill, input, heap, RSS and storage memory peaks, tasks) and its SQL queries, jobs and
stages with theirs, as far as the store holds them (the annotator's end
points of each phase and each stage's exact peaks; Spark's counters for the
run), read through the read layer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from sparkscope.compare.matching import JOB, QUERY, STAGE, Phase, name_by_position
from sparkscope.compare.rule import (
    DURATION, GC_SHARE, INPUT, PEAK_HEAP, PEAK_RSS, PEAK_STORAGE, SHUFFLE_READ, SHUFFLE_WRITE, SKEW, SKEW_MIN_SLOWEST_MS, SPILL,
    TASK_TIME, TASKS,
)
from sparkscope.store.figures import gc_share_of_task_time
from sparkscope.store.reads import DRIVER, Reads, Run
from sparkscope.store.schema import (
    BYTES_READ_COUNT, DISK_BYTES_SPILLED_COUNT, JVM_GC_TIME_COUNT, JVM_HEAP_MEMORY, OFF_HEAP_STORAGE_MEMORY,
    ON_HEAP_STORAGE_MEMORY, PROCESS_TREE_RSS, RUN_TIME_COUNT,
    SHUFFLE_BYTES_WRITTEN_COUNT, SHUFFLE_TOTAL_BYTES_READ_COUNT, SUCCEEDED_TASKS_COUNT,
)

# Spark's counters summed over the run's JVMs, and the figure each gives.
COUNTERS = {RUN_TIME_COUNT: TASK_TIME, SHUFFLE_TOTAL_BYTES_READ_COUNT: SHUFFLE_READ,
            SHUFFLE_BYTES_WRITTEN_COUNT: SHUFFLE_WRITE, DISK_BYTES_SPILLED_COUNT: SPILL, BYTES_READ_COUNT: INPUT,
            SUCCEEDED_TASKS_COUNT: TASKS}


@dataclass
class RunPhases:
    run: Run
    figures: dict[str, float] = field(default_factory=dict)
    phases: list[Phase] = field(default_factory=list)


def _number(value: Any) -> Optional[float]:
    return None if value is None else float(value)


def _rss(peaks: dict[str, Any]) -> Optional[float]:
    parts = [peaks[name] for name in PROCESS_TREE_RSS if peaks.get(name)]
    return float(sum(parts)) if parts else None  # 0 everywhere: process tree metrics were off


def _storage(peaks: dict[str, Any]) -> Optional[float]:
    parts = [peaks.get(ON_HEAP_STORAGE_MEMORY), peaks.get(OFF_HEAP_STORAGE_MEMORY)]
    return None if all(p is None for p in parts) else float(sum(p or 0 for p in parts))


def _worker_peaks(executor_peaks: dict[str, dict[str, float]]) -> list[dict[str, float]]:
    """The peaks of the JVMs that ran tasks: the executors, or the driver alone in local mode."""
    workers = [p for e, p in executor_peaks.items() if e != DRIVER]
    return workers or list(executor_peaks.values())


def run_figures(reads: Reads, run: Run) -> dict[str, float]:
    totals = reads.run_totals(run.app_id, tuple(COUNTERS))
    gc_ms = reads.run_totals(run.app_id, (JVM_GC_TIME_COUNT,)).get(JVM_GC_TIME_COUNT)
    figures = {figure: totals[counter] for counter, figure in COUNTERS.items() if counter in totals}
    if run.duration_ms is not None:
        figures[DURATION] = float(run.duration_ms)
    if gc_ms is not None and totals.get(RUN_TIME_COUNT):
        figures[GC_SHARE] = gc_share_of_task_time([gc_ms], [totals[RUN_TIME_COUNT]])
    workers = _worker_peaks(reads.executor_peaks(run.app_id))
    heaps = [p[JVM_HEAP_MEMORY] for p in workers if p.get(JVM_HEAP_MEMORY)]
    rss = [r for r in (_rss(p) for p in workers) if r is not None]
    if heaps:
        figures[PEAK_HEAP] = float(max(heaps))
    if rss:
        figures[PEAK_RSS] = max(rss)
    # Cached blocks over all executors: which executor holds which block varies from
    # run to run, the total for the same data does not.
    storage = [s for s in (_storage(p) for p in workers) if s is not None]
    if storage:
        figures[PEAK_STORAGE] = sum(storage)
    return figures


def query_phases(rows: list[dict[str, Any]]) -> list[Phase]:
    return [Phase(QUERY, (row.get("description") or row.get("text") or "",), row.get("description") or "query",
                  int(row.get("execution_id") or 0), {DURATION: float(row["duration_ms"])}
                  if row.get("duration_ms") is not None else {}, ident=f"query {row.get('execution_id')}")
            for row in rows if row.get("execution_id") is not None]


def job_phases(rows: list[dict[str, Any]]) -> list[Phase]:
    out = []
    for row in rows:
        if row.get("job_id") is None:
            continue
        label = row.get("description") or f"job in group {row.get('job_group')}"
        figures = {DURATION: float(row["duration_ms"])} if row.get("duration_ms") is not None else {}
        out.append(Phase(JOB, (row.get("job_group") or "", row.get("description") or ""), label,
                         int(row["job_id"]), figures, ident=f"job {row['job_id']}"))
    return out


def stage_phases(rows: list[dict[str, Any]], peaks: list[dict[str, Any]]) -> list[Phase]:
    """One phase per stage (its last attempt: a retried stage is one phase of the job),
    its figures from its end point and its peaks over its executors."""
    last: dict[int, dict[str, Any]] = {}
    for row in rows:
        if row.get("stage_id") is None:
            continue
        stage_id = int(row["stage_id"])
        if stage_id not in last or int(row.get("attempt") or 0) >= int(last[stage_id].get("attempt") or 0):
            last[stage_id] = row
    highest: dict[int, dict[str, float]] = {}
    for row in peaks:
        if row.get("stage_id") is None:
            continue
        mine = highest.setdefault(int(row["stage_id"]), {})
        for name, value in ((PEAK_HEAP, _number(row.get(JVM_HEAP_MEMORY))), (PEAK_RSS, _rss(row))):
            if value:
                mine[name] = max(mine.get(name, 0.0), value)
    out = []
    for stage_id, row in last.items():
        figures: dict[str, float] = dict(highest.get(stage_id, {}))
        count = _number(row.get("task_count_seen"))
        for figure, value in ((DURATION, _number(row.get("duration_ms"))), (TASKS, _number(row.get("num_tasks"))),
                              (INPUT, _number(row.get("task_mean_input_bytes"))),
                              (SHUFFLE_READ, _number(row.get("task_mean_shuffle_read_bytes")))):
            if value is not None:
                # The stage's totals from its tasks' means and the tasks seen.
                figures[figure] = value * count if figure in (INPUT, SHUFFLE_READ) and count else value
        slowest = _number(row.get("task_max_ms"))
        if row.get("skew_ratio") is not None and slowest is not None and slowest >= SKEW_MIN_SLOWEST_MS:
            figures[SKEW] = float(row["skew_ratio"])
        name = row.get("name") or f"stage {stage_id}"
        out.append(Phase(STAGE, (row.get("job_description") or "", row.get("name") or ""), name, stage_id, figures,
                         ident=f"stage {stage_id}"))
    return out


def read_run(reads: Reads, run: Run) -> RunPhases:
    app = run.app_id
    phases = (query_phases(reads.queries(app)) + job_phases(reads.jobs(app))
              + stage_phases(reads.stages(app), reads.stage_peaks(app)))
    return RunPhases(run, run_figures(reads, run), name_by_position(phases))
