"""The read layer over a Prometheus-compatible store (the Thanos store,
SPARKSCOPE_METRICS_STORE=thanos, or the user's own, =remote): PromReads
answers the reads of Spark's metrics with PromQL through the store's HTTP
API (/api/v1/query, Basic auth), and hands every read of the annotator's
events to InfluxReads, since the events (strings) stay in InfluxDB
(docs/scale.md, "What reads where").

Each figure means what InfluxReads means by it, sample for sample:
- a highest value over a span is max_over_time over exactly that span;
- a value per bucket is max_over_time over [bucket start, bucket end), the
  buckets from the epoch as InfluxDB's GROUP BY time() makes them, the first
  and the last cut to the span as InfluxDB's time condition cuts them;
- top's newest samples and rates are computed here from the raw samples of
  its short window (a range selector), as InfluxDB's last() and
  non_negative_derivative() compute them.
The stores differ only where they hold different samples (docs/scale.md:
Telegraf's remote-write serializer keeps one sample per series and write).

Every run id and executor id a caller passes is data: it reaches PromQL as a
string literal (string_literal), and inside a regex matcher (=~) it is also
a literal of the regex (regex_literal) first. Metric and label names come
from prometheus.py, which makes them of sparkscope's own names.

Standard library only (the store package is copied whole into the probes'
images).
"""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Optional

from sparkscope.errors import SparkscopeError
from sparkscope.store import http
from sparkscope.store.prometheus import label_name, series_name
from sparkscope.store.reads import DRIVER, MOST_ENTITIES, MOST_RUNS, InfluxReads, Reads, Recent, Run
from sparkscope.store.schema import APPLICATION, EXECUTOR, JVM_HEAP_MEMORY, THREADPOOL_ACTIVE_TASKS

FIELD = "value"  # the field every Spark metric is stored in: its series is <measurement>_value
# A run's metrics are looked for this long before the annotator's start point and after its end
# (a JVM reports before the listener's start is written and as it stops).
MARGIN_MS = 60_000
# How far back a run without the annotator is looked for (its first sample).
SEARCH_BACK_S = 30 * 24 * 3600
# Subqueries that find a sample's time step this far apart: at most Prometheus' lookback (5 min),
# so that every sample is the newest one at some step.
FIND_STEP_S = 60


# --- PromQL text ---------------------------------------------------------------------------

def string_literal(value: str) -> str:
    """value as a PromQL double-quoted string: PromQL unquotes it as Go does
    (strconv.Unquote), which reads JSON's escapes; non-ASCII is kept as it is,
    since Go refuses a lone surrogate half that \\u escapes of it would make."""
    return json.dumps(value, ensure_ascii=False)


_REGEX_META = set("\\.+*?()|[]{}^$")


def regex_literal(value: str) -> str:
    """value matched literally by a Prometheus regex (Go's RE2, anchored at both
    ends): each of RE2's metacharacters backslashed, as Go's regexp.QuoteMeta does."""
    return "".join("\\" + c if c in _REGEX_META else c for c in value)


def matcher(label: str, value: str) -> str:
    return f"{label_name(label)}={string_literal(value)}"


def one_of(label: str, values: list[str]) -> str:
    """A matcher of any of these values, each literally."""
    return f"{label_name(label)}=~{string_literal('|'.join(regex_literal(v) for v in values))}"


def series(measurement: str) -> str:
    return series_name(measurement, FIELD)


def selector(measurements: tuple[str, ...] | str, app_id: str, executors: Optional[list[str]] = None,
             executor: Optional[str] = None) -> str:
    """The series of these metrics of one run (of these executors when given)."""
    names = (measurements,) if isinstance(measurements, str) else tuple(measurements)
    matchers = [matcher(APPLICATION, app_id)]
    if len(names) == 1:
        head = series(names[0])
    else:
        head = ""
        matchers.insert(0, f"__name__=~{string_literal('|'.join(regex_literal(series(n)) for n in names))}")
    if executors is not None:
        matchers.append(one_of(EXECUTOR, executors))
    if executor is not None:
        matchers.append(matcher(EXECUTOR, executor))
    return head + "{" + ", ".join(matchers) + "}"


def duration(ms: int) -> str:
    """A PromQL duration of ms milliseconds (at least 1 ms)."""
    return f"{max(1, int(ms))}ms"


def api_time(ms: int) -> str:
    """A time for the HTTP API: seconds since the epoch, to the millisecond."""
    return f"{int(ms) / 1000:.3f}"


# --- the HTTP API ---------------------------------------------------------------------------

class PromError(SparkscopeError):
    """The Prometheus-compatible store could not be reached or refused a query."""


class PromQuery:
    """Thanos Query's (or any Prometheus-compatible store's) HTTP API: with Basic auth
    when a user is given, trusting ca_file's CA for https when one is given."""

    def __init__(self, url: str, user: str, password: str, timeout_s: float = 10.0, ca_file: str = "",
                 name: str = "Thanos Query", headers: dict[str, str] | None = None):
        self.url = url.rstrip("/")
        self.user = user
        self.password = password
        self.timeout_s = timeout_s
        self.ca_file = ca_file
        self.name = name  # in messages
        self.headers = dict(headers or {})  # sent with every query (a multi-tenant store's tenant)

    def post(self, path: str, params: dict[str, str]) -> Any:
        """The data of an answer; a store that is not reachable or refuses says so as a PromError."""
        request = urllib.request.Request(f"{self.url}{path}", data=urllib.parse.urlencode(params).encode(),
                                         method="POST")
        request.add_header("Content-Type", "application/x-www-form-urlencoded")
        for key, value in self.headers.items():
            request.add_header(key, value)
        if self.user:
            request.add_header("Authorization", http.basic_auth(self.user, self.password))
        context = ssl.create_default_context(cafile=self.ca_file) if self.ca_file else None
        try:
            with http.urlopen(request, timeout=self.timeout_s, context=context) as resp:
                body = json.loads(resp.read())
        except urllib.error.HTTPError as err:
            detail = ""
            try:
                detail = json.loads(err.read()).get("error", "")
            except (ValueError, OSError, AttributeError):
                pass
            hint = "" if err.code not in (401, 403) else (
                " (wrong password? the stack's is in <state>/thanos/password)" if self.name == "Thanos Query"
                else " (check SPARKSCOPE_REMOTE_USER and SPARKSCOPE_REMOTE_PASSWORD)")
            raise PromError(f"{self.name} at {self.url} answered {err.code}{hint}: {detail}".rstrip(": ")) from err
        except OSError as err:
            raise PromError(f"{self.name} not reachable at {self.url} ({err}): is the stack up? "
                                  "./sparkscope status says") from err
        if body.get("status") != "success":
            raise PromError(f"{self.name} at {self.url} refused a query: {body.get('error')}")
        return body["data"]

    def instant(self, promql: str, at_ms: int) -> list[dict[str, Any]]:
        """The result of an instant query at at_ms (a vector, or a matrix of raw samples)."""
        return self.post("/api/v1/query", {"query": promql, "time": api_time(at_ms)})["result"]

    def range(self, promql: str, start_ms: int, end_ms: int, step_s: int) -> list[dict[str, Any]]:
        return self.post("/api/v1/query_range", {"query": promql, "start": api_time(start_ms),
                                                 "end": api_time(end_ms), "step": str(int(step_s))})["result"]


def _by_executor(result: list[dict[str, Any]]) -> dict[str, float]:
    """An instant vector grouped by executor: executor -> value."""
    return {r["metric"].get(label_name(EXECUTOR), ""): float(r["value"][1]) for r in result}


def _now_ms() -> int:
    return int(time.time() * 1000)


def _past_now_ms() -> int:
    """When a subquery that finds a sample's time is evaluated: a step past now. Its steps
    are multiples of FIND_STEP_S from the epoch, so evaluated at now the last one can be up
    to a step before now and miss the newest samples."""
    return _now_ms() + FIND_STEP_S * 1000


class PromReads(Reads):
    """Spark's metrics from a Prometheus-compatible store; the annotator's events
    (and the host's disks and the block I/O probe, which top reads with them)
    from InfluxDB through `events`."""

    def __init__(self, query: PromQuery, events: InfluxReads):
        self.query = query
        self.events = events

    # --- runs: the annotator's, else the metrics' --------------------------------------------

    def runs(self, most: int = MOST_RUNS) -> list[Run]:
        return self.events.runs(most)

    def finished_runs(self, app_name: Optional[str] = None) -> list[Run]:
        return self.events.finished_runs(app_name)

    def job_runs(self, job: str) -> list[Run]:
        return self.events.job_runs(job)

    def annotated_run(self, app_id: str) -> Optional[Run]:
        return self.events.annotated_run(app_id)

    def run(self, app_id: str) -> Optional[Run]:
        found = self.events.annotated_run(app_id)
        if found is not None:
            return found
        first = self._first_sample_ms(app_id)
        return Run(app_id, app_id, first) if first is not None else None

    def _first_sample_ms(self, app_id: str) -> Optional[int]:
        """When the run's first heap sample was taken, exactly: a subquery finds it to
        within FIND_STEP_S (the newest sample at the first step after it), then its
        raw samples of that step say which."""
        near = self.query.instant(f"min(min_over_time(timestamp({selector(JVM_HEAP_MEMORY, app_id)})"
                                  f"[{SEARCH_BACK_S}s:{FIND_STEP_S}s]))", _past_now_ms())
        if not near:
            return None
        at = int(float(near[0]["value"][1]) * 1000)
        raw = self.query.instant(f"{selector(JVM_HEAP_MEMORY, app_id)}[{duration(FIND_STEP_S * 1000 + 1000)}]", at)
        times = [int(float(t) * 1000) for s in raw for t, _ in s["values"]]
        return min(times) if times else at

    def _reach(self, app_id: str) -> Optional[tuple[int, int]]:
        """Where the run's samples can be: from before its start to after its end (now,
        while it runs, or for a run without the annotator)."""
        run = self.run(app_id)
        if run is None:
            return None
        now = _now_ms()
        end = now if run.ended_ms is None else min(now, run.ended_ms + MARGIN_MS)
        return run.started_ms - MARGIN_MS, max(end, run.started_ms)

    # --- Spark's metrics ---------------------------------------------------------------------

    def _highest_in(self, measurement: str, app_id: str, start_ms: int, end_ms: int) -> dict[str, float]:
        """Each executor's highest sample at start_ms..end_ms, both in."""
        if end_ms < start_ms:
            return {}
        return _by_executor(self.query.instant(
            f"max by ({label_name(EXECUTOR)}) (max_over_time({selector(measurement, app_id)}"
            f"[{duration(end_ms - start_ms + 1)}]))", end_ms))

    def run_totals(self, app_id: str, counters: tuple[str, ...]) -> dict[str, float]:
        reach = self._reach(app_id) if counters else None
        if reach is None:
            return {}
        out = {}
        for counter in counters:
            each = self._highest_in(counter, app_id, *reach)
            if each:
                out[counter] = sum(each.values())
        return out

    def executor_maxima(self, measurement: str, app_id: str) -> dict[str, float]:
        reach = self._reach(app_id)
        return {} if reach is None else self._highest_in(measurement, app_id, *reach)

    def highest(self, measurement: str, app_id: str, span: tuple[int, int], long_run_ms: int = 0,
                tail_ms: int = 0) -> dict[str, float]:
        # long_run_ms and tail_ms choose InfluxDB's rollups; the Prometheus store reads raw samples.
        return self._highest_in(measurement, app_id, int(span[0]), int(span[1]))

    def plotted(self, measurement: str, app_id: str, span: tuple[int, int], bucket_s: int, long_run_ms: int = 0,
                tail_ms: int = 0) -> dict[str, list[tuple[int, float]]]:
        return self._bucketed(measurement, app_id, span, bucket_s)

    def active_tasks(self, app_id: str, span: tuple[int, int], bucket_s: int) -> dict[str, list[tuple[int, float]]]:
        return self._bucketed(THREADPOOL_ACTIVE_TASKS, app_id, span, bucket_s)

    def _bucketed(self, measurement: str, app_id: str, span: tuple[int, int],
                  bucket_s: int) -> dict[str, list[tuple[int, float]]]:
        """Each executor's highest value per bucket [b, b + bucket) from the epoch, the
        first and last bucket cut to the span: the inner buckets by one range query
        (each step ends 1 ms before the next bucket, its range the bucket), the two
        ends by an instant query each."""
        start, end = int(span[0]), int(span[1])
        step = max(1, int(bucket_s)) * 1000
        if end < start:
            return {}
        first, last = start // step * step, end // step * step
        out: dict[str, dict[int, float]] = {}

        def put(bucket: int, values: dict[str, float]) -> None:
            for executor_id, value in values.items():
                out.setdefault(executor_id, {})[bucket] = value

        put(first, self._highest_in(measurement, app_id, start, min(end, first + step - 1)))
        if last > first:
            put(last, self._highest_in(measurement, app_id, last, end))
        if last - first >= 2 * step:
            promql = (f"max by ({label_name(EXECUTOR)}) (max_over_time({selector(measurement, app_id)}"
                      f"[{duration(step)}]))")
            for s in self.query.range(promql, first + 2 * step - 1, last - 1, step // 1000):
                executor_id = s["metric"].get(label_name(EXECUTOR), "")
                for t, v in s["values"]:
                    out.setdefault(executor_id, {})[round(float(t) * 1000) + 1 - step] = float(v)
        return {e: sorted(points.items()) for e, points in out.items()}

    def last_report_ms(self, app_id: str, executor_id: str = DRIVER) -> Optional[int]:
        """The newest heap sample's time, exactly: at each of the subquery's steps up to a
        step past now, timestamp() gives the newest sample's time within Prometheus' 5 min
        lookback, so the last step after the newest sample gives that sample's."""
        run = self.run(app_id)
        if run is None:
            return None
        at = _past_now_ms()
        back = max(FIND_STEP_S, (at - run.started_ms + MARGIN_MS) // 1000)
        found = self.query.instant(f"max(max_over_time(timestamp({selector(JVM_HEAP_MEMORY, app_id, executor=executor_id)})"
                                   f"[{int(back)}s:{FIND_STEP_S}s]))", at)
        return int(round(float(found[0]["value"][1]) * 1000)) if found else None

    def reports_since(self, app_id: str, seconds: float) -> bool:
        return bool(self.query.instant(f"count_over_time({selector(JVM_HEAP_MEMORY, app_id)}"
                                       f"[{duration(int(seconds * 1000))}])", _now_ms()))

    # --- one run now (top): raw samples of a short window ----------------------------------------

    def _samples(self, app_id: str, measurements: tuple[str, ...], recent: Recent,
                 executors: Optional[list[str]]) -> dict[tuple[str, str], list[tuple[int, float]]]:
        """Each (executor, measurement)'s raw samples after recent's bound, oldest first."""
        now = _now_ms()
        since = recent.since_ms(now)
        if not measurements or executors == [] or since >= now:
            return {}
        names = {series(m): m for m in measurements}
        out: dict[tuple[str, str], list[tuple[int, float]]] = {}
        for s in self.query.instant(f"{selector(tuple(measurements), app_id, executors)}[{duration(now - since)}]",
                                    now):
            measurement = names.get(s["metric"].get("__name__", ""))
            if measurement is None:
                continue
            points = out.setdefault((s["metric"].get(label_name(EXECUTOR), ""), measurement), [])
            points.extend((int(round(float(t) * 1000)), float(v)) for t, v in s["values"])
        for points in out.values():
            points.sort()
        return out

    def latest(self, app_id: str, measurements: tuple[str, ...], recent: Recent,
               executors: Optional[list[str]] = None) -> dict[tuple[str, str], tuple[int, float]]:
        return {key: points[-1] for key, points in self._samples(app_id, measurements, recent, executors).items()
                if points}

    def rates(self, app_id: str, measurements: tuple[str, ...], recent: Recent,
              executors: Optional[list[str]] = None) -> dict[tuple[str, str], list[tuple[int, float]]]:
        out = {}
        for key, points in self._samples(app_id, measurements, recent, executors).items():
            steps = [(t1, (v1 - v0) * 1000 / (t1 - t0)) for (t0, v0), (t1, v1) in zip(points, points[1:])
                     if t1 > t0 and v1 >= v0]
            if steps:
                out[key] = steps
        return out

    def history(self, app_id: str, measurement: str, recent: Recent, bucket_s: int,
                executors: Optional[list[str]] = None) -> dict[str, list[float]]:
        step = max(1, int(bucket_s)) * 1000
        out: dict[str, dict[int, float]] = {}
        for (executor_id, _), points in self._samples(app_id, (measurement,), recent, executors).items():
            buckets = out.setdefault(executor_id, {})
            for t, v in points:
                b = t // step * step
                buckets[b] = max(buckets.get(b, v), v)
        return {e: [v for _, v in sorted(b.items())] for e, b in out.items()}

    # --- what the annotator wrote, and the host's disks: InfluxDB --------------------------------

    def application_points(self, app_id: str) -> list[dict[str, Any]]:
        return self.events.application_points(app_id)

    def memory_conf(self, app_id: str) -> dict[str, Any]:
        return self.events.memory_conf(app_id)

    def executor_peaks(self, app_id: str) -> dict[str, dict[str, float]]:
        return self.events.executor_peaks(app_id)

    def executor_events(self, app_id: str, event: Optional[str] = None, since_ms: int = 0) -> list[dict[str, Any]]:
        return self.events.executor_events(app_id, event, since_ms)

    def job_work(self, app_id: str, most: int = MOST_ENTITIES) -> list[dict[str, Any]]:
        return self.events.job_work(app_id, most)

    def ended(self, measurement: str, app_id: str, most: int = MOST_ENTITIES) -> list[dict[str, Any]]:
        return self.events.ended(measurement, app_id, most)

    def stages(self, app_id: str) -> list[dict[str, Any]]:
        return self.events.stages(app_id)

    def queries(self, app_id: str) -> list[dict[str, Any]]:
        return self.events.queries(app_id)

    def jobs(self, app_id: str) -> list[dict[str, Any]]:
        return self.events.jobs(app_id)

    def stage_peaks(self, app_id: str, most: int = MOST_ENTITIES) -> list[dict[str, Any]]:
        return self.events.stage_peaks(app_id, most)

    def stage_text(self, app_id: str, stage_id: int, field: str) -> Optional[str]:
        return self.events.stage_text(app_id, stage_id, field)

    def newest_annotations(self, app_id: str, depth: int) -> list[dict[str, Any]]:
        return self.events.newest_annotations(app_id, depth)

    def containers(self, app_id: str, span: tuple[int, int]) -> dict[str, dict[str, Any]]:
        return self.events.containers(app_id, span)

    def containers_now(self, app_id: str, when: str, only: str = "") -> dict[str, dict[str, Any]]:
        return self.events.containers_now(app_id, when, only)

    def streaming(self, app_id: str) -> dict[str, dict[str, Any]]:
        return self.events.streaming(app_id)

    def disk_rates(self, when: str) -> dict[tuple[str, str], dict[str, Any]]:
        return self.events.disk_rates(when)

    def block_latency_periods(self, when: str) -> list[dict[str, Any]]:
        return self.events.block_latency_periods(when)

    def block_outliers(self, after_ms: int, until_ms: int, most: int = 200) -> list[dict[str, Any]]:
        return self.events.block_outliers(after_ms, until_ms, most)
