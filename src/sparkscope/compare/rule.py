"""When a figure of a run is worse (or better) than usual: the one rule
`compare`, the report's "compared with usual" section and their tests share.

A run is judged against its baseline, the same figure in the job's earlier
runs, and the baseline's own spread: a job whose stage takes 10 s one day
and 14 s the next is not slower at 13 s. A figure is a regression when it
lies beyond BOTH

- the baseline's highest value, and its median plus a margin:
  max(SPREAD_TIMES x the median absolute deviation, RELATIVE_FLOOR x the
  median), so one baseline run (no spread) still needs 20 % more; and
- the baseline's highest value by more than the figure's ABSOLUTE_FLOOR, so
  a 0.3 s stage taking 0.9 s is not news.

An improvement is the mirror (below the lowest value and the median minus the
margin, by more than the floor). An identical rerun lies inside the
baseline's range: nothing is flagged.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median
from typing import Optional, Sequence

MIB = 1024 * 1024

# How many median absolute deviations beyond the median a figure must lie: 3
# MADs is about 2 standard deviations of a normal spread (MAD ~ 0.67 sigma),
# robust to the one odd baseline run a mean and standard deviation are not.
SPREAD_TIMES = 3.0
# The least margin, as a share of the median: what a baseline without spread
# (one run, or identical runs) still tolerates. Shared machines vary by this much.
RELATIVE_FLOOR = 0.20

# What each compared figure is measured in, and the least change in it that
# matters whatever the baseline (ABSOLUTE_FLOOR):
# 5 s of a phase's time: below it, JVM warm-up, Python workers' start and scheduling on
# a busy host (seen: the first of four identical counts 2.5 s in the baseline, 6.2 s in
# a run on two cores shared at a load of 13, where the others kept their time).
TIME = "ms"
BYTES = "bytes"  # 64 MiB of data read, written or spilled
# Storage memory (cached blocks: Spark's OnHeapStorageMemory and OffHeapStorageMemory
# peaks, summed over the executors): the same data cache to the same size, whichever
# executor holds which block (seen: 9.13, 9.23 and 9.19 MiB for one 16 MiB dataset on
# three loaded runs), so a cache that grew is told by this figure, with a small floor.
STORAGE = "storage"  # 32 MiB more cached
# A JVM's heap peak moves with when the collector last ran, by up to its young
# generation (seen between identical runs with 1 GiB executors on two loaded
# cores: 92, 146 and 182 MiB): judged beyond 256 MiB more, as well as beyond
# the baseline's own highest and spread; a cache that grew is the storage figure's.
MEMORY = "memory"
# An executor's resident memory (JVM, Python workers, other) moves further: with the
# heap the collector has committed and the Python workers alive at the poll (seen
# between identical PySpark runs with 1 GiB executors: 539 -> 840 MiB; 335 -> 398 MiB
# for another). Judged beyond 512 MiB more.
RSS = "rss"
SHARE = "share"  # 5 points: GC share of task time going from 3 % to 6 % is not news
COUNT = "count"  # 1 task: a partition count is exact, any change is a change of the data or the code
RATIO = "ratio"  # 2: skew (slowest task over the typical one) from 1.5 to 3.5 and more
ABSOLUTE_FLOOR = {TIME: 5000.0, BYTES: 64.0 * MIB, STORAGE: 32.0 * MIB, MEMORY: 256.0 * MIB, RSS: 512.0 * MIB,
                  SHARE: 0.05, COUNT: 1.0, RATIO: 2.0}
# A whole run's times also carry JVM start-up, executor registration and Python
# workers' start, which vary by seconds on a busy host (seen for identical runs on two
# shared cores: 8.3 -> 11.5 s, task time 3.6 -> 6.8 s; at a load of 24, 32, 41 and
# 47 s): its floor is this, beside the baseline's own spread.
WHOLE_RUN_TIME_FLOOR = 10000.0

# The figures compared, each with its unit. A phase or run carries those stored for it.
DURATION = "duration_ms"
TASK_TIME = "task_time_ms"
GC_SHARE = "gc_share"  # of task time: store/figures.gc_share_of_task_time
SHUFFLE_READ = "shuffle_read_bytes"
SHUFFLE_WRITE = "shuffle_write_bytes"
SPILL = "spill_bytes"
INPUT = "input_bytes"
PEAK_HEAP = "peak_heap_bytes"
PEAK_RSS = "peak_rss_bytes"
PEAK_STORAGE = "peak_storage_bytes"
TASKS = "tasks"
SKEW = "skew"
UNITS = {DURATION: TIME, TASK_TIME: TIME, GC_SHARE: SHARE, SHUFFLE_READ: BYTES, SHUFFLE_WRITE: BYTES, SPILL: BYTES,
         INPUT: BYTES, PEAK_HEAP: MEMORY, PEAK_RSS: RSS, PEAK_STORAGE: STORAGE, TASKS: COUNT, SKEW: RATIO}
# Skew is judged only where the slowest task took this long: the ratio of two
# tasks of 20 and 200 ms is 10 and means nothing.
SKEW_MIN_SLOWEST_MS = 2000.0

REGRESSION, IMPROVEMENT = "regression", "improvement"


@dataclass(frozen=True)
class Verdict:
    direction: str  # REGRESSION or IMPROVEMENT
    baseline: float  # the baseline's median
    limit: float  # the bound the value crossed


def margin(values: Sequence[float]) -> float:
    """How far from the median a value may lie and still be usual."""
    middle = median(values)
    mad = median(abs(v - middle) for v in values)
    return max(SPREAD_TIMES * mad, RELATIVE_FLOOR * abs(middle))


def judge(metric: str, baseline: Sequence[Optional[float]], value: Optional[float],
          whole_run: bool = False) -> Optional[Verdict]:
    """A regression, an improvement, or None (usual, or nothing to judge by); whole_run:
    the figure is the run's own, not a phase's (times get WHOLE_RUN_TIME_FLOOR)."""
    known = [float(v) for v in baseline if v is not None]
    if value is None or not known:
        return None
    floor = WHOLE_RUN_TIME_FLOOR if whole_run and UNITS[metric] == TIME else ABSOLUTE_FLOOR[UNITS[metric]]
    middle, spread = median(known), margin(known)
    upper = max(max(known), middle + spread)
    if value > upper and value - max(known) > floor:
        return Verdict(REGRESSION, middle, upper)
    lower = min(min(known), middle - spread)
    if value < lower and min(known) - value > floor:
        return Verdict(IMPROVEMENT, middle, lower)
    return None
