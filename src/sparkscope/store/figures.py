"""Figures derived from what is stored, one definition each, so that the
report, `top`, the dashboards' descriptions and what comes next (comparison
with earlier runs, capacity) mean the same thing by the same word.

Two figures are both called "GC share" in Spark circles and are different:

- gc_share_of_task_time: of the time tasks ran, how much was their JVM's
  garbage collection (Spark's jvmGCTime over runTime, summed over tasks).
  What a job's tuning changes; the report's and the summary dashboard's.
- gc_share_of_wall_time: of each second of an executor's life, how much its
  JVM spent collecting (minor + major collection time per second). Counts
  collections while no task runs too; what `top` shows live and what the
  "spends its time in garbage collection" alert fires on.

Standard library only.
"""

from __future__ import annotations

from typing import Iterable, Optional


def gc_share_of_task_time(gc_ms: Iterable[float], run_ms: Iterable[float]) -> Optional[float]:
    """Summed task GC time over summed task run time (both in ms); None without task time."""
    run = sum(run_ms)
    return sum(gc_ms) / run if run else None


def gc_share_of_wall_time(gc_ms_per_s: Optional[float]) -> Optional[float]:
    """A JVM's collection time per second of wall time, as a share of that second."""
    return None if gc_ms_per_s is None else gc_ms_per_s / 1000
