"""What a graph reads, declared once and rendered for either metrics store.

A panel's line is declared as what it means: one stored series
(measurement and field), whether it is a gauge or a counter (from the
schema: queries.is_counter, never by hand), per executor, and how an
interval is read (a gauge's mean or highest value; a counter's rate). The
same declaration renders to

- InfluxQL for the InfluxDB dashboards: through queries.gauge and
  queries.rate, so their text is what it always was (generate --check);
- PromQL for the Prometheus-datasource dashboards (the Thanos store): names
  from store/prometheus.py, a gauge read with <agg>_over_time over
  $__interval, a counter with rate() over $__rate_interval (Grafana's
  window that always holds two samples), the application and executor
  pickers as label matchers (APP_MATCHER, EXECUTOR_MATCHER below).

A counter is never averaged and a gauge never rated in either dialect: the
kind comes from the schema, and ExecutorGauge refuses a counter,
ExecutorRate a gauge.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

from sparkscope.dashboards import queries
from sparkscope.store.prometheus import label_name, series_name
from sparkscope.store.schema import APPLICATION, EXECUTOR

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
    out = alias
    for tag in (EXECUTOR, APPLICATION):
        out = out.replace(f"$tag_{tag}", "{{" + label_name(tag) + "}}")
    if "$" in out:
        raise ValueError(f"alias {alias!r}: only $tag_{EXECUTOR} and $tag_{APPLICATION} have a Prometheus legend")
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

    @property
    def counter(self) -> bool:
        return False

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

    @property
    def counter(self) -> bool:
        return True

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


Read = (ExecutorGauge, ExecutorRate)


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


@contextmanager
def _reading(read_from: tuple[str, str]) -> Iterator[None]:
    token = queries._read_from.set(read_from)
    try:
        yield
    finally:
        queries._read_from.reset(token)
