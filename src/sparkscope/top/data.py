"""What `sparkscope top` reads through the read layer (store/reads.py) into
plain values: the runs, one run's executors as they are now, what the
annotator says runs now, and the host's disks.

A refresh costs a few queries (bench/top_refresh.py), each grouped by
executor and bounded to the last few sink periods: never samples over the
whole run. A run that ended is shown as it was at its end. Every run id and
name is data: the read layer quotes it for the store's query language."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Optional

from sparkscope.store import influx
from sparkscope.store.figures import gc_share_of_wall_time
from sparkscope.store.reads import InfluxReads, Reads, Recent, Run, executors_regex
from sparkscope.store.schema import (
    ANNOTATION_MEASUREMENTS, EXECUTOR_MEASUREMENT, HEAP_MAX, JVM_HEAP_MEMORY, MAJOR_GC_TIME, MINOR_GC_TIME,
    ON_HEAP_EXECUTION_MEMORY, ON_HEAP_STORAGE_MEMORY, PROCESS_TREE_JVM_RSS_MEMORY, PROCESS_TREE_OTHER_RSS_MEMORY,
    PROCESS_TREE_PYTHON_RSS_MEMORY, PROCESS_TREE_RSS, SHUFFLE_BYTES_WRITTEN_COUNT, SHUFFLE_TOTAL_BYTES_READ_COUNT,
    THREADPOOL_ACTIVE_TASKS,
)

# Spark's gauges, each executor's last sample: measurement -> ExecutorNow field.
GAUGES = {
    THREADPOOL_ACTIVE_TASKS: "active_tasks", JVM_HEAP_MEMORY: "heap_used", HEAP_MAX: "heap_max",
    PROCESS_TREE_JVM_RSS_MEMORY: "rss_jvm", PROCESS_TREE_PYTHON_RSS_MEMORY: "rss_python",
    PROCESS_TREE_OTHER_RSS_MEMORY: "rss_other", ON_HEAP_EXECUTION_MEMORY: "execution",
    ON_HEAP_STORAGE_MEMORY: "storage",
}
# Counters (they only grow while an executor lives), read as a rate per second
# between its last two samples: measurement -> ExecutorNow field (summed).
COUNTERS = {MINOR_GC_TIME: "gc_ms_per_s", MAJOR_GC_TIME: "gc_ms_per_s",
            SHUFFLE_TOTAL_BYTES_READ_COUNT: "shuffle_read", SHUFFLE_BYTES_WRITTEN_COUNT: "shuffle_write"}
HEAP, ACTIVE_TASKS = JVM_HEAP_MEMORY, THREADPOOL_ACTIVE_TASKS
RSS = PROCESS_TREE_RSS
# What a sort by each column (its key) must read for every executor, beyond heap and tasks.
SORT_NEEDS = {"m": RSS, "g": (MINOR_GC_TIME, MAJOR_GC_TIME), "r": (SHUFFLE_TOTAL_BYTES_READ_COUNT,),
              "w": (SHUFFLE_BYTES_WRITTEN_COUNT,)}
SORT_VALUES = {"t": lambda e: e.active_tasks, "h": lambda e: e.heap_used, "m": lambda e: e.rss,
               "g": lambda e: e.gc_ms_per_s, "r": lambda e: e.shuffle_read, "w": lambda e: e.shuffle_write}
# Points read per annotator series and refresh (a series is a measurement and
# status, e.g. the stages that SUCCEEDED): a stage that started before this
# many newer ones of its kind is no longer shown as running.
ANNOTATION_DEPTH = 50
ALIVE_S = 20  # an executor with no sample for this long is not shown (the dashboards' "alive")
HISTORY_POINTS = 24  # heap sparkline: this many intervals
MOST_RUNS = 40  # in the run picker




@dataclass
class ExecutorNow:
    executor_id: str
    last_ms: int = 0  # its newest sample
    active_tasks: Optional[float] = None
    cores: Optional[int] = None
    heap_used: Optional[float] = None
    heap_max: Optional[float] = None
    rss_jvm: Optional[float] = None
    rss_python: Optional[float] = None
    rss_other: Optional[float] = None
    execution: Optional[float] = None
    storage: Optional[float] = None
    gc_ms_per_s: Optional[float] = None  # GC milliseconds per second: /1000 is the share of wall time
    shuffle_read: Optional[float] = None  # bytes per second
    shuffle_write: Optional[float] = None
    heap_history: list[float] = field(default_factory=list)
    limit: Optional[float] = None  # the container's memory: as measured (ContainerMemoryPlugin), else as
    # Spark asks for one (YARN, Kubernetes)
    working_set: Optional[float] = None  # the container's working set, what its OOM killer judges

    @property
    def rss(self) -> Optional[float]:
        parts = [p for p in (self.rss_jvm, self.rss_python, self.rss_other) if p is not None]
        return sum(parts) if parts else None

    @property
    def gc_share(self) -> Optional[float]:
        """GC share of wall time (store/figures.py): what the live GC alert fires on."""
        return gc_share_of_wall_time(self.gc_ms_per_s)


@dataclass
class Activity:
    """A query, job or stage as the annotator wrote it."""
    kind: str  # query | job | stage
    key: str  # its id: "12", or "4.0" for a stage attempt
    text: str
    started_ms: int
    status: str
    row: dict[str, Any] = field(default_factory=dict)


@dataclass
class Snapshot:
    run: Run
    at_ms: int  # the moment shown: now, or the run's end
    executors: list[ExecutorNow]
    running: dict[str, list[Activity]]  # kind -> running now, newest first
    last: dict[str, Optional[Activity]]  # kind -> the newest finished one
    stragglers: list[Activity]  # newest first
    removed: list[dict[str, Any]]  # executors removed (lost or released), newest first
    interval_s: float

    @property
    def task_slots(self) -> Optional[int]:
        """The cores of every executor shown, None while one's are not known:
        an executor's cores come from the annotator's `added` event, which can
        arrive a refresh after its first metrics, and a total of the others
        would be too low. The driver counts where it has cores (local mode)."""
        if any(e.cores is None for e in self.executors if e.executor_id != "driver"):
            return None
        cores = [e.cores for e in self.executors if e.cores]
        return sum(cores) if cores else None


@dataclass
class DiskNow:
    host: str
    device: str
    reads: float = 0.0  # per second
    writes: float = 0.0
    read_bytes: float = 0.0
    write_bytes: float = 0.0
    busy: float = 0.0  # share of time with I/O in flight, 0..1
    await_ms: Optional[float] = None  # per completed I/O, queueing included


@dataclass
class Histogram:
    """One device and direction's block I/O latencies over the probe's last period."""
    host: str
    device: str
    direction: str
    at_ms: int
    buckets: dict[int, int]  # upper bound in microseconds (exclusive) -> I/Os


@dataclass
class DisksSnapshot:
    at_ms: int
    disks: list[DiskNow]
    histograms: list[Histogram]
    outliers: list[dict[str, Any]]  # the probe's slow I/Os of that period, slowest first
    period_s: float
    run: Optional[Run] = None  # the run whose time it is read at (its end, once it ended)




class TopReader:
    """Reads for one screen; keeps what does not change while a run lives
    (its executors' cores, its memory settings) between refreshes."""

    def __init__(self, where: influx.Where, database: str, interval_s: float = 5.0, timeout_s: float = 10.0,
                 store: Optional[Reads] = None):
        self.where = where
        self.database = database
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        # The metrics store's reads (stack.metrics_reads: InfluxDB, or Thanos for the metrics).
        self.store = store if store is not None else InfluxReads(where, database, timeout_s)
        self._cores: dict[str, dict[str, int]] = {}  # app -> executor -> cores
        self._cores_since: dict[str, int] = {}
        self._conf: dict[str, dict[str, Any]] = {}
        self._heap_maxes: dict[str, dict[str, float]] = {}  # app -> executor -> bytes

    # --- runs ----------------------------------------------------------------------------

    def runs(self, most: int = MOST_RUNS) -> list[Run]:
        """The newest runs with the annotator, newest first."""
        return self.store.runs(most)

    def default_run(self) -> Optional[Run]:
        """The newest run still running (still reporting metrics: a driver killed
        outright never writes FINISHED), else the newest."""
        runs = self.runs()
        for run in [r for r in runs if r.running][:5]:
            if self.store.reports_since(run.app_id, 120):
                return run
        return runs[0] if runs else None

    def run(self, app_id: str) -> Optional[Run]:
        """The run of this id; one without annotator points is shown by its metrics alone;
        None when InfluxDB has neither."""
        return self.store.run(app_id)

    # --- one run now ----------------------------------------------------------------------

    def recent(self, run: Run, seconds: float) -> Recent:
        """The last `seconds` before now, or before the run's end (and the last reports
        that leave each JVM as it stops)."""
        return Recent(seconds, None if run.running else run.ended_ms)

    def window(self, run: Run, seconds: float) -> str:
        """The time condition of the last `seconds`: before now, or before the run's end
        (and the last reports that leave each JVM as it stops)."""
        if run.running:
            return f"time > now() - {int(seconds * 1000)}ms"
        return f"time > {run.ended_ms - int(seconds * 1000)}ms"

    def snapshot(self, run: Run, sort: str = "h", descending: bool = True, offset: int = 0,
                 rows: int = 60) -> Snapshot:
        """The run now. Every executor's heap and active tasks (who is alive, the
        default order, the header) and what the sort column needs are read for all
        executors; the other columns only for the `rows` executors from `offset` in
        that order, the ones a screen can show: at 500 executors a read of every
        column of every executor took 300 ms, this a third of it (bench/top_refresh.py)."""
        run = self.run(run.app_id) or run  # it may have ended since
        alive = self.recent(run, max(ALIVE_S, 3 * self.interval_s))
        limit = container_limit(self._memory_conf(run.app_id))
        executors: dict[str, ExecutorNow] = {}
        # For every executor: JVMHeapMemory comes from every JVM (the driver's too), activeTasks
        # from those that run tasks; RSS too where a container limit makes it a flag.
        gauges = {HEAP, ACTIVE_TASKS, *SORT_NEEDS.get(sort, ()), *(RSS if limit else ())} & set(GAUGES)
        counters = set(SORT_NEEDS.get(sort, ())) & set(COUNTERS)
        self._read_gauges(executors, gauges, run, alive, None, create=True)
        self._read_rates(executors, counters, run, alive, None)
        ids = [e.executor_id for e in ordered(list(executors.values()), sort, descending)]
        start = max(0, min(offset, len(ids) - rows))
        shown = None if len(ids) <= rows else ids[start:start + rows]  # None: all of them
        self._read_gauges(executors, set(GAUGES) - gauges - {HEAP_MAX}, run, alive, shown)
        self._read_rates(executors, set(COUNTERS) - counters, run, alive, shown)
        self._read_history(executors, run, shown)
        heap_max = self._heap_max(run, alive, list(executors))
        cores = self._executor_cores(run.app_id)
        measured = self._containers(run.app_id, self.window(run, alive.seconds), shown)
        for e in executors.values():
            e.heap_max = heap_max.get(e.executor_id)
            e.cores = cores.get(e.executor_id)
            e.limit = limit if e.executor_id != "driver" else None
            if e.executor_id in measured:  # the cgroup's own word wins over what Spark asked for
                e.working_set, e.limit = measured[e.executor_id]["ws"], measured[e.executor_id]["lim"] or e.limit
        running, last, stragglers, removed = self._annotations(run)
        at = int(time.time() * 1000) if run.running else (run.ended_ms or 0)
        return Snapshot(run, at, list(executors.values()), running, last, stragglers, removed, self.interval_s)

    def _containers(self, app: str, alive: str, shown: Optional[list[str]]) -> dict[str, dict[str, Any]]:
        """Each JVM's container as it last read it: working set and limit."""
        if shown == []:
            return {}
        return self.store.containers_now(app, alive, _only(shown))

    def _read_gauges(self, executors: dict[str, ExecutorNow], measurements: set[str], run: Run, alive: Recent,
                     shown: Optional[list[str]], create: bool = False) -> None:
        """Each executor's last sample of each gauge in the window (sets last_ms too)."""
        if not measurements or shown == []:
            return
        for (executor_id, measurement), (t, value) in self.store.latest(
                run.app_id, tuple(sorted(measurements)), alive, shown).items():
            if create:
                executors.setdefault(executor_id, ExecutorNow(executor_id))
            e = executors.get(executor_id)
            if e is not None:
                setattr(e, GAUGES[measurement], value)
                e.last_ms = max(e.last_ms, t)

    def _read_rates(self, executors: dict[str, ExecutorNow], measurements: set[str], run: Run, alive: Recent,
                    shown: Optional[list[str]]) -> None:
        """Each counter's rate between consecutive samples of the window (a few rows a series),
        averaged over the last interval: one sample to the next alone jumps, as Spark polls
        ExecutorMetrics every 2 s but sends every sink period."""
        if not measurements or shown == []:
            return
        rates = self.store.rates(run.app_id, tuple(sorted(measurements)), alive, shown)
        for (executor_id, measurement), points in rates.items():
            if executor_id in executors and points:
                e, name = executors[executor_id], COUNTERS[measurement]
                setattr(e, name, (getattr(e, name) or 0.0) + recent_mean(points, self.interval_s))

    def _read_history(self, executors: dict[str, ExecutorNow], run: Run, shown: Optional[list[str]]) -> None:
        bucket = max(1, round(self.interval_s))
        if shown == []:
            return
        for executor_id, values in self.store.history(run.app_id, HEAP, self.recent(run, bucket * HISTORY_POINTS),
                                                      bucket, shown).items():
            if executor_id in executors:
                executors[executor_id].heap_history = values[-HISTORY_POINTS:]

    def _heap_max(self, run: Run, alive: Recent, ids: list[str]) -> dict[str, float]:
        """Each JVM's max heap: fixed at its start (-Xmx), so read once per executor."""
        known = self._heap_maxes.setdefault(run.app_id, {})
        missing = [i for i in ids if i not in known]
        if missing:
            for (executor_id, _), (_, value) in self.store.latest(
                    run.app_id, (HEAP_MAX,), alive, missing if len(missing) <= 50 else None).items():
                known[executor_id] = value
        return known

    def _executor_cores(self, app_id: str) -> dict[str, int]:
        """Each executor's cores from the annotator's added events, read once each."""
        known = self._cores.setdefault(app_id, {})
        since = self._cores_since.get(app_id, 0)
        for row in self.store.executor_events(app_id, "added", since):
            if row.get("executor_id") is not None and row.get("cores") is not None:
                known[str(row["executor_id"])] = int(row["cores"])
            self._cores_since[app_id] = max(self._cores_since.get(app_id, 0), int(row["time"]))
        return known

    def _memory_conf(self, app_id: str) -> dict[str, Any]:
        if app_id not in self._conf:
            conf = self.store.memory_conf(app_id)
            if not conf:
                return {}  # not written yet: asked again next time
            self._conf[app_id] = conf
        return self._conf[app_id]

    def _annotations(self, run: Run):
        """One query for the newest points of each annotator series: what runs now,
        what ran last, straggler stages and removed executors."""
        return split_annotations(self.store.newest_annotations(run.app_id, ANNOTATION_DEPTH))

    # --- disks ----------------------------------------------------------------------------

    def disks(self, run: Optional[Run]) -> DisksSnapshot:
        """The host's disks over the last Telegraf intervals (now, or at the run's end) and
        the block I/O probe's last period."""
        ended = run is not None and not run.running
        recent = self.window(run, 60) if ended else "time > now() - 60s"
        if ended:
            recent += f" AND time <= {run.ended_ms + 10_000}ms"  # Telegraf's interval past the end
        latest = self.store.disk_rates(recent)
        disks = [disk_now(host, name, row) for (host, name), row in latest.items()]
        histograms, period_s = latest_histograms(self.store.block_latency_periods(recent))
        outliers: list[dict[str, Any]] = []
        if histograms:
            newest = max(h.at_ms for h in histograms)
            outliers = self.store.block_outliers(newest - int(period_s * 1000), newest)
            outliers.sort(key=lambda r: -(r.get("latency_ms") or 0))
        at = (run.ended_ms if ended else int(time.time() * 1000)) or 0
        return DisksSnapshot(at, disks, histograms, outliers, period_s, run)


def _only(ids: Optional[list[str]]) -> str:
    """The InfluxQL condition that keeps these executors' series (None: every executor)."""
    return "" if ids is None else executors_regex(ids)


def executor_order(executor_id: str) -> tuple:
    """driver first, then numerically: 2 before 10."""
    return (0, 0, "") if executor_id == "driver" else (1, int(executor_id), "") if executor_id.isdigit() \
        else (2, 0, executor_id)


def ordered(executors: list[ExecutorNow], sort: str, descending: bool) -> list[ExecutorNow]:
    """Executors in the screen's order: by a column's value (unknown last when descending),
    or by id ("e": the driver, then 0, 1, 2 ... 10)."""
    by_id = sorted(executors, key=lambda e: executor_order(e.executor_id))
    if sort not in SORT_VALUES:
        return by_id[::-1] if descending and sort == "e" else by_id

    def value(e: ExecutorNow) -> float:
        v = SORT_VALUES[sort](e)
        return -1.0 if v is None else float(v)

    return sorted(by_id, key=value, reverse=descending)


def _int(value: Any) -> Optional[int]:
    return None if value is None else int(value)


def recent_mean(points: list[tuple[int, float]], seconds: float) -> float:
    """The mean of the values of the last `seconds` before the newest (the newest at least)."""
    newest = max(t for t, _ in points)
    recent = [v for t, v in points if t > newest - seconds * 1000] or [0.0]
    return sum(recent) / len(recent)


def container_limit(conf: dict[str, Any]) -> Optional[float]:
    """An executor container's memory as YARN and Kubernetes size it: heap +
    overhead (default 10%, at least 384 MiB) + PySpark memory + off-heap; None
    elsewhere (standalone and local executors have no container)."""
    master = str(conf.get("spark.master") or "")
    if not master.startswith(("yarn", "k8s")):
        return None
    heap = spark_bytes(conf.get("spark.executor.memory")) or 1024 * 2**20
    overhead = spark_bytes(conf.get("spark.executor.memoryOverhead"))
    if overhead is None:
        factor = float(conf.get("spark.executor.memoryOverheadFactor") or 0.1)
        overhead = max(384 * 2**20, heap * factor)
    off_heap = spark_bytes(conf.get("spark.memory.offHeap.size")) \
        if str(conf.get("spark.memory.offHeap.enabled")).lower() == "true" else 0
    return heap + overhead + (spark_bytes(conf.get("spark.executor.pyspark.memory")) or 0) + (off_heap or 0)


def spark_bytes(value: Any) -> Optional[float]:
    """A Spark size setting ("4g", "512m", "1024"; plain numbers in MiB) in bytes."""
    if value is None or str(value).strip() == "":
        return None
    text = str(value).strip().lower().rstrip("b")
    units = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
    try:
        if text[-1:] in units:
            return float(text[:-1]) * units[text[-1]]
        return float(text) * 2**20
    except ValueError:
        return None


ACTIVITY_ID = {"query": ("execution_id",), "job": ("job_id",), "stage": ("stage_id", "attempt")}
ANNOTATION_KIND = {kind: next(m for m in ANNOTATION_MEASUREMENTS if m.endswith("_" + kind)) for kind in ACTIVITY_ID}


def split_annotations(rows: list[dict[str, Any]]):
    """The annotator's newest points (ANNOTATION_DEPTH per series) into: what runs
    now per kind, the newest finished per kind, straggler stages and removed
    executors. A RUNNING point is still running when no finished point has its
    id; one older than the oldest finished point read (of a series cut at the
    depth) cannot be told and is left out."""
    running: dict[str, list[Activity]] = {}
    last: dict[str, Optional[Activity]] = {}
    stragglers: list[Activity] = []
    for kind, keys in ACTIVITY_ID.items():
        mine = [r for r in rows if r["_measurement"] == ANNOTATION_KIND[kind]]

        def activity(r: dict[str, Any]) -> Activity:
            key = ".".join(str(_int(r.get(k))) for k in keys)
            return Activity(kind, key, str(r.get("text") or f"{kind} {key}"), int(r["time"]),
                            str(r.get("status") or ""), r)

        done = [activity(r) for r in mine if r.get("status") != "RUNNING"]
        finished_keys = {a.key for a in done}
        series: dict[tuple, list[int]] = {}
        for a in done:
            series.setdefault((a.status, a.row.get("straggler"), a.row.get("host")), []).append(a.started_ms)
        horizon = max((min(times) for times in series.values() if len(times) >= ANNOTATION_DEPTH), default=0)
        now = [activity(r) for r in mine if r.get("status") == "RUNNING"]
        running[kind] = sorted((a for a in now if a.key not in finished_keys and a.started_ms >= horizon),
                               key=lambda a: -a.started_ms)
        last[kind] = max(done, key=lambda a: (a.started_ms, a.row.get("end_time_ms") or 0), default=None)
        if kind == "stage":
            stragglers = sorted((a for a in done if a.row.get("straggler") == "true"), key=lambda a: -a.started_ms)
    removed = sorted((r for r in rows if r["_measurement"] == EXECUTOR_MEASUREMENT and r.get("event") == "removed"),
                     key=lambda r: -r["time"])
    return running, last, stragglers, removed


def disk_now(host: str, device: str, row: dict[str, Any]) -> DiskNow:
    def rate(name: str) -> float:
        return float(row.get(name) or 0.0)

    ios = rate("reads") + rate("writes")
    return DiskNow(host, device, rate("reads"), rate("writes"), rate("read_bytes"), rate("write_bytes"),
                   busy=min(1.0, rate("io_time") / 1000),
                   await_ms=(rate("read_time") + rate("write_time")) / ios if ios > 0 else None)


def latest_histograms(rows: list[dict[str, Any]], default_period_s: float = 10.0) -> tuple[list[Histogram], float]:
    """Per host, device and direction, the buckets of its newest period; and the
    probe's period (the gap to the period before, where one was read)."""
    newest: dict[tuple[str, str, str], int] = {}
    for r in rows:
        key = (r.get("host", ""), r["device"], r["direction"])
        newest[key] = max(newest.get(key, 0), int(r["time"]))
    out: dict[tuple[str, str, str], Histogram] = {}
    gaps = []
    for r in rows:
        key = (r.get("host", ""), r["device"], r["direction"])
        at = int(r["time"])
        if at == newest[key]:
            hist = out.setdefault(key, Histogram(*key, at_ms=at, buckets={}))
            hist.buckets[int(r["le_us"])] = int(r["count"] or 0)
        else:
            gaps.append(newest[key] - at)
    period_s = min(gaps) / 1000 if gaps else default_period_s
    return sorted(out.values(), key=lambda h: (h.device, h.direction, h.host)), period_s
