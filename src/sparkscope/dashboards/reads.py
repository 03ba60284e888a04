"""What a panel reads, declared once and rendered for either metrics store.

A panel's line or number is declared as what it means: one stored series
(a measurement's value), whether it is a gauge or a counter (from the
schema: queries.is_counter, never by hand), per executor or over the
application, and how it is read:

- ExecutorGauge: a line per executor, each interval's mean or highest;
- ExecutorRate: a line per executor, a counter's increase per second or minute;
- Recent: executors reporting at the end of the range, counted or added up;
- Total: a counter's total over the run (each executor's highest, added up);
- Highest: the highest value of the run's series (a driver's count so far);
- Peak: a gauge's highest sample of the executors, or of the driver;
- Share: one Total over another (GC over run time);
- SummedRate: a counter's rate summed over the picked executors;
- DiskAwait: ms per completed I/O of a device (two diskio counters' increases);
- ExecutorsReporting: how many JVMs sent a series of the run;
- ExecutorPeak: a table column, each executor's highest value.

A read may need more queries in one dialect than in the other (Share: two
hidden totals and a math expression in InfluxQL, one ratio in PromQL):
rendered() gives each dialect's list.

The same declaration renders to

- InfluxQL for the InfluxDB dashboards: through queries.py's functions, so
  their text is what it always was (generate --check);
- PromQL for the Prometheus-datasource dashboards (the Thanos store): names
  from store/prometheus.py; a gauge read with <agg>_over_time over
  $__interval, a counter with rate() over $__rate_interval (Grafana's
  window that always holds two samples) or, for a total, its highest value
  over $__range; a stat as an instant query at the end of the range; the
  application and executor pickers as label matchers (APP_MATCHER,
  EXECUTOR_MATCHER below).

A counter is never averaged and a gauge never rated in either dialect: the
kind comes from the schema, and a declaration refuses the other kind
(ExecutorGauge and Peak a counter; ExecutorRate and Total a gauge).
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

from sparkscope.dashboards import queries
from sparkscope.store.prometheus import label_name, series_name
from sparkscope.store.schema import APPLICATION, DISKIO_MEASUREMENT as DISKIO, EXECUTOR, JVM_HEAP_MEMORY

INFLUXQL, PROMQL = "influxql", "promql"
PROMETHEUS_DATASOURCE = {"type": "prometheus", "uid": "sparkscope-thanos"}

APP_LABEL, EXECUTOR_LABEL = label_name(APPLICATION), label_name(EXECUTOR)
# The pickers in PromQL label matchers, each in the form Grafana's Prometheus
# datasource escapes correctly for it (its interpolateQueryExpr, modelled in
# sparkscope_testkit/prometheus12.py):
# - $applicationid picks one run (not multi, no All): Grafana escapes it for a
#   string literal only (backslashes doubled), so it is matched with "=", a
#   string, never "=~": a run id holding a regex character (spark.app.id and
#   spark.metrics.namespace are free text) must match itself and nothing else.
# - $executorid is multi-value with All: Grafana escapes each value for a
#   regex inside a string literal (\\. for a dot) and joins them (a|b); All
#   is its custom value .*. So "=~".
# Not ${applicationid:regex}: that format is @grafana/data's escapeRegex, one
# backslash (\.), which a PromQL string rejects as an unknown escape, and
# which leaves a double quote as it is (the value ends the string).
APP_MATCHER = f'{APP_LABEL}="$applicationid"'
EXECUTOR_MATCHER = f'{EXECUTOR_LABEL}=~"$executorid"'
# Which option values the pickers offer (their Grafana "regex" filter): none
# holding a double quote, a single quote or a line break. Grafana 12's two
# escapings (classic, and with the prometheusSpecialCharsInLabelValues
# toggle) differ on exactly those: one of them lets a double quote end the
# string, or turns ' into \' or a line break into an unterminated string. A
# run named so is left out of the picker rather than read wrong.
SAFE_OPTION = '/^([^"\'\\n\\r]+)$/'

_PER = {"1s": 1, "1m": 60}


def prometheus_legend(alias: str) -> str:
    """An InfluxDB alias ($tag_executorid used) as a Prometheus legend ({{executorid}} used)."""
    out = re.sub(r"\$tag_(\w+)", lambda m: "{{" + label_name(m.group(1)) + "}}", alias)
    if "$" in out:
        raise ValueError(f"alias {alias!r}: only $tag_<tag> patterns have a Prometheus legend")
    return out


def _selector(measurement: str, field_name: str) -> str:
    return f"{series_name(measurement, field_name)}{{{APP_MATCHER}, {EXECUTOR_MATCHER}}}"


def _prometheus_target(expr: str, legend: str) -> dict[str, Any]:
    # range: a graph's points; editorMode code: the text as written, as Grafana sends it.
    return {"datasource": PROMETHEUS_DATASOURCE, "editorMode": "code", "expr": expr,
            "legendFormat": prometheus_legend(legend), "range": True, "instant": False}


@dataclass(frozen=True)
class ExecutorGauge:
    """A gauge, a line per executor: each interval's mean or highest value."""
    measurement: str
    alias: str = "$tag_executorid"
    agg: str = "mean"  # mean | max
    # The resolution the InfluxQL reads (queries.BY_RANGE or RAW), as when it was declared.
    read_from: tuple[str, str] = field(default_factory=lambda: queries._read_from.get())

    def __post_init__(self) -> None:
        if queries.is_counter(self.measurement):
            raise ValueError(f"{self.measurement} is a counter: read it with ExecutorRate, never an average")
        if self.agg not in ("mean", "max"):
            raise ValueError(f"agg {self.agg!r}: mean or max")

    def render(self, dialect: str) -> dict[str, Any]:
        if dialect == INFLUXQL:
            with _reading(self.read_from):
                return queries.gauge(self.measurement, self.alias, agg=self.agg)
        over_time = {"mean": "avg_over_time", "max": "max_over_time"}[self.agg]
        by = {"mean": "avg", "max": "max"}[self.agg]
        expr = (f"{by} by ({EXECUTOR_LABEL}) ({over_time}({_selector(self.measurement, 'value')}"
                "[$__interval]))")
        return _prometheus_target(expr, self.alias)


@dataclass(frozen=True)
class ExecutorRate:
    """A counter, a line per executor: its increase per `per`, divided by `divisor`."""
    measurement: str
    alias: str = "$tag_executorid"
    per: str = "1s"
    divisor: int = 1
    read_from: tuple[str, str] = field(default_factory=lambda: queries._read_from.get())

    def __post_init__(self) -> None:
        if not queries.is_counter(self.measurement):
            raise ValueError(f"{self.measurement} is a gauge: a rate of it means nothing; use ExecutorGauge")
        if self.per not in _PER:
            raise ValueError(f"per {self.per!r}: one of {sorted(_PER)}")

    def render(self, dialect: str) -> dict[str, Any]:
        if dialect == INFLUXQL:
            scale = f" / {self.divisor}" if self.divisor != 1 else ""
            with _reading(self.read_from):
                return queries.rate(self.measurement, self.alias, per=self.per, scale=scale)
        # rate() is per second and handles a counter that restarts; sum by executor
        # joins the series of one JVM (its host and prefix labels).
        expr = f"sum by ({EXECUTOR_LABEL}) (rate({_selector(self.measurement, 'value')}[$__rate_interval]))"
        if _PER[self.per] != 1:
            expr += f" * {_PER[self.per]}"
        if self.divisor != 1:
            expr += f" / {self.divisor}"
        return _prometheus_target(expr, self.alias)


def _instant_target(expr: str, legend: str) -> dict[str, Any]:
    # instant: one number at the end of the range (stat panels).
    return {"datasource": PROMETHEUS_DATASOURCE, "editorMode": "code", "expr": expr,
            "legendFormat": prometheus_legend(legend), "range": False, "instant": True}


def _app_selector(measurement: str, executor: str = "") -> str:
    return f"{series_name(measurement, 'value')}{{{APP_MATCHER}{executor}}}"


@dataclass(frozen=True)
class Recent:
    """How many executors report (count), or their values added up (sum), at
    the end of the range: each executor's latest value of the last `window`;
    one that stopped reporting drops out."""
    measurement: str
    agg: str  # sum | count
    alias: str
    window: str = "20s"

    def render(self, dialect: str) -> dict[str, Any]:
        if dialect == INFLUXQL:
            return queries.recent_per_executor(self.measurement, self.agg, self.alias, self.window)
        return _instant_target(f"{self.agg}(max by ({EXECUTOR_LABEL}) (last_over_time("
                               f"{_app_selector(self.measurement)}[{self.window}])))", self.alias)


@dataclass(frozen=True)
class Total:
    """A counter's total over the application: each executor's highest value
    in the range (a counter's last), added up, divided by `divisor`."""
    measurement: str
    alias: str
    divisor: int = 1

    def __post_init__(self) -> None:
        if not queries.is_counter(self.measurement):
            raise ValueError(f"{self.measurement} is a gauge: its values do not add up to a total")

    def render(self, dialect: str) -> dict[str, Any]:
        if dialect == INFLUXQL:
            return queries.total(self.measurement, self.alias,
                                 scale=f" / {self.divisor}" if self.divisor != 1 else "")
        expr = f"sum(max_over_time({_app_selector(self.measurement)}[$__range]))"
        return _instant_target(expr + (f" / {self.divisor}" if self.divisor != 1 else ""), self.alias)


@dataclass(frozen=True)
class Highest:
    """The highest value of the application's series over the range (of a
    counter the driver keeps, e.g. failed tasks: its count so far)."""
    measurement: str
    alias: str

    def render(self, dialect: str) -> dict[str, Any]:
        if dialect == INFLUXQL:
            return queries.target(f'SELECT max("value") FROM "{self.measurement}" WHERE {queries.APP} '
                                  'AND $timeFilter', self.alias)
        return _instant_target(f"max(max_over_time({_app_selector(self.measurement)}[$__range]))", self.alias)


@dataclass(frozen=True)
class Peak:
    """A gauge's highest sample over the range: of the executors, or of the driver."""
    measurement: str
    alias: str
    driver: bool = False

    def __post_init__(self) -> None:
        if queries.is_counter(self.measurement):
            raise ValueError(f"{self.measurement} is a counter: its peak is its total (Total)")

    def render(self, dialect: str) -> dict[str, Any]:
        if dialect == INFLUXQL:
            if self.driver:
                return queries.peak(self.measurement, self.alias,
                                    where=f"{queries.APP} AND \"{EXECUTOR}\" = 'driver'")
            return queries.peak(self.measurement, self.alias)
        executor = f', {EXECUTOR_LABEL}{"=" if self.driver else "!="}"driver"'
        return _instant_target(f"max(max_over_time({_app_selector(self.measurement, executor)}[$__range]))",
                               self.alias)


def peaks_executors_and_driver(measurement: str, what: str) -> list[Peak]:
    """The highest sample over the executors and, apart, the driver's. In local
    mode there are no executors but the driver, and only its value shows.
    Named "sampled": the annotator's exact peaks (queries.exact_peaks) can be higher."""
    return [Peak(measurement, f"{what}, executors (sampled)"),
            Peak(measurement, f"{what}, driver (sampled)", driver=True)]


# The host's devices picked in the Device variable, in either dialect (Telegraf's diskio tag "name").
DEVICE_TAG = "name"
DEVICE_MATCHER = f'{label_name(DEVICE_TAG)}=~"$device"'


def _host_where(where: tuple[tuple[str, str], ...], device: bool) -> tuple[str, str]:
    """(InfluxQL conditions before $timeFilter, PromQL matchers) of a host read."""
    influx = [f"\"{tag}\" = '{value}'" for tag, value in where]
    prom = [f'{label_name(tag)}="{value}"' for tag, value in where]
    if device:
        influx.insert(0, queries.DISKIO_DEVICE)
        prom.insert(0, DEVICE_MATCHER)
    return "".join(f"{c} AND " for c in influx), (f"{{{', '.join(prom)}}}" if prom else "")


@dataclass(frozen=True)
class HostGauge:
    """A gauge of Telegraf's host inputs: a line per host (and `by` tags), each interval's mean."""
    measurement: str
    field_name: str
    alias: str
    where: tuple[tuple[str, str], ...] = ()  # tag = value

    def __post_init__(self) -> None:
        if queries.is_counter(self.measurement, self.field_name):
            raise ValueError(f"{self.measurement}.{self.field_name} is a counter: HostRate")

    def render(self, dialect: str) -> dict[str, Any]:
        influx_where, matchers = _host_where(self.where, device=False)
        if dialect == INFLUXQL:
            return queries.target(f'SELECT mean("{self.field_name}") FROM "{self.measurement}" WHERE {influx_where}'
                                  '$timeFilter GROUP BY time($bucket), "host" fill(none)', self.alias)
        name = series_name(self.measurement, self.field_name)
        return _prometheus_target(f"avg by (host) (avg_over_time({name}{matchers}[$__interval]))", self.alias)


@dataclass(frozen=True)
class HostRate:
    """A counter of Telegraf's host inputs per second, a line per host and `by` tags
    (interface, device), divided by `divisor`; `device`: only the devices of $device."""
    measurement: str
    field_name: str
    alias: str
    by: tuple[str, ...]
    divisor: int = 1
    device: bool = False

    def __post_init__(self) -> None:
        if not queries.is_counter(self.measurement, self.field_name):
            raise ValueError(f"{self.measurement}.{self.field_name} is a gauge: HostGauge")

    def render(self, dialect: str) -> dict[str, Any]:
        influx_where, matchers = _host_where((), self.device)
        scale = f" / {self.divisor}" if self.divisor != 1 else ""
        if dialect == INFLUXQL:
            groups = ", ".join(f'"{tag}"' for tag in ("host", *self.by))
            return queries.target(f'SELECT non_negative_derivative(max("{self.field_name}"), 1s){scale} FROM '
                                  f'"{self.measurement}" WHERE {influx_where}$timeFilter GROUP BY time($bucket), '
                                  f'{groups} fill(none)', self.alias)
        name = series_name(self.measurement, self.field_name)
        by = ", ".join(label_name(tag) for tag in ("host", *self.by))
        return _prometheus_target(f"sum by ({by}) (rate({name}{matchers}[$__rate_interval])){scale}", self.alias)


@dataclass(frozen=True)
class ExecutorsReporting:
    """How many JVMs sent a series of the run in the range (the executors that
    ran tasks, with threadpool.activeTasks: the driver only in local mode)."""
    measurement: str
    alias: str

    def render(self, dialect: str) -> dict[str, Any]:
        if dialect == INFLUXQL:
            return queries.target(f'SELECT count("v") FROM (SELECT max("value") AS "v" FROM '
                                  f'{queries.source(self.measurement)} WHERE {queries.APP} AND $timeFilter '
                                  f'GROUP BY "{EXECUTOR}")', self.alias)
        return _instant_target(f"count(max by ({EXECUTOR_LABEL}) (max_over_time("
                               f"{_app_selector(self.measurement)}[$__range])))", self.alias)


# Executors a per-executor table lists: all, or the $top with the highest heap peak ($drawn in InfluxQL).
ALL_EXECUTORS_LISTED, TOP_BY_HEAP = "all", "top"


@dataclass(frozen=True)
class ExecutorPeak:
    """A table column: each executor's highest value over the range (a
    counter's: its total). InfluxQL: queries.per_executor_peak (a merge joins
    the columns by executor, each named by its alias); PromQL: an instant
    table query per column, its value column renamed to `column`
    (prometheus.py: Grafana names it "Value #<refId>"). `listed`: every
    executor, or the $top with the highest heap peak (TOP_BY_HEAP)."""
    measurement: str
    column: str
    listed: str = ALL_EXECUTORS_LISTED

    def render(self, dialect: str) -> dict[str, Any]:
        if dialect == INFLUXQL:
            where = queries.DRAWN if self.listed == TOP_BY_HEAP else queries.APP
            return queries.per_executor_peak(self.measurement, self.column, where=where)
        expr = f"max by ({EXECUTOR_LABEL}) (max_over_time({_app_selector(self.measurement)}[$__range]))"
        if self.listed == TOP_BY_HEAP:
            heap = f"max by ({EXECUTOR_LABEL}) (max_over_time({_app_selector(JVM_HEAP_MEMORY)}[$__range]))"
            expr += f" and on ({EXECUTOR_LABEL}) topk($top, {heap})"
        return {**_instant_target(expr, ""), "format": "table"}


def _ref_after(ref: str, n: int = 1) -> str:
    return chr(ord(ref) + n)


@dataclass(frozen=True)
class Share:
    """One total over another (GC time over task run time), a stat. InfluxQL:
    the two totals, hidden, and a Grafana math expression over them (InfluxQL
    cannot divide two subqueries' sums); PromQL: one instant query, the
    ratio itself, with no value where the denominator is 0 (the math
    expression gives NaN or Inf there)."""
    numerator: Total
    denominator: Total

    def targets(self, dialect: str, first_ref: str) -> list[tuple[dict[str, Any], bool]]:
        if dialect == INFLUXQL:
            return [(self.numerator.render(INFLUXQL), True), (self.denominator.render(INFLUXQL), True),
                    (queries.math(f"${first_ref} / ${_ref_after(first_ref)}"), False)]
        expr = f"{self.numerator.render(PROMQL)['expr']} / ({self.denominator.render(PROMQL)['expr']} > 0)"
        return [(_instant_target(expr, ""), False)]


@dataclass(frozen=True)
class SummedRate:
    """A counter's rate summed over the picked executors, divided by `divisor`
    (Task time by component: a line per counter). InfluxQL: the executors'
    own counter and the annotator's per-application total of it under one
    alias, of which $task_scope keeps one (queries.task_time); PromQL: the
    executors' counters only, since the annotator's totals stay in InfluxDB
    (telegraf/thanos.conf drops sparkscope_*)."""
    measurement: str
    alias: str
    divisor: int = 1
    read_from: tuple[str, str] = field(default_factory=lambda: queries._read_from.get())

    def __post_init__(self) -> None:
        if not queries.is_counter(self.measurement):
            raise ValueError(f"{self.measurement} is a gauge: a rate of it means nothing")

    def targets(self, dialect: str, first_ref: str) -> list[tuple[dict[str, Any], bool]]:
        scale = f" / {self.divisor}" if self.divisor != 1 else ""
        if dialect == INFLUXQL:
            with _reading(self.read_from):
                return [(t, False) for t in queries.task_time(self.measurement, self.alias, scale=scale)]
        expr = f"sum(rate({_selector(self.measurement, 'value')}[$__rate_interval])){scale}"
        return [(_prometheus_target(expr, self.alias), False)]


@dataclass(frozen=True)
class DiskAwait:
    """Milliseconds per completed I/O of the picked devices, a line per host
    and device: the increase of a diskio time counter over the increase of
    its I/O count (r_await, w_await). No point where no I/O completed (not
    0 ms): in PromQL the count's rate > 0 filters those out."""
    time_field: str
    count_field: str
    alias: str

    def __post_init__(self) -> None:
        for name in (self.time_field, self.count_field):
            if not queries.is_counter(DISKIO, name):
                raise ValueError(f"{DISKIO}.{name} is a gauge: an await is a ratio of two counters' increases")

    def render(self, dialect: str) -> dict[str, Any]:
        if dialect == INFLUXQL:
            return queries.disk_await(self.time_field, self.count_field, self.alias)
        by = ", ".join(label_name(tag) for tag in ("host", DEVICE_TAG))

        def rated(field_name: str) -> str:
            return (f"sum by ({by}) (rate({series_name(DISKIO, field_name)}{{{DEVICE_MATCHER}}}"
                    "[$__rate_interval]))")
        return _prometheus_target(f"{rated(self.time_field)} / ({rated(self.count_field)} > 0)", self.alias)


Read = (ExecutorGauge, ExecutorRate, Recent, Total, Highest, Peak, HostGauge, HostRate, Share, SummedRate, DiskAwait,
        ExecutorsReporting, ExecutorPeak)


def is_read(target: Any) -> bool:
    return isinstance(target, Read)


def render(target: Any, dialect: str) -> dict[str, Any]:
    """A panel target as its dashboard's dialect writes it: a declared read
    rendered, an InfluxQL target dict as it is (InfluxQL only)."""
    if is_read(target):
        return target.render(dialect)
    if dialect != INFLUXQL:
        raise ValueError(f"an InfluxQL-only target cannot be rendered as {dialect}: {target}")
    return target


def rendered(target: Any, dialect: str, first_ref: str) -> list[tuple[dict[str, Any], bool]]:
    """A panel target as the query targets its dialect needs, each with
    whether it is hidden (an operand of an expression): one for most reads,
    several where one dialect needs more queries than the other (Share,
    SummedRate). first_ref: the refId the first of them gets."""
    if hasattr(target, "targets"):
        return target.targets(dialect, first_ref)
    return [(render(target, dialect), False)]


@contextmanager
def _reading(read_from: tuple[str, str]) -> Iterator[None]:
    token = queries._read_from.set(read_from)
    try:
        yield
    finally:
        queries._read_from.reset(token)
