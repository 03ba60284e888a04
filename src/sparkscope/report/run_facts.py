"""What one run left in InfluxDB, read into plain values: the annotator's
exact peaks and memory settings, its stages and queries, and the Graphite
samples the plots and the task-time breakdown need."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Optional

from sparkscope.errors import SparkscopeError
from sparkscope.stack import rollups
from sparkscope.store import influx
from sparkscope.store.reads import RUNNING, InfluxReads, Reads, Rollup, Run
from sparkscope.store.schema import (
    CPU_TIME_COUNT, DESERIALIZE_TIME_COUNT, DISK_BYTES_SPILLED_COUNT, HEAP_MAX, JVM_GC_TIME_COUNT, JVM_HEAP_MEMORY,
    MEMORY_BYTES_SPILLED_COUNT, OLD_GEN_POOLS, ON_HEAP_UNIFIED_MEMORY, PROCESS_TREE_JVM_RSS_MEMORY,
    PROCESS_TREE_PYTHON_RSS_MEMORY, RESULT_SERIALIZATION_TIME_COUNT, RUN_TIME_COUNT, SHUFFLE_FETCH_WAIT_TIME_COUNT,
    SHUFFLE_WRITE_TIME_COUNT, STATUS, SUCCEEDED_TASKS_COUNT,
)

MIB = 1024 * 1024
# A run with no end point whose driver has not reported for this long ended
# without its shutdown hooks (SIGKILL, the OOM killer, a lost host): "no end
# seen". Spark's sink reports every 1-10 s and Telegraf flushes every 2 s.
NO_END_GRACE_MS = 120_000


class NoRunError(SparkscopeError):
    pass


NO_END_SEEN = "NO_END_SEEN"


def ending_of(end_status: Optional[str], last_report_ms: Optional[int], now_ms: int) -> str:
    """The run's end as the report tells it (RunFacts.ending)."""
    if end_status:
        return end_status
    if last_report_ms is not None and now_ms - last_report_ms < NO_END_GRACE_MS:
        return "RUNNING"
    return NO_END_SEEN


@dataclass
class ExecutorFacts:
    executor_id: str
    peaks: dict[str, float] = field(default_factory=dict)  # Spark's ExecutorMetrics names, exact
    heap_max: Optional[float] = None  # sampled: the JVM's max heap (about spark.executor.memory)
    live_set: Optional[float] = None  # sampled: old generation used after GC, highest
    cores: Optional[int] = None
    totals: dict[str, float] = field(default_factory=dict)  # counters at their last value (ms, bytes)
    series: dict[str, list[tuple[int, float]]] = field(default_factory=dict)  # sampled, for the plots
    container: Optional[ContainerFacts] = None  # its memory cgroup, from ContainerMemoryPlugin


@dataclass
class ContainerFacts:
    """An executor's (or the driver's) memory cgroup over the run, as its own
    JVM sampled it (sparkscope_container): the limit (None: no limit), the
    highest working set and usage, and the OOM kills inside it during the
    run (processes killed by the kernel; a killed JVM itself is told by the
    executor's removal, since it writes nothing more)."""
    limit: Optional[float]
    working_set: float
    usage: float
    anon: float
    oom_kills: int
    cgroup_version: int
    last_working_set: Optional[float] = None  # at its last sample: just before a kill, the fill


# A query's first batch also plans the query and warms the JVMs: it is left out
# of the median, and a query is judged on this many batches at least.
MIN_BATCHES_TO_JUDGE = 3


@dataclass
class StreamingFacts:
    """One Structured Streaming query of the run (the annotator's
    sparkscope_streaming, per batch, and sparkscope_streaming_query at its end)."""
    name: str
    batches: int
    median_batch_ms: Optional[float]
    slowest_batch_ms: Optional[float]
    trigger_ms: Optional[float]
    first_lag_ms: Optional[float]
    last_lag_ms: Optional[float]
    state_rows: Optional[float]
    backlog: Optional[float]
    status: str = "RUNNING"  # FINISHED, FAILED, or RUNNING while no end was seen
    slowest_batch_id: Optional[int] = None
    slowest_why: Optional[str] = None
    exception: Optional[str] = None
    # The lag at the second batch: where slipping is counted from, as the first
    # batch also plans the query and warms cold JVMs (seconds, once).
    second_lag_ms: Optional[float] = None
    # How much further behind the clock a batch left event time than the one
    # before it, at the 75th percentile of the batches after the first: a query
    # that slips does so batch after batch, where one stalled batch (a GC, a busy
    # host) moves the lag once. None when the source carries no event time.
    lag_step_p75_ms: Optional[float] = None

    @property
    def behind(self) -> bool:
        """Falling behind: batches longer than the trigger, or event time slipping
        further behind the clock batch after batch (at least a quarter of the batches
        each add half a trigger or more) and by more than a few triggers in all after
        the first batch. A source that cannot catch up (the rate source advances a
        fixed time per batch) keeps a one-off stall as a step; that is not slipping."""
        if self.batches < MIN_BATCHES_TO_JUDGE:
            return False
        trigger = max(self.trigger_ms or 1000, 1000)
        slow = bool(self.trigger_ms and self.median_batch_ms and self.median_batch_ms > self.trigger_ms)
        since = self.second_lag_ms if self.second_lag_ms is not None else self.first_lag_ms
        slipped = (since is not None and self.last_lag_ms is not None and self.last_lag_ms - since > 3 * trigger)
        steady = self.lag_step_p75_ms is None or self.lag_step_p75_ms >= trigger / 2
        return slow or (slipped and steady)


@dataclass
class RunFacts:
    app_id: str
    app_name: str
    started_ms: int
    ended_ms: Optional[int]
    settings: dict[str, str]
    executors: dict[str, ExecutorFacts]
    stages: list[dict[str, Any]]
    stage_peaks: list[dict[str, Any]]
    queries: list[dict[str, Any]]
    removals: list[dict[str, Any]]
    streaming: list[StreamingFacts] = field(default_factory=list)
    # How the run ended: the annotator's end status (FINISHED, FAILED, CANCELLED),
    # RUNNING while its driver still reports, or NO_END_SEEN (ended_ms is then
    # the driver's last report).
    ending: str = "FINISHED"
    # Every executor added and removed (the annotator's events), and each JVM's
    # running tasks over the run (store.reads.active_tasks): what capacity is
    # counted from (report/capacity.py).
    executor_events: list[dict[str, Any]] = field(default_factory=list)
    active_tasks: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    # The run's ended jobs with their task time and, on a Spark Connect server,
    # who ran them (store.reads.job_work): the capacity's attribution to users.
    jobs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def no_end_seen(self) -> bool:
        return self.ending == NO_END_SEEN

    @property
    def duration_ms(self) -> Optional[int]:
        return self.ended_ms - self.started_ms if self.ended_ms else None

    @property
    def local_mode(self) -> bool:
        master = self.settings.get("spark.master", "")
        return master.startswith("local") and not master.startswith("local-cluster")

    def workers(self) -> dict[str, ExecutorFacts]:
        """The executors that ran tasks: the driver only in local mode."""
        if self.local_mode:
            return {k: v for k, v in self.executors.items() if k == "driver"}
        return {k: v for k, v in self.executors.items() if k != "driver"}


# Counters of Spark's executor source, each executor's total at its last report.
TOTALS = {
    RUN_TIME_COUNT: "run_ms", CPU_TIME_COUNT: "cpu_ns", JVM_GC_TIME_COUNT: "gc_ms",
    SHUFFLE_FETCH_WAIT_TIME_COUNT: "fetch_wait_ms", DESERIALIZE_TIME_COUNT: "deserialize_ms",
    RESULT_SERIALIZATION_TIME_COUNT: "serialize_ms", SHUFFLE_WRITE_TIME_COUNT: "shuffle_write_ns",
    MEMORY_BYTES_SPILLED_COUNT: "spilled_memory", DISK_BYTES_SPILLED_COUNT: "spilled_disk",
    SUCCEEDED_TASKS_COUNT: "tasks",
}
# How the sampled metrics of a run are read, so that a week-long run reads
# about as much as an hour-long one (the report's bound: docs/performance.md,
# bench/report_long_run.py). Up to LONG_RUN_MS, raw samples; beyond, the
# 10-minute rollup (each bucket's highest value as "value") up to TAIL_MS
# before the end, and raw samples after it, which the rollup may not hold
# yet (its query recomputes the last 20 minutes every 10). Highest values
# (totals, peaks) are the same either way; plots get at most PLOT_POINTS
# buckets per executor.
LONG_RUN_MS = 12 * 3_600_000
TAIL_MS = 40 * 60_000
ROLLUP = rollups.LEVELS[2]  # sparkscope_10m
ROLLUP_BUCKET_MS = 600_000
PLOT_POINTS = 720
SERIES = {JVM_HEAP_MEMORY: "heap", ON_HEAP_UNIFIED_MEMORY: "unified", PROCESS_TREE_JVM_RSS_MEMORY: "JVM RSS",
          PROCESS_TREE_PYTHON_RSS_MEMORY: "Python RSS"}


# Running tasks are read per bucket, at most this many per JVM: the sink's own
# period (1-10 s) on runs of up to a few hours, coarser beyond.
ACTIVE_BUCKETS = 5000


def active_bucket_s(started_ms: int, ended_ms: int) -> int:
    return max(1, -(-(ended_ms - started_ms) // 1000 // ACTIVE_BUCKETS))


READ_TIMEOUT_S = 60.0
REPORT_ROLLUP = Rollup(ROLLUP.policy, ROLLUP_BUCKET_MS)


class RunReader:
    """A run's facts, composed from the read layer (store/reads.py)."""

    def __init__(self, where: influx.Where, database: str, store: Optional[Reads] = None):
        self.url = where
        self.database = database
        # The metrics store's reads (stack.metrics_reads(settings, READ_TIMEOUT_S, REPORT_ROLLUP)).
        self.store = store if store is not None else InfluxReads(where, database, timeout_s=READ_TIMEOUT_S,
                                                                 rollup=REPORT_ROLLUP)

    def finished_runs(self, app_name: Optional[str] = None) -> list[Run]:
        """Finished applications, newest first."""
        return self.store.finished_runs(app_name)

    def latest_app(self) -> str:
        runs = self.finished_runs()
        if not runs:
            raise NoRunError("no finished Spark application with the sparkscope annotator in InfluxDB yet: run a "
                             "job with the flags of ./sparkscope conf (or ./sparkscope demo), then ./sparkscope report")
        return runs[0].app_id

    def highest(self, measurement: str, app_id: str, span: tuple[int, int]) -> dict[str, float]:
        """Each executor's highest value over the run."""
        return self.store.highest(measurement, app_id, span, LONG_RUN_MS, TAIL_MS)

    def plotted(self, measurement: str, app_id: str, span: tuple[int, int]) -> dict[str, list[tuple[int, float]]]:
        """Each executor's highest value per bucket, at most about PLOT_POINTS buckets."""
        start, end = span
        bucket_s = max(10, -(-(end - start) // 1000 // PLOT_POINTS))
        bucket_s = -(-bucket_s // 10) * 10
        return self.store.plotted(measurement, app_id, span, bucket_s, LONG_RUN_MS, TAIL_MS)

    def containers(self, app_id: str, span: tuple[int, int]) -> dict[str, ContainerFacts]:
        """Per executor, its container over the run."""
        return {executor_id: ContainerFacts(
                    limit=row.get("lim"), working_set=row.get("ws") or 0, usage=row.get("usage") or 0,
                    anon=row.get("anon") or 0,
                    oom_kills=int((row.get("kills_hi") or 0) - (row.get("kills_lo") or 0)),
                    cgroup_version=int(row.get("version") or 0), last_working_set=row.get("ws_last"))
                for executor_id, row in self.store.containers(app_id, span).items()}

    def streaming(self, app_id: str) -> list[StreamingFacts]:
        """Each streaming query of the run: aggregates of its batches, one row per query."""
        out = []
        for name, row in self.store.streaming(app_id).items():
            facts = StreamingFacts(name, int(row.get("n") or 0), row.get("median"), row.get("slowest"),
                                   row.get("trig"), row.get("lag0"), row.get("lag1"), row.get("state"),
                                   row.get("backlog"), second_lag_ms=row.get("lag"),
                                   lag_step_p75_ms=row.get("p75"))
            end = row.get("end")
            if end:
                facts.status = end.get(STATUS) or facts.status
                facts.slowest_batch_id = end.get("slowest_batch_id")
                facts.slowest_why = end.get("slowest_batch_why")
                facts.exception = end.get("exception")
            out.append(facts)
        return sorted(out, key=lambda f: f.name)

    def read(self, app_id: str) -> RunFacts:
        apps = self.store.application_points(app_id)
        if not apps:
            raise NoRunError(f"application {app_id} is not in InfluxDB (no sparkscope_application point): check "
                             "the id (./sparkscope report without an id takes the latest run), and that the run "
                             "had the annotator (spark.plugins=...ListenerPlugin, see ./sparkscope conf)")
        ends = [a for a in apps if a.get(STATUS) not in (None, RUNNING)]
        head = ends[0] if ends else apps[0]
        last_report_ms = self.store.last_report_ms(app_id)
        now_ms = int(time.time() * 1000)
        ending = ending_of(head.get(STATUS) if ends else None, last_report_ms, now_ms)
        started_ms = int(apps[0]["time"])
        ended_ms = int(head["end_time_ms"]) if head.get("end_time_ms") else (
            last_report_ms if ending == NO_END_SEEN else None)
        settings = {k: v for k, v in self.store.memory_conf(app_id).items()
                    if k.startswith("spark.") and v is not None}
        executors: dict[str, ExecutorFacts] = {}

        def executor(executor_id: str) -> ExecutorFacts:
            return executors.setdefault(executor_id, ExecutorFacts(executor_id))

        for executor_id, peaks in self.store.executor_peaks(app_id).items():
            executor(executor_id).peaks = peaks
        span = (started_ms - 60_000, (ended_ms or now_ms) + 60_000)
        for executor_id, value in self.highest(HEAP_MAX, app_id, span).items():
            executor(executor_id).heap_max = value
        for pool in OLD_GEN_POOLS:  # one per collector, by name (see OLD_GEN_POOLS); the run's own has rows
            for executor_id, value in self.highest(pool, app_id, span).items():
                # 0 until a collection of the old generation ran (G1's young collections leave it): unknown.
                executor(executor_id).live_set = value or None
        for measurement, name in TOTALS.items():
            for executor_id, value in self.highest(measurement, app_id, span).items():
                executor(executor_id).totals[name] = value
        for measurement, name in SERIES.items():
            for executor_id, points in self.plotted(measurement, app_id, span).items():
                executor(executor_id).series[name] = points
        for executor_id, facts in self.containers(app_id, span).items():
            executor(executor_id).container = facts
        removals = []
        events = self.store.executor_events(app_id)
        for row in events:
            if row.get("cores") is not None and row.get("executor_id"):
                executor(row["executor_id"]).cores = int(row["cores"])
            if row.get("event") == "removed":
                removals.append(row)
        return RunFacts(app_id=app_id, app_name=head.get("app_name") or apps[0].get("app_name") or app_id,
                        started_ms=started_ms, ending=ending, ended_ms=ended_ms,
                        settings=settings, executors=executors, stages=self.store.stages(app_id),
                        stage_peaks=self.store.stage_peaks(app_id), queries=self.store.queries(app_id),
                        removals=removals, streaming=self.streaming(app_id), executor_events=events,
                        jobs=self.store.job_work(app_id),
                        active_tasks=self.store.active_tasks(app_id, (started_ms, ended_ms or now_ms),
                                                             active_bucket_s(started_ms, ended_ms or now_ms)))
