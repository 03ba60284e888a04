"""Panels both dashboards show, defined once: the queries are the same, each
dashboard says how to read the panel in its own context and how wide it is."""

from __future__ import annotations

from sparkscope.dashboards.layout import Panel
from sparkscope.dashboards.reads import Highest, Share, Total
from sparkscope.store.schema import (CPU_TIME_COUNT, JVM_GC_TIME_COUNT, RUN_TIME_COUNT, STAGES_FAILED_STAGES_COUNT,
                                     TASKS_FAILED_TASKS_COUNT)

STAT_HEIGHT = 4


def task_time(description: str, width: int) -> Panel:
    return Panel("Task time", description,
                 [Total(RUN_TIME_COUNT, "run time"), Total(CPU_TIME_COUNT, "CPU time", divisor=1_000_000)],
                 "ms", kind="stat", width=width, height=STAT_HEIGHT)


def gc_share_of_task_time(description: str, width: int) -> Panel:
    return Panel("GC share of task time", description,
                 [Share(Total(JVM_GC_TIME_COUNT, "GC"), Total(RUN_TIME_COUNT, "run"))],
                 "percentunit", kind="stat", width=width, height=STAT_HEIGHT, decimals=1,
                 display_name="GC share")


def failed_tasks_and_stages(description: str, width: int) -> Panel:
    return Panel("Failed tasks and stages", description,
                 [Highest(TASKS_FAILED_TASKS_COUNT, "failed tasks"),
                  Highest(STAGES_FAILED_STAGES_COUNT, "failed stages")],
                 "none", kind="stat", width=width, height=STAT_HEIGHT, decimals=0)
