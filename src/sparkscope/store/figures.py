"""Figures derived from what is stored, one definition each, so that the
report, `top`, the dashboards' descriptions and what comes next (comparison
with earlier runs) mean the same thing by the same word (capacity below: slot-seconds held,
task-seconds used, idle share, memory held against used, cost).

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

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

from sparkscope.store.schema import JVM_HEAP_MEMORY, PROCESS_TREE_JVM_RSS_MEMORY


def gc_share_of_task_time(gc_ms: Iterable[float], run_ms: Iterable[float]) -> Optional[float]:
    """Summed task GC time over summed task run time (both in ms); None without task time."""
    run = sum(run_ms)
    return sum(gc_ms) / run if run else None


def gc_share_of_wall_time(gc_ms_per_s: Optional[float]) -> Optional[float]:
    """A JVM's collection time per second of wall time, as a share of that second."""
    return None if gc_ms_per_s is None else gc_ms_per_s / 1000


# --- capacity: what a run held and what it used -----------------------------------------------
#
# A slot is one core of an executor, held from the executor's addition to its
# removal, or to the run's end for an executor never removed (the run ended
# with it, or the annotator missed its removal). The driver holds slots only
# in local mode, where it runs the tasks (Spark posts its "added" event
# there). Task time is Spark's own sum over tasks, the executors'
# runTime.count and deserializeTime.count totals: a task holds its slot while
# its closure is deserialized as well as while it runs. The annotator's stage
# statistics keep percentiles of task duration, not a sum, so a run's task
# time is not read from them; a stage's is estimated from them (stage_capacity).

MIB = 1024 * 1024
GIB = 1024 * MIB
DEFAULT_EXECUTOR_MEMORY = "1g"  # Spark's spark.executor.memory default
OVERHEAD_FACTOR = 0.10  # Spark's spark.executor.memoryOverheadFactor default
MIN_OVERHEAD = 384 * MIB  # Spark's floor of the overhead
IDLE_STRETCH_S = 60  # an executor without a running task this long is an idle stretch


def parse_size(text: Optional[str], default_unit: str = "m") -> Optional[int]:
    """Spark's memory strings (512m, 2g, 1024k, a plain number in default_unit) as bytes."""
    if not text:
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)b?\s*", str(text).lower())
    if not m:
        return None
    unit = m.group(2) or default_unit
    return int(float(m.group(1)) * 1024 ** "bkmgtp".index(unit))


@dataclass(frozen=True)
class ExecutorSpan:
    """One executor's hold on the cluster: its cores from added_ms to ended_ms."""
    executor_id: str
    cores: int
    added_ms: int
    ended_ms: int
    removed: bool  # False: closed by the run's end

    @property
    def seconds(self) -> float:
        return max(0, self.ended_ms - self.added_ms) / 1000

    def overlap_s(self, start_ms: int, end_ms: int) -> float:
        return max(0, min(self.ended_ms, end_ms) - max(self.added_ms, start_ms)) / 1000


def executor_spans(events: Iterable[dict[str, Any]], run_end_ms: int, local_mode: bool = False,
                   default_cores: int = 1) -> list[ExecutorSpan]:
    """Each executor's span from the annotator's added and removed events
    (rows with time, event, executor_id, cores). An executor without a
    removal is held to run_end_ms; a removal after the run's end counts to
    the end. The driver counts only in local mode."""
    added: dict[str, dict[str, Any]] = {}
    removed: dict[str, int] = {}
    for row in sorted(events, key=lambda r: r["time"]):
        executor_id = row.get("executor_id")
        if not executor_id or (executor_id == "driver" and not local_mode):
            continue
        if row.get("event") == "added":
            added.setdefault(executor_id, row)
        elif row.get("event") == "removed":
            removed.setdefault(executor_id, int(row["time"]))
    spans = []
    for executor_id, row in added.items():
        start = int(row["time"])
        end = min(removed.get(executor_id, run_end_ms), run_end_ms)
        spans.append(ExecutorSpan(executor_id, int(row.get("cores") or default_cores), start, max(start, end),
                                  executor_id in removed and removed[executor_id] <= run_end_ms))
    return sorted(spans, key=lambda s: (s.added_ms, s.executor_id))


def slot_seconds_held(spans: Iterable[ExecutorSpan], start_ms: Optional[int] = None,
                      end_ms: Optional[int] = None) -> float:
    """Cores times seconds held, over the whole spans or within [start_ms, end_ms]."""
    if start_ms is None or end_ms is None:
        return sum(s.cores * s.seconds for s in spans)
    return sum(s.cores * s.overlap_s(start_ms, end_ms) for s in spans)


def idle_share(task_seconds: Optional[float], slot_seconds: float) -> Optional[float]:
    """1 - used / held: the share of held slot time no task ran in (never below 0)."""
    if task_seconds is None or not slot_seconds:
        return None
    return max(0.0, 1 - task_seconds / slot_seconds)


def executor_memory_bytes(settings: dict[str, Any]) -> int:
    """What one executor asks its cluster for: spark.executor.memory plus the
    overhead (spark.executor.memoryOverhead, else memoryOverheadFactor x the
    heap, at least 384 MiB), plus spark.executor.pyspark.memory and the
    off-heap size when set, as Spark sizes a YARN or Kubernetes container."""
    heap = parse_size(settings.get("spark.executor.memory")) or parse_size(DEFAULT_EXECUTOR_MEMORY)
    overhead = parse_size(settings.get("spark.executor.memoryOverhead"))
    if overhead is None:
        factor = float(settings.get("spark.executor.memoryOverheadFactor") or OVERHEAD_FACTOR)
        overhead = max(MIN_OVERHEAD, int(heap * factor))
    extra = parse_size(settings.get("spark.executor.pyspark.memory")) or 0
    if str(settings.get("spark.memory.offHeap.enabled", "")).lower() == "true":
        extra += parse_size(settings.get("spark.memory.offHeap.size"), "b") or 0
    return heap + overhead + extra


def gb_seconds(spans: Iterable[ExecutorSpan], bytes_of: Callable[[ExecutorSpan], Optional[float]],
               start_ms: Optional[int] = None, end_ms: Optional[int] = None) -> Optional[float]:
    """GiB times seconds: each span's bytes (None: unknown, left out) over its time
    (or its time within [start_ms, end_ms]); None when no span's bytes are known."""
    total, known = 0.0, False
    for s in spans:
        size = bytes_of(s)
        if size is None:
            continue
        known = True
        seconds = s.seconds if start_ms is None or end_ms is None else s.overlap_s(start_ms, end_ms)
        total += size / GIB * seconds
    return total if known else None


@dataclass(frozen=True)
class Prices:
    """PRICE_PER_CORE_HOUR, PRICE_PER_GB_HOUR, PRICE_CURRENCY (.env); None: not priced."""
    per_core_hour: Optional[float] = None
    per_gb_hour: Optional[float] = None
    currency: str = ""

    @property
    def known(self) -> bool:
        return self.per_core_hour is not None or self.per_gb_hour is not None


def cost(prices: Prices, slot_seconds: float, memory_gb_seconds: Optional[float]) -> Optional[float]:
    """Money for the held core-hours and GB-hours at the prices set; None without prices."""
    if not prices.known:
        return None
    money = (prices.per_core_hour or 0) * slot_seconds / 3600
    if memory_gb_seconds is not None:
        money += (prices.per_gb_hour or 0) * memory_gb_seconds / 3600
    return money


def mean_from_percentiles(p50: Optional[float], p75: Optional[float], p95: Optional[float],
                          top: Optional[float]) -> Optional[float]:
    """A stage's mean task time estimated from the percentiles the annotator keeps:
    the quantile function taken as p50 over the lower half and as straight lines
    between p50, p75, p95 and the slowest task above it."""
    if p50 is None:
        return None
    p75 = p50 if p75 is None else p75
    p95 = p75 if p95 is None else p95
    top = p95 if top is None else top
    return 0.5 * p50 + 0.25 * (p50 + p75) / 2 + 0.2 * (p75 + p95) / 2 + 0.05 * (p95 + top) / 2


@dataclass(frozen=True)
class StageCapacity:
    stage: str  # "3.0": id and attempt
    name: str
    started_ms: int
    ended_ms: int
    slot_seconds: float  # held while it ran (stages running at once each see the whole)
    task_seconds: Optional[float]  # estimated: tasks x mean from percentiles
    memory_gb_seconds: Optional[float]
    cost: Optional[float]


def stage_capacity(stages: Iterable[dict[str, Any]], spans: list[ExecutorSpan], memory_bytes: Optional[float],
                   prices: Prices) -> list[StageCapacity]:
    """Per ended stage (the annotator's stage end points): slot-seconds held while
    it ran, task-seconds estimated from its task percentiles, memory held, cost."""
    out = []
    for s in stages:
        if s.get("end_time_ms") is None or s.get("time") is None:
            continue
        start, end = int(s["time"]), int(s["end_time_ms"])
        slots = slot_seconds_held(spans, start, end)
        mean = mean_from_percentiles(s.get("task_p50_ms"), s.get("task_p75_ms"), s.get("task_p95_ms"),
                                     s.get("task_max_ms"))
        tasks = s.get("task_count_seen")
        task_s = mean * tasks / 1000 if mean is not None and tasks is not None else None
        memory = gb_seconds(spans, lambda _: memory_bytes, start, end) if memory_bytes else None
        out.append(StageCapacity(f"{s.get('stage_id')}.{s.get('attempt', 0)}", str(s.get("name") or ""),
                                 start, end, slots, task_s, memory, cost(prices, slots, memory)))
    return sorted(out, key=lambda c: c.started_ms)


def idle_stretches(samples: Iterable[tuple[int, float]], span: ExecutorSpan,
                   threshold_s: float = IDLE_STRETCH_S) -> list[tuple[int, int]]:
    """When one executor ran no task for threshold_s or longer, from its
    threadpool.activeTasks samples (time ms, tasks): a stretch starts at its
    addition or at the first sample at 0 after one above, and ends at the next
    sample above 0 or its end. A task that starts and ends between two samples
    is not seen: the resolution is the sink's period."""
    out, idle_from = [], span.added_ms
    for t, active in sorted(samples):
        if t < span.added_ms or t > span.ended_ms:
            continue
        if active and active > 0:
            if idle_from is not None and (t - idle_from) / 1000 >= threshold_s:
                out.append((idle_from, t))
            idle_from = None
        elif idle_from is None:
            idle_from = t
    if idle_from is not None and (span.ended_ms - idle_from) / 1000 >= threshold_s:
        out.append((idle_from, span.ended_ms))
    return out


@dataclass(frozen=True)
class Capacity:
    """What a run held and used: slot-seconds (cores x seconds), task-seconds,
    memory held at the configured size against the exact peaks, and money."""
    slot_seconds: float
    task_seconds: Optional[float]
    idle_share: Optional[float]
    executors: int
    memory_per_executor: Optional[float]  # bytes asked for each executor
    memory_gb_seconds: Optional[float]  # held, at memory_per_executor
    heap_gb_seconds: Optional[float]  # each executor's peak heap over its life
    rss_gb_seconds: Optional[float]  # each executor's peak JVM RSS over its life
    cost: Optional[float]
    currency: str = ""
    idle: tuple[tuple[str, int, int], ...] = ()  # (executor, from ms, to ms) idle stretches
    stages: tuple[StageCapacity, ...] = ()

    @property
    def core_hours(self) -> float:
        return self.slot_seconds / 3600

    @property
    def gb_hours(self) -> Optional[float]:
        return None if self.memory_gb_seconds is None else self.memory_gb_seconds / 3600


def run_capacity(events: Iterable[dict[str, Any]], run_end_ms: int, task_ms: Optional[float],
                 settings: dict[str, Any], peaks: dict[str, dict[str, float]],
                 active_tasks: dict[str, list[tuple[int, float]]], stages: Iterable[dict[str, Any]] = (),
                 prices: Prices = Prices(), local_mode: bool = False,
                 idle_after_s: float = IDLE_STRETCH_S) -> Capacity:
    """A run's capacity from its executor events, its task time total (ms),
    its settings, each executor's exact peaks, its active-task samples and its stages."""
    spans = executor_spans(events, run_end_ms, local_mode, int(settings.get("spark.executor.cores") or 1))
    slots = slot_seconds_held(spans)
    task_s = None if task_ms is None else task_ms / 1000
    memory_each = None if local_mode else executor_memory_bytes(settings)
    memory = gb_seconds(spans, lambda _: memory_each) if memory_each else None
    heap = gb_seconds(spans, lambda s: peaks.get(s.executor_id, {}).get(JVM_HEAP_MEMORY))
    rss = gb_seconds(spans, lambda s: peaks.get(s.executor_id, {}).get(PROCESS_TREE_JVM_RSS_MEMORY) or None)
    idle = tuple((s.executor_id, a, b) for s in spans
                 for a, b in idle_stretches(active_tasks.get(s.executor_id, []), s, idle_after_s))
    return Capacity(slots, task_s, idle_share(task_s, slots), len(spans), memory_each, memory, heap, rss,
                    cost(prices, slots, memory), prices.currency, idle,
                    tuple(stage_capacity(stages, spans, memory_each, prices)))


# --- who used it: a Spark Connect server's users, sessions and operations -------------------
#
# On a Connect server every job belongs to one operation (a statement a client
# ran) of one session of one user: the annotator writes each job's owner and
# its tasks' time from launch to finish (task_ms: the slots Spark's scheduler
# held for them) at its end. What a user, session or operation used is the sum
# over its jobs, exact to the task. (The run's task-seconds above are the
# executors' run + deserialize time, which leaves out each task's trip to its
# executor and back: a few % less.) What it held
# is not its own: the server's executors serve every session at once and sit
# idle between them, so the run's held slot-seconds, memory and cost are split
# by share of task time (a user who ran 70 % of the task time pays 70 % of the
# capacity, the idle part included). Jobs no Connect operation ran (the
# server's own) get a row of their own.

MOST_OPERATIONS = 10  # the operations listed, those with the most task time


@dataclass(frozen=True)
class Attributed:
    """What one user, session or operation of a Connect server used, and its
    share of what the run held."""
    user: str
    session: str  # "" in a user's row
    operation: str  # "" in a user's or a session's row
    jobs: int
    task_seconds: float
    share: Optional[float]  # of the task time of all the run's jobs; None when none was counted
    slot_seconds: Optional[float]  # the run's held slot-seconds times share
    memory_gb_seconds: Optional[float]
    cost: Optional[float]
    first_ms: int  # its first job's start
    last_ms: int  # its last job's end
    description: str = ""  # an operation's: its first job's description

    @property
    def core_hours(self) -> Optional[float]:
        return None if self.slot_seconds is None else self.slot_seconds / 3600


@dataclass(frozen=True)
class ConnectAttribution:
    users: tuple[Attributed, ...]  # most task time first
    sessions: tuple[Attributed, ...]
    operations: tuple[Attributed, ...]  # the MOST_OPERATIONS with the most task time
    operations_total: int
    other: Optional[Attributed]  # jobs no Connect operation ran
    task_seconds: float  # over every job of the run: what the shares are of


def _attributed(rows: list[dict[str, Any]], user: str, session: str, operation: str, total_ms: float,
                cap: Capacity) -> Attributed:
    task_ms = sum(float(r.get("task_ms") or 0) for r in rows)
    share = task_ms / total_ms if total_ms else None

    def part(whole: Optional[float]) -> Optional[float]:
        return None if whole is None or share is None else whole * share

    described = next((str(r["description"]) for r in rows if r.get("description")), "")
    return Attributed(user, session, operation, len(rows), task_ms / 1000, share, part(cap.slot_seconds),
                      part(cap.memory_gb_seconds), part(cap.cost),
                      min(int(r["time"]) for r in rows),
                      max(int(r.get("end_time_ms") or r["time"]) for r in rows), described)


def connect_attribution(jobs: Iterable[dict[str, Any]], cap: Capacity,
                        most_operations: int = MOST_OPERATIONS) -> Optional[ConnectAttribution]:
    """Task time, held slot-seconds, memory and cost per user, session and
    operation of a Connect server, from its ended jobs (store.reads.job_work
    rows); None for a run none of whose jobs a Connect operation ran."""
    jobs = list(jobs)
    owned = [j for j in jobs if j.get("connect_session")]
    if not owned:
        return None
    total_ms = sum(float(j.get("task_ms") or 0) for j in jobs)

    def grouped(key: Callable[[dict[str, Any]], tuple[str, str, str]]) -> list[Attributed]:
        groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        for j in owned:
            groups.setdefault(key(j), []).append(j)
        made = [_attributed(rows, *k, total_ms, cap) for k, rows in groups.items()]
        return sorted(made, key=lambda a: (-a.task_seconds, a.first_ms))

    def user(j: dict[str, Any]) -> str:
        return str(j.get("connect_user") or "")

    users = grouped(lambda j: (user(j), "", ""))
    sessions = grouped(lambda j: (user(j), str(j["connect_session"]), ""))
    operations = grouped(lambda j: (user(j), str(j["connect_session"]), str(j.get("connect_operation") or "")))
    rest = [j for j in jobs if not j.get("connect_session")]
    other = _attributed(rest, "", "", "", total_ms, cap) if rest else None
    return ConnectAttribution(tuple(users), tuple(sessions), tuple(operations[:most_operations]), len(operations),
                              other, total_ms / 1000)
