"""Panels both dashboards show, defined once: the queries are the same, each
dashboard says how to read the panel in its own context and how wide it is."""

from __future__ import annotations

from sparkscope.dashboards.layout import Panel
from sparkscope.dashboards.queries import APP, math, target, total

STAT_HEIGHT = 4


def task_time(description: str, width: int) -> Panel:
    return Panel("Task time", description,
                 [total("runTime.count", "run time"), total("cpuTime.count", "CPU time", scale=" / 1000000")],
                 "ms", kind="stat", width=width, height=STAT_HEIGHT)


def gc_share_of_task_time(description: str, width: int) -> Panel:
    return Panel("GC share of task time", description,
                 [total("jvmGCTime.count", "GC"), total("runTime.count", "run"), math("$A / $B")],
                 "percentunit", kind="stat", width=width, height=STAT_HEIGHT, hidden_refs=("A", "B"), decimals=1,
                 display_name="GC share")


def failed_tasks_and_stages(description: str, width: int) -> Panel:
    return Panel("Failed tasks and stages", description,
                 [target(f'SELECT max("value") FROM "tasks.failedTasks.count" WHERE {APP} AND $timeFilter',
                         "failed tasks"),
                  target(f'SELECT max("value") FROM "stages.failedStages.count" WHERE {APP} AND $timeFilter',
                         "failed stages")],
                 "none", kind="stat", width=width, height=STAT_HEIGHT, decimals=0)
