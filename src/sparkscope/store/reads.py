"""The read layer: what the commands ask of the store, as typed functions over
the schema. `top`, `report`, `demo`, `profile` and what comes after them
(comparison with earlier runs, capacity) read through a Reads, never with
InfluxQL of their own: "which runs exist", a run's executors, its exact peaks,
its annotations, its containers and streaming queries have one definition
each, here.

Reads is the contract; InfluxReads answers it from InfluxDB 1.x with
InfluxQL. A second store (a Prometheus-compatible one) implements the same
methods with its own query language. Every run id, name or field value a
caller passes is data: it reaches InfluxQL through influx.string_literal or
influx.identifier only.

Standard library only (the store package is copied whole into the probes'
images).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

from sparkscope.errors import SparkscopeError
from sparkscope.store import influx
from sparkscope.store.schema import (
    ANNOTATION_MEASUREMENTS, APPLICATION, BLOCK_LATENCY_HIST, BLOCK_OUTLIER, DISKIO_MEASUREMENT, APPLICATION_MEASUREMENT, CONTAINER_MEASUREMENT, EXECUTOR,
    EXECUTOR_MEASUREMENT, EXECUTOR_PEAKS_MEASUREMENT, JOB_KEY, JOB_MEASUREMENT, JVM_HEAP_MEMORY,
    MEMORY_CONF_MEASUREMENT, QUERY_MEASUREMENT,
    ROLLED_MEASUREMENTS, STAGE_MEASUREMENT, STAGE_PEAKS_MEASUREMENT, STATUS, STREAMING_MEASUREMENT,
    STREAMING_QUERY_MEASUREMENT, THREADPOOL_ACTIVE_TASKS, CONNECT_OPERATION, CONNECT_SESSION, CONNECT_USER,
)

RUNNING = "RUNNING"  # the annotator's status while an entity runs; its end carries another
FINISHED = "FINISHED"
DRIVER = "driver"  # the executorid of the driver's own metrics
MOST_RUNS = 40
# Bounds on what one read returns, however long a run or the retention: a
# streaming application that runs for a month writes millions of stage points,
# and a store anyone on the events port can write to holds as many runs as
# they send. The newest are read; a caller that got exactly the bound says so.
MOST_FINISHED_RUNS = 1_000
MOST_ENTITIES = 20_000


@dataclass
class Run:
    """One Spark application the annotator saw start."""
    app_id: str
    name: str
    started_ms: int
    ended_ms: Optional[int] = None  # None while it runs (no end point)
    # FINISHED, FAILED ... from the annotator, or NO_END_SEEN from Telegraf when
    # the driver went silent without an end (telegraf.conf, "No end seen").
    ending: str = ""
    duration_ms: Optional[int] = None
    # The recurring job it is one of (spark.sparkscope.job, else the application
    # name; the name too for runs stored before the annotator wrote the job).
    job: str = ""

    @property
    def running(self) -> bool:
        return self.ended_ms is None


@dataclass(frozen=True)
class Rollup:
    """Where samples older than a long run's tail are read from instead of raw."""
    policy: str
    bucket_ms: int


@dataclass(frozen=True)
class Recent:
    """The last `seconds` before now (a run that runs), or before a run's end
    (ended_ms) with no upper bound: each JVM's last reports leave it as it stops."""
    seconds: float
    ended_ms: Optional[int] = None

    def since_ms(self, now_ms: int) -> int:
        """The exclusive lower bound, in ms."""
        return (now_ms if self.ended_ms is None else self.ended_ms) - int(self.seconds * 1000)


def is_app(app_id: str) -> str:
    """The InfluxQL condition of one run's points."""
    return f"{influx.identifier(APPLICATION)} = {influx.string_literal(app_id)}"


def _int(value: Any) -> Optional[int]:
    return None if value is None else int(value)


def _job(row: dict[str, Any]) -> str:
    """A run's job from its sparkscope_application point: the job, else its name, else its id."""
    return row.get(JOB_KEY) or row.get("app_name") or row.get(APPLICATION) or ""


class Reads:
    """What a store answers. Each method's docstring is its contract; InfluxReads
    is the reference implementation."""

    # --- runs ------------------------------------------------------------------------------

    def runs(self, most: int = MOST_RUNS) -> list[Run]:
        """The newest runs the annotator saw start, newest first, with their end if seen."""
        raise NotImplementedError

    def run(self, app_id: str) -> Optional[Run]:
        """One run by id: from the annotator's points, else from its metrics alone
        (a run without the annotator); None when the store has neither."""
        raise NotImplementedError

    def finished_runs(self, app_name: Optional[str] = None) -> list[Run]:
        """Runs that ended FINISHED, newest first; of one application name if given."""
        raise NotImplementedError

    def job_runs(self, job: str) -> list[Run]:
        """Runs of one recurring job (Run.job) that ended FINISHED, newest first."""
        raise NotImplementedError

    def run_totals(self, app_id: str, counters: tuple[str, ...]) -> dict[str, float]:
        """Each of Spark's counters (measurement names) over the whole run, summed over
        the run's JVMs (each JVM's highest value: a counter only grows); a counter
        the run never reported is left out."""
        raise NotImplementedError

    # --- what the annotator wrote about a run -------------------------------------------------

    def executor_peaks(self, app_id: str) -> dict[str, dict[str, float]]:
        """Each executor's exact peaks over the run (Spark's ExecutorMetricType names)."""
        raise NotImplementedError

    def queries(self, app_id: str) -> list[dict[str, Any]]:
        """The end points of the run's SQL queries (sparkscope_query's fields)."""
        raise NotImplementedError

    def jobs(self, app_id: str) -> list[dict[str, Any]]:
        """The end points of the run's jobs (sparkscope_job's fields)."""
        raise NotImplementedError

    def stages(self, app_id: str) -> list[dict[str, Any]]:
        """The end points of the run's stage attempts (sparkscope_stage's fields)."""
        raise NotImplementedError

    def stage_peaks(self, app_id: str) -> list[dict[str, Any]]:
        """Each stage attempt's exact peaks over its executors (sparkscope_stage_peaks)."""
        raise NotImplementedError

    def last_report_ms(self, app_id: str, executor_id: str = DRIVER) -> Optional[int]:
        """When a JVM of the run last reported its metrics (None: never)."""
        raise NotImplementedError

    def reports_since(self, app_id: str, seconds: float) -> bool:
        """Whether the run's JVMs reported metrics in the last `seconds`."""
        raise NotImplementedError

    # --- capacity ----------------------------------------------------------------------------

    def executor_events(self, app_id: str, event: Optional[str] = None, since_ms: int = 0) -> list[dict[str, Any]]:
        """Executors added and removed (time ms, event, executor_id, host, cores, reason), oldest first."""
        raise NotImplementedError

    def job_work(self, app_id: str, most: int = MOST_ENTITIES) -> list[dict[str, Any]]:
        """The run's ended jobs, oldest first, the newest `most`: time (start ms),
        job_id, end_time_ms, task_ms (its tasks' run + deserialize time), task_count,
        description, and on a Spark Connect server connect_user, connect_session and
        connect_operation (absent for a job no Connect operation ran)."""
        raise NotImplementedError

    def active_tasks(self, app_id: str, span: tuple[int, int], bucket_s: int) -> dict[str, list[tuple[int, float]]]:
        """Each JVM's running tasks (threadpool.activeTasks) over the span: per bucket of
        bucket_s seconds its highest sample, so that a bucket with any task running reads
        above 0; (bucket start ms, tasks), oldest first."""
        raise NotImplementedError

    # --- Spark's metrics over a run ----------------------------------------------------------

    def highest(self, measurement: str, app_id: str, span: tuple[int, int], long_run_ms: int,
                tail_ms: int) -> dict[str, float]:
        """Each executor's highest value of a metric over the span (ms, both ends in)."""
        raise NotImplementedError

    def plotted(self, measurement: str, app_id: str, span: tuple[int, int], bucket_s: int, long_run_ms: int,
                tail_ms: int) -> dict[str, list[tuple[int, float]]]:
        """Each executor's highest value per bucket of bucket_s seconds (buckets from the
        epoch, the first and last cut to the span): (bucket start ms, value), oldest first."""
        raise NotImplementedError

    def executor_maxima(self, measurement: str, app_id: str) -> dict[str, float]:
        """Each executor's highest raw sample of a metric over the whole run."""
        raise NotImplementedError

    # --- one run now (top) -------------------------------------------------------------------

    def latest(self, app_id: str, measurements: tuple[str, ...], recent: Recent,
               executors: Optional[list[str]] = None) -> dict[tuple[str, str], tuple[int, float]]:
        """Each JVM's newest sample of each metric within `recent` (of these executors
        only, when given): (executor, measurement) -> (time ms, value)."""
        raise NotImplementedError

    def rates(self, app_id: str, measurements: tuple[str, ...], recent: Recent,
              executors: Optional[list[str]] = None) -> dict[tuple[str, str], list[tuple[int, float]]]:
        """Each counter's rate per second from one sample to the next within `recent`
        (a fall, a restarted counter, is left out): (executor, measurement) -> (time ms,
        rate), oldest first."""
        raise NotImplementedError

    def history(self, app_id: str, measurement: str, recent: Recent, bucket_s: int,
                executors: Optional[list[str]] = None) -> dict[str, list[float]]:
        """Each JVM's highest value per bucket of bucket_s seconds within `recent`, oldest
        first; a bucket without samples is left out."""
        raise NotImplementedError


def executors_regex(ids: list[str]) -> str:
    """The InfluxQL condition that keeps these executors' series. A regex of the ids,
    not a chain of ORs, which InfluxDB 1.8 evaluates at a cost growing with their
    square (50 executors: 40 ms against 10)."""
    return f' AND {influx.identifier(EXECUTOR)} =~ /^(?:' + "|".join(regex_literal(i) for i in ids) + ")$/"


def regex_literal(value: str) -> str:
    """value matched literally inside an InfluxQL /regex/ (Go's RE2): ASCII punctuation
    backslashed, the regex's own delimiter included."""
    return re.sub(r"([!-/:-@\[-`{-~])", r"\\\1", value)


class InfluxReads(Reads):
    """Reads from InfluxDB 1.x, as the read-only user."""

    def __init__(self, where: influx.Where, database: str, timeout_s: float = 10.0,
                 rollup: Optional[Rollup] = None):
        self.where = where
        self.database = database
        self.timeout_s = timeout_s
        self.rollup = rollup

    def q(self, statement: str) -> list[dict[str, Any]]:
        try:
            return influx.query(self.where, statement, self.database, timeout=self.timeout_s)
        except OSError as err:
            raise SparkscopeError(f"InfluxDB not reachable at {self.where} ({err}): is the stack up? "
                                  "./sparkscope status says") from err

    def rows(self, statement: str) -> list[dict[str, Any]]:
        return influx.rows(self.q(statement))

    # --- runs ------------------------------------------------------------------------------

    def runs(self, most: int = MOST_RUNS) -> list[Run]:
        # Each run wrote a RUNNING point at its start, and its end (FINISHED, FAILED, or
        # Telegraf's NO_END_SEEN) stamped with the same start.
        app, status = influx.identifier(APPLICATION), f"{influx.identifier(STATUS)}::tag"
        source = influx.identifier(APPLICATION_MEASUREMENT)
        started = self.rows(f'SELECT "app_name", "{JOB_KEY}", {app} FROM {source} WHERE {status} = {influx.string_literal(RUNNING)} '
                            f"ORDER BY time DESC LIMIT {int(most)}")
        if not started:
            return []
        oldest = min(r["time"] for r in started)
        ended = {r[APPLICATION]: r for r in self.rows(
            f'SELECT "end_time_ms", "duration_ms", {app}, {status} FROM {source} '
            f"WHERE {status} <> {influx.string_literal(RUNNING)} AND time >= {int(oldest)}ms")}
        out = []
        for r in started:
            end = ended.get(r[APPLICATION])
            out.append(Run(r[APPLICATION], r.get("app_name") or r[APPLICATION], int(r["time"]),
                           _int(end.get("end_time_ms")) if end else None,
                           str(end.get(STATUS) or "") if end else "",
                           _int(end.get("duration_ms")) if end else None, _job(r)))
        return out

    def run(self, app_id: str) -> Optional[Run]:
        found = self.annotated_run(app_id)
        if found is not None:
            return found
        first = self.rows(f'SELECT first("value") FROM {influx.identifier(JVM_HEAP_MEMORY)} WHERE {is_app(app_id)}')
        return Run(app_id, app_id, int(first[0]["time"])) if first else None

    def annotated_run(self, app_id: str) -> Optional[Run]:
        """One run by id from the annotator's points alone (None without them)."""
        rows = self.rows(f'SELECT "app_name", "{JOB_KEY}", "end_time_ms", "duration_ms", '
                         f"{influx.identifier(STATUS)}::tag "
                         f"FROM {influx.identifier(APPLICATION_MEASUREMENT)} WHERE {is_app(app_id)}")
        if not rows:
            return None
        ends = [r for r in rows if r.get(STATUS) not in (None, RUNNING)]
        head = ends[0] if ends else rows[0]
        return Run(app_id, head.get("app_name") or rows[0].get("app_name") or app_id, int(rows[0]["time"]),
                   _int(head.get("end_time_ms")) if ends else None,
                   str(head.get(STATUS) or "") if ends else "",
                   _int(head.get("duration_ms")) if ends else None, _job(head) if head.get(JOB_KEY) else _job(rows[0]))

    def finished_runs(self, app_name: Optional[str] = None) -> list[Run]:
        where = f' AND "app_name" = {influx.string_literal(app_name)}' if app_name else ""
        return self._finished(where)

    def job_runs(self, job: str) -> list[Run]:
        # Runs stored before the annotator wrote the job have their name instead; a
        # run whose name is the job's but whose job is another belongs to that other.
        literal = influx.string_literal(job)
        return [r for r in self._finished(f' AND ("{JOB_KEY}" = {literal} OR "app_name" = {literal})')
                if r.job == job]

    def _finished(self, where: str) -> list[Run]:
        rows = self.rows(f'SELECT "app_name", "{JOB_KEY}", "end_time_ms", "duration_ms", '
                         f"{influx.identifier(APPLICATION)} "
                         f"FROM {influx.identifier(APPLICATION_MEASUREMENT)} WHERE "
                         f"{influx.identifier(STATUS)}::tag = {influx.string_literal(FINISHED)}{where} "
                         f"ORDER BY time DESC LIMIT {MOST_FINISHED_RUNS}")
        newest = {}  # one run per id, should its end have been written twice
        for r in sorted(rows, key=lambda r: r["time"], reverse=True):
            newest.setdefault(r[APPLICATION], r)
        return [Run(r[APPLICATION], r.get("app_name") or r[APPLICATION], int(r["time"]), _int(r.get("end_time_ms")),
                    FINISHED, _int(r.get("duration_ms")), _job(r)) for r in newest.values()]

    def run_totals(self, app_id: str, counters: tuple[str, ...]) -> dict[str, float]:
        if not counters:
            return {}
        out: dict[str, float] = {}
        # Named one by one in one FROM, never a measurement regex (see schema.OLD_GEN_POOLS).
        for row in self.rows(f'SELECT max("value") FROM {",".join(influx.identifier(c) for c in counters)} '
                             f"WHERE {is_app(app_id)} GROUP BY {influx.identifier(EXECUTOR)}"):
            if row.get("max") is not None:
                out[row["_measurement"]] = out.get(row["_measurement"], 0.0) + float(row["max"])
        return out

    def last_report_ms(self, app_id: str, executor_id: str = DRIVER) -> Optional[int]:
        last = self.rows(f'SELECT last("value") FROM {influx.identifier(JVM_HEAP_MEMORY)} WHERE {is_app(app_id)} '
                         f"AND {influx.identifier(EXECUTOR)} = {influx.string_literal(executor_id)}")
        return int(last[0]["time"]) if last else None

    def reports_since(self, app_id: str, seconds: float) -> bool:
        return bool(self.q(f'SELECT last("value") FROM {influx.identifier(JVM_HEAP_MEMORY)} WHERE {is_app(app_id)} '
                           f"AND time > now() - {int(seconds * 1000)}ms"))

    # --- capacity ----------------------------------------------------------------------------

    def active_tasks(self, app_id: str, span: tuple[int, int], bucket_s: int) -> dict[str, list[tuple[int, float]]]:
        out: dict[str, list[tuple[int, float]]] = {}
        for s in self.q(f'SELECT max("value") FROM {influx.identifier(THREADPOOL_ACTIVE_TASKS)} '
                        f"WHERE {is_app(app_id)} AND time >= {int(span[0])}ms AND time <= {int(span[1])}ms "
                        f"GROUP BY time({int(bucket_s)}s), {influx.identifier(EXECUTOR)} fill(none)"):
            executor_id = (s.get("tags") or {}).get(EXECUTOR)
            if executor_id:
                out[executor_id] = [(int(t), float(v)) for t, v in s.get("values") or [] if v is not None]
        return out

    def job_work(self, app_id: str, most: int = MOST_ENTITIES) -> list[dict[str, Any]]:
        rows = self.rows('SELECT "job_id", "end_time_ms", "task_ms", "task_count", "description", '
                         f"{influx.identifier(CONNECT_USER)}::tag, {influx.identifier(CONNECT_SESSION)}, "
                         f"{influx.identifier(CONNECT_OPERATION)} "
                         f"FROM {influx.identifier(JOB_MEASUREMENT)} WHERE {is_app(app_id)} "
                         f"AND {influx.identifier(STATUS)}::tag <> {influx.string_literal(RUNNING)} "
                         f"ORDER BY time DESC LIMIT {int(most)}")
        return sorted(rows, key=lambda r: r["time"])

    # --- what the annotator wrote about a run -------------------------------------------------

    def application_points(self, app_id: str) -> list[dict[str, Any]]:
        """Every point of the run in sparkscope_application: its start, and its end if seen."""
        return self.rows(f"SELECT * FROM {influx.identifier(APPLICATION_MEASUREMENT)} WHERE {is_app(app_id)}")

    def memory_conf(self, app_id: str) -> dict[str, Any]:
        """The run's memory settings as given (spark.* keys); empty until written."""
        rows = self.rows(f"SELECT * FROM {influx.identifier(MEMORY_CONF_MEASUREMENT)} WHERE {is_app(app_id)} LIMIT 1")
        return rows[0] if rows else {}

    def executor_peaks(self, app_id: str) -> dict[str, dict[str, float]]:
        """Each executor's exact peaks over the run (Spark's ExecutorMetricType names)."""
        return {row["executor_id"]: {k: v for k, v in row.items() if k[:1].isupper() and v is not None}
                for row in self.rows(f"SELECT * FROM {influx.identifier(EXECUTOR_PEAKS_MEASUREMENT)} "
                                     f"WHERE {is_app(app_id)}") if row.get("executor_id")}

    def executor_events(self, app_id: str, event: Optional[str] = None, since_ms: int = 0) -> list[dict[str, Any]]:
        """Executors added and removed (event, executor_id, host, cores, reason), oldest first."""
        only = f' AND "event" = {influx.string_literal(event)}' if event else ""
        since = f" AND time >= {int(since_ms)}ms" if since_ms else ""
        return self.rows(f"SELECT * FROM {influx.identifier(EXECUTOR_MEASUREMENT)} WHERE {is_app(app_id)}{only}{since}")

    def ended(self, measurement: str, app_id: str, most: int = MOST_ENTITIES) -> list[dict[str, Any]]:
        """The end points of the run's queries, jobs or stages (their status is not
        RUNNING), oldest first: the newest `most` of them."""
        if measurement not in ANNOTATION_MEASUREMENTS:
            raise ValueError(f"{measurement} is not an annotation measurement")
        rows = self.rows(f"SELECT * FROM {influx.identifier(measurement)} WHERE {is_app(app_id)} "
                         f"AND {influx.identifier(STATUS)}::tag <> {influx.string_literal(RUNNING)} "
                         f"ORDER BY time DESC LIMIT {int(most)}")
        return sorted(rows, key=lambda r: r["time"])

    def stages(self, app_id: str) -> list[dict[str, Any]]:
        return self.ended(STAGE_MEASUREMENT, app_id)

    def queries(self, app_id: str) -> list[dict[str, Any]]:
        return self.ended(QUERY_MEASUREMENT, app_id)

    def jobs(self, app_id: str) -> list[dict[str, Any]]:
        return self.ended(JOB_MEASUREMENT, app_id)

    def stage_peaks(self, app_id: str, most: int = MOST_ENTITIES) -> list[dict[str, Any]]:
        rows = self.rows(f"SELECT * FROM {influx.identifier(STAGE_PEAKS_MEASUREMENT)} WHERE {is_app(app_id)} "
                         f"ORDER BY time DESC LIMIT {int(most)}")
        return sorted(rows, key=lambda r: r["time"])

    def stage_text(self, app_id: str, stage_id: int, field: str) -> Optional[str]:
        """The last value of a text field of one stage (job_description, text)."""
        found = self.q(f"SELECT last({influx.identifier(field)}) FROM {influx.identifier(STAGE_MEASUREMENT)} "
                       f'WHERE {is_app(app_id)} AND "stage_id" = {int(stage_id)}')
        return found[0]["values"][0][1] if found and found[0].get("values") else None

    def newest_annotations(self, app_id: str, depth: int) -> list[dict[str, Any]]:
        """The newest `depth` points of each annotator series of the run (a series is a
        measurement and its tags, e.g. the stages that SUCCEEDED), in one query."""
        sources = ",".join(influx.identifier(m) for m in ANNOTATION_MEASUREMENTS)
        return self.rows(f"SELECT * FROM {sources} WHERE {is_app(app_id)} "
                         f"GROUP BY * ORDER BY time DESC LIMIT {int(depth)}")

    # --- Spark's metrics over a run --------------------------------------------------------

    def _parts(self, measurement: str, span: tuple[int, int], long_run_ms: int, tail_ms: int) -> list[tuple[str, str]]:
        """(FROM, time condition) pairs covering span: raw alone for a short run; for a
        long one the rollup, then raw samples for its last tail_ms."""
        start, end = span
        name = influx.identifier(measurement)
        if self.rollup is None or end - start <= long_run_ms or measurement not in ROLLED_MEASUREMENTS:
            return [(name, f"time >= {int(start)}ms AND time <= {int(end)}ms")]
        cut = (end - tail_ms) // self.rollup.bucket_ms * self.rollup.bucket_ms
        return [(f"{influx.identifier(self.rollup.policy)}.{name}", f"time >= {int(start)}ms AND time < {int(cut)}ms"),
                (name, f"time >= {int(cut)}ms AND time <= {int(end)}ms")]

    def highest(self, measurement: str, app_id: str, span: tuple[int, int], long_run_ms: int,
                tail_ms: int) -> dict[str, float]:
        """Each executor's highest value of a metric over the span."""
        out: dict[str, float] = {}
        for source, when in self._parts(measurement, span, long_run_ms, tail_ms):
            for row in self.rows(f'SELECT max("value") FROM {source} WHERE {is_app(app_id)} AND {when} '
                                 f"GROUP BY {influx.identifier(EXECUTOR)}"):
                if row["max"] is not None:
                    out[row[EXECUTOR]] = max(out.get(row[EXECUTOR], row["max"]), row["max"])
        return out

    def plotted(self, measurement: str, app_id: str, span: tuple[int, int], bucket_s: int, long_run_ms: int,
                tail_ms: int) -> dict[str, list[tuple[int, float]]]:
        """Each executor's highest value per bucket of bucket_s seconds."""
        out: dict[str, dict[int, float]] = {}
        for source, when in self._parts(measurement, span, long_run_ms, tail_ms):
            for s in self.q(f'SELECT max("value") FROM {source} WHERE {is_app(app_id)} AND {when} '
                            f"GROUP BY time({int(bucket_s)}s), {influx.identifier(EXECUTOR)} fill(none)"):
                points = out.setdefault(s["tags"][EXECUTOR], {})
                for t, v in s["values"]:
                    points[t] = max(points.get(t, v), v)
        return {e: sorted(points.items()) for e, points in out.items()}

    def executor_maxima(self, measurement: str, app_id: str) -> dict[str, float]:
        """Each executor's highest raw sample of a metric over the whole run."""
        return {s["tags"][EXECUTOR]: s["values"][0][1]
                for s in self.q(f'SELECT max("value") FROM {influx.identifier(measurement)} WHERE {is_app(app_id)} '
                                f"GROUP BY {influx.identifier(EXECUTOR)}")}

    # --- containers and streaming ----------------------------------------------------------

    def containers(self, app_id: str, span: tuple[int, int]) -> dict[str, dict[str, Any]]:
        """Per executor, its container over the span, as aggregates (one row per executor
        however long the run): ws, usage, anon (highest), lim (lowest limit),
        kills_hi/kills_lo (the OOM-kill counter's ends), version, ws_last."""
        where = f"{is_app(app_id)} AND time >= {int(span[0])}ms AND time <= {int(span[1])}ms"
        out = {}
        for s in self.q('SELECT max("working_set_bytes") AS ws, max("usage_bytes") AS usage, '
                        'max("anon_bytes") AS anon, min("limit_bytes") AS lim, max("oom_kills") AS kills_hi, '
                        'min("oom_kills") AS kills_lo, last("cgroup_version") AS version, '
                        'last("working_set_bytes") AS ws_last '
                        f"FROM {influx.identifier(CONTAINER_MEASUREMENT)} WHERE {where} "
                        f"GROUP BY {influx.identifier(EXECUTOR)}"):
            executor_id = (s.get("tags") or {}).get(EXECUTOR)
            if executor_id and s.get("values"):
                out[executor_id] = dict(zip(s["columns"], s["values"][0]))
        return out

    def containers_now(self, app_id: str, when: str, only: str = "") -> dict[str, dict[str, Any]]:
        """Each JVM's container as it last read it within `when` (a time condition):
        ws (working set) and lim (limit)."""
        return {row[EXECUTOR]: row for row in self.rows(
            'SELECT last("working_set_bytes") AS "ws", last("limit_bytes") AS "lim" '
            f"FROM {influx.identifier(CONTAINER_MEASUREMENT)} WHERE {is_app(app_id)} AND {when}{only} "
            f"GROUP BY {influx.identifier(EXECUTOR)}")}

    def _per_streaming_query(self, statement: str) -> dict[str, dict]:
        return {row["query_name"]: row for row in self.rows(statement) if row.get("query_name")}

    def streaming(self, app_id: str) -> dict[str, dict[str, Any]]:
        """Each streaming query of the run by name, aggregates of its batches: n,
        slowest, trig, lag0, lag1, state, backlog over all batches; median and lag
        (the second batch's) from the second on, as the first also plans the query;
        p75 of the lag's batch-to-batch steps; and, once it ended, its end point's
        status, slowest_batch_id, slowest_batch_why, exception."""
        source, app = influx.identifier(STREAMING_MEASUREMENT), is_app(app_id)
        whole = self._per_streaming_query(
            'SELECT count("batch_id") AS n, max("batch_ms") AS slowest, last("trigger_ms") AS trig, '
            'first("event_time_lag_ms") AS lag0, last("event_time_lag_ms") AS lag1, max("state_rows") AS state, '
            f'max("backlog") AS backlog FROM {source} WHERE {app} GROUP BY "query_name"')
        settled = self._per_streaming_query(
            'SELECT median("batch_ms") AS median, first("event_time_lag_ms") AS lag '
            f'FROM {source} WHERE {app} AND "batch_id" > 0 GROUP BY "query_name"')
        steps = self._per_streaming_query(
            'SELECT percentile("step", 75) AS p75 FROM (SELECT difference("event_time_lag_ms") '
            f'AS "step" FROM {source} WHERE {app} AND "batch_id" > 0 GROUP BY "query_name") GROUP BY "query_name"')
        out = {name: {**row, "median": settled.get(name, {}).get("median"), "lag": settled.get(name, {}).get("lag"),
                      "p75": steps.get(name, {}).get("p75")}
               for name, row in whole.items()}
        for row in self.rows(
                f"SELECT * FROM {influx.identifier(STREAMING_QUERY_MEASUREMENT)} WHERE {app} "
                f"AND {influx.identifier(STATUS)}::tag <> {influx.string_literal(RUNNING)}"):
            name = row.get("name") or row.get("query_id") or ""
            if name in out:
                out[name]["end"] = row
        return out

    # --- one run now (top) -------------------------------------------------------------------

    @staticmethod
    def _recent(recent: Recent) -> str:
        if recent.ended_ms is None:
            return f"time > now() - {int(recent.seconds * 1000)}ms"
        return f"time > {recent.ended_ms - int(recent.seconds * 1000)}ms"

    @staticmethod
    def _sources(measurements) -> str:
        return ",".join(influx.identifier(m) for m in sorted(measurements))

    def latest(self, app_id: str, measurements: tuple[str, ...], recent: Recent,
               executors: Optional[list[str]] = None) -> dict[tuple[str, str], tuple[int, float]]:
        if not measurements or executors == []:
            return {}
        only = "" if executors is None else executors_regex(executors)
        return {(row[EXECUTOR], row["_measurement"]): (int(row["time"]), row["last"]) for row in self.rows(
            f'SELECT last("value") FROM {self._sources(measurements)} WHERE {is_app(app_id)} AND '
            f"{self._recent(recent)}{only} GROUP BY {influx.identifier(EXECUTOR)}") if row.get("last") is not None}

    def rates(self, app_id: str, measurements: tuple[str, ...], recent: Recent,
              executors: Optional[list[str]] = None) -> dict[tuple[str, str], list[tuple[int, float]]]:
        if not measurements or executors == []:
            return {}
        only = "" if executors is None else executors_regex(executors)
        out: dict[tuple[str, str], list[tuple[int, float]]] = {}
        for row in self.rows(f'SELECT non_negative_derivative("value", 1s) AS "r" FROM {self._sources(measurements)} '
                             f"WHERE {is_app(app_id)} AND {self._recent(recent)}{only} "
                             f"GROUP BY {influx.identifier(EXECUTOR)}"):
            out.setdefault((row[EXECUTOR], row["_measurement"]), []).append((int(row["time"]), row["r"]))
        return out

    def history(self, app_id: str, measurement: str, recent: Recent, bucket_s: int,
                executors: Optional[list[str]] = None) -> dict[str, list[float]]:
        if executors == []:
            return {}
        only = "" if executors is None else executors_regex(executors)
        return {s["tags"][EXECUTOR]: [v for _, v in s["values"]]
                for s in self.q(f'SELECT max("value") FROM {influx.identifier(measurement)} WHERE {is_app(app_id)} '
                                f"AND {self._recent(recent)}{only} GROUP BY time({int(bucket_s)}s), "
                                f"{influx.identifier(EXECUTOR)} fill(none)")}

    # --- the host below the JVMs -------------------------------------------------------------

    DISK_FIELDS = ("reads", "writes", "read_bytes", "write_bytes", "io_time", "read_time", "write_time")

    def disk_rates(self, when: str) -> dict[tuple[str, str], dict[str, Any]]:
        """Each host's disk (host, device) at its newest Telegraf interval within `when`
        (a time condition): /proc/diskstats counters as rates per second."""
        select = ", ".join(f'non_negative_derivative("{f}", 1s) AS "{f}"' for f in self.DISK_FIELDS)
        latest: dict[tuple[str, str], dict[str, Any]] = {}
        for row in self.rows(f"SELECT {select} FROM {influx.identifier(DISKIO_MEASUREMENT)} WHERE {when} "
                             'GROUP BY "host", "name"'):
            latest[(row.get("host", ""), row["name"])] = row  # rows come oldest first: the last stays
        return latest

    def block_latency_periods(self, when: str) -> list[dict[str, Any]]:
        """The block I/O probe's histogram buckets of its last two periods within `when`
        (the newest period, and the one before it gives the probe's period)."""
        return self.rows(f'SELECT "count" FROM {influx.identifier(BLOCK_LATENCY_HIST)} WHERE {when} '
                         'GROUP BY "host", "device", "direction", "le_us" ORDER BY time DESC LIMIT 2')

    def block_outliers(self, after_ms: int, until_ms: int, most: int = 200) -> list[dict[str, Any]]:
        """The probe's slow I/Os written one by one, newest first."""
        return self.rows('SELECT "device", "direction", "latency_ms", "bytes", "pid", "comm" '
                         f"FROM {influx.identifier(BLOCK_OUTLIER)} WHERE time > {int(after_ms)}ms "
                         f"AND time <= {int(until_ms)}ms ORDER BY time DESC LIMIT {int(most)}")
