"""Grafana 12's alert rule evaluation, without Grafana: a provisioned rule's
queries sent to a real InfluxDB as the InfluxDB datasource sends them (and,
for a Prometheus mode's rules, its PromQL instant queries to a real Prometheus
API, Thanos Query: $__range the query's window, evaluated at its end, a
frame per series of the vector, labelled by its labels), its
expressions (reduce, math, threshold) computed, its condition turned into a
state per alert instance, and `for` applied over a series of evaluations.

A rule is evaluated at any moment `at` (ms): each datasource query covers
[at - relativeTimeRange.from, at - relativeTimeRange.to], which Grafana's
InfluxQL backend writes for $timeFilter as `time >= <from>ms and time <=
<to>ms`, and is sent as GET /query?db=&epoch=ms&q= with the datasource's
read-only user (sparkscope_testkit/grafana12.py influx_http); only the first
statement's result is read. So a test can evaluate a rule at past moments of
a real run, every group interval, as Grafana would have evaluated it then.
One difference from a live Grafana: a point written after its own timestamp
(the annotator stamps a stage at its start and writes it at its end) is seen
by an evaluation "before" it was written; assert firing only at moments after
the data arrived.

What is modelled, from Grafana's documentation (expression queries; alert
rule evaluation; state and health; no data and error handling; file
provisioning) and, where the documentation is silent, from reading its
behaviour (pkg/expr/mathexp union and binary operations, pkg/services/
ngalert/eval evaluateExecutionResult, pkg/tsdb/influxdb/models Build):
- a datasource query that returns no series makes the whole evaluation
  NoData (every instance missing; noDataState OK: nothing fires);
- InfluxDB series become frames labelled by their tags, one value column each;
- reduce: last, mean, min, max, sum, count, median; modes strict (a null,
  NaN or Inf gives NaN), dropNN, replaceNN;
- math on reduced numbers: numbers, $A (letters only) / ${A}, + - * / %, comparisons,
  && || (short-circuit before NaN), parentheses, abs is_nan is_null
  is_number; two sets join by labels (equal, or one empty or a subset of
  the other; equal counts but unequal labels do not join), and when nothing
  joins and each side holds exactly one item those two join with their
  labels dropped; NaN propagates;
- threshold gt, lt, within_range, outside_range as the math Grafana runs;
- condition per instance: null -> NoData, 0 -> Normal, anything else (NaN,
  Inf too) -> Alerting; duplicate labels or an unreduced series -> Error;
- states: Alerting with for > 0 is Pending first and Alerting once it has
  been pending for `for`; a Normal result resets; an instance missing from
  missing_series_evals_to_resolve (default 2) evaluations in a row resolves.

Stricter than Grafana where unsure (ModelError): $__interval and other
macros, builder queries, retention policies, several value columns,
resample, classic conditions, SQL expressions, unary operators, series in
math, noDataState other than OK, keepFiringFor, recovery thresholds.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import yaml

from sparkscope_testkit.grafana12 import ModelError, Send, binary_op, check_single_statement

Labels = Tuple[Tuple[str, str], ...]
NORMAL, PENDING, ALERTING = "Normal", "Pending", "Alerting"
EXPRESSION_UID = "__expr__"


def load_rules(path: Path) -> list[dict]:
    """The rules of a provisioning file, each with its group's interval (s) as `_interval_s`."""
    document = yaml.safe_load(path.read_text())
    out = []
    for group in document.get("groups", []):
        interval = duration_s(group["interval"])
        for rule in group["rules"]:
            out.append({**rule, "_interval_s": interval})
    return out


def duration_s(text: str) -> int:
    m = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text)
    if not m or not text:
        raise ModelError(f"duration {text!r}: only h, m and s are modelled")
    h, mi, s = (int(g or 0) for g in m.groups())
    return h * 3600 + mi * 60 + s


@dataclass
class Number:
    labels: Labels
    value: Optional[float]


@dataclass
class Series:
    labels: Labels
    points: List[Tuple[int, Optional[float]]]


NO_DATA = "NoData"  # the whole evaluation: a query found no series


@dataclass
class Evaluation:
    at_ms: int
    no_data: bool
    states: Dict[Labels, str]                     # instance -> Normal | Alerting | NoData
    values: Dict[str, Dict[Labels, Optional[float]]]  # refId -> instance -> number ($values)
    queries: Dict[str, str] = field(default_factory=dict)  # refId -> InfluxQL as sent


# ---------------------------------------------------------------- datasource queries

def interpolate(query: str, from_ms: int, to_ms: int) -> str:
    """Grafana's InfluxQL backend on a raw query: $timeFilter; anything else with a $ is refused."""
    text = query.replace("$timeFilter", f"time >= {from_ms}ms and time <= {to_ms}ms")
    if re.search(r"\$__interval|\$interval", text):
        raise ModelError(f"{query!r}: $__interval in an alert query is the query's intervalMs: not modelled")
    # A $ left outside quotes would reach InfluxDB as is.
    bare = re.sub(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|/(?:[^/\\]|\\.)*/", "", text)
    if "$" in bare:
        raise ModelError(f"{query!r}: a variable other than $timeFilter is not replaced in an alert query")
    check_single_statement(text)
    return text


def frames(ref: str, series: list[dict]) -> list[Series]:
    out: list[Series] = []
    for one in series:
        columns = one.get("columns") or []
        if "time" not in columns:
            raise ModelError(f"{ref}: a result without a time column is not modelled")
        values = [c for c in columns if c != "time"]
        if len(values) != 1:
            raise ModelError(f"{ref}: {len(values)} value columns {values}: each would be a frame with the same "
                             "labels, which Grafana refuses (duplicate labels)")
        t, v = columns.index("time"), columns.index(values[0])
        points = []
        for row in one.get("values") or []:
            value = row[v]
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ModelError(f"{ref}: value {value!r} is not a number")
            points.append((int(row[t]), None if value is None else float(value)))
        out.append(Series(tuple(sorted((one.get("tags") or {}).items())), points))
    if len({s.labels for s in out}) != len(out):
        raise ModelError(f"{ref}: several series with the same labels: Grafana's duplicate labels error")
    return out


# ---------------------------------------------------------------- reduce

def _numeric(v: Optional[float]) -> bool:
    return v is not None and math.isfinite(v)


def reduce_series(series: Series, reducer: str, settings: Optional[dict]) -> Number:
    mode = (settings or {}).get("mode", "")
    values = [v for _, v in series.points]
    if mode == "dropNN":
        values = [v for v in values if _numeric(v)]
    elif mode == "replaceNN":
        fill = float((settings or {}).get("replaceWithValue", 0))
        values = [v if _numeric(v) else fill for v in values]
    elif mode not in ("", "strict"):
        raise ModelError(f"reduce mode {mode!r} is not modelled")
    elif reducer != "count" and not all(_numeric(v) for v in values):
        return Number(series.labels, math.nan)
    if reducer == "count":
        return Number(series.labels, float(len(values)))
    if reducer == "sum":
        return Number(series.labels, float(sum(values)))
    if not values:
        return Number(series.labels, math.nan)
    if reducer == "last":
        return Number(series.labels, values[-1])
    if reducer == "mean":
        return Number(series.labels, sum(values) / len(values))
    if reducer == "min":
        return Number(series.labels, min(values))
    if reducer == "max":
        return Number(series.labels, max(values))
    if reducer == "median":
        return Number(series.labels, float(statistics.median(values)))
    raise ModelError(f"reducer {reducer!r} is not modelled")


# ---------------------------------------------------------------- math

_TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)|\$\{([^}]+)\}|\$(\w+)"
                    r"|(\|\||&&|==|!=|<=|>=|\*\*|[-+*/%<>()!,])|([A-Za-z_]\w*))")
_LEVELS = (("||",), ("&&",), ("==", "!=", "<", ">", "<=", ">="), ("+", "-"), ("*", "/", "%"))
_FUNCS = {"abs": lambda v: None if v is None else abs(v),
          "is_nan": lambda v: None if v is None else float(math.isnan(v)),
          "is_null": lambda v: float(v is None),
          "is_number": lambda v: float(v is not None and math.isfinite(v))}


def _contains(bigger: Labels, smaller: Labels) -> bool:
    return set(smaller) <= set(bigger)


def union(left: list[Number], right: list[Number]) -> list[tuple[Optional[Labels], Number, Number]]:
    """Grafana's join of two sets of numbers by their labels (see the module's docstring)."""
    pairs = []
    for a in left:
        for b in right:
            if a.labels == b.labels or not a.labels or not b.labels:
                labels = a.labels or b.labels
            elif len(a.labels) == len(b.labels):
                continue
            elif _contains(a.labels, b.labels):
                labels = a.labels
            elif _contains(b.labels, a.labels):
                labels = b.labels
            else:
                continue
            pairs.append((labels, a, b))
    if not pairs and len(left) == 1 and len(right) == 1:
        pairs.append(((), left[0], right[0]))
    return pairs


Value = object  # a float (a constant) or a list of Numbers


def _combine(op: str, left: Value, right: Value) -> Value:
    def one(a: Optional[float], b: Optional[float]) -> Optional[float]:
        return None if a is None or b is None else binary_op(op, a, b)
    if not isinstance(left, list) and not isinstance(right, list):
        return one(left, right)
    if not isinstance(left, list):
        return [Number(n.labels, one(left, n.value)) for n in right]
    if not isinstance(right, list):
        return [Number(n.labels, one(n.value, right)) for n in left]
    return [Number(labels, one(a.value, b.value)) for labels, a, b in union(left, right)]


class MathExpression:
    """Grafana's math grammar: || lowest, then &&, comparisons, + -, * / % (left to right)."""

    def __init__(self, text: str, operands: Dict[str, list]):
        self.text, self.operands = text, operands
        self.tokens: list[tuple[str, str]] = []
        pos, body = 0, text.rstrip()
        while pos < len(body):
            m = _TOKEN.match(body, pos)
            if not m:
                raise ModelError(f"math {text!r}: {body[pos:]!r} is not modelled")
            number, braced, plain, op, name = m.groups()
            if number:
                self.tokens.append(("num", number))
            elif braced or plain:
                if plain and not plain.isalpha():
                    raise ModelError(f"math {text!r}: ${plain}: Grafana 11 reads a $name up to its first character "
                                     "that is not a letter (12 also takes digits and _): write ${...}")
                self.tokens.append(("ref", braced or plain))
            elif op:
                if op in ("**", "!"):
                    raise ModelError(f"math {text!r}: {op} is not modelled")
                self.tokens.append(("op", op))
            else:
                self.tokens.append(("name", name))
            pos = m.end()
        self.i = 0

    def value(self) -> Value:
        out = self._level(0)
        if self.i != len(self.tokens):
            raise ModelError(f"math {self.text!r}: unexpected {self.tokens[self.i][1]!r}")
        return out

    def _op(self) -> Optional[str]:
        return self.tokens[self.i][1] if self.i < len(self.tokens) and self.tokens[self.i][0] == "op" else None

    def _level(self, depth: int) -> Value:
        if depth == len(_LEVELS):
            return self._primary()
        out = self._level(depth + 1)
        while self._op() in _LEVELS[depth]:
            op = self._op()
            self.i += 1
            out = _combine(op, out, self._level(depth + 1))
        return out

    def _primary(self) -> Value:
        if self.i >= len(self.tokens):
            raise ModelError(f"math {self.text!r} ends early")
        kind, text = self.tokens[self.i]
        self.i += 1
        if kind == "num":
            if re.fullmatch(r"0\d+", text):
                raise ModelError(f"math {self.text!r}: {text} is octal in Grafana: not modelled")
            return float(text)
        if kind == "ref":
            if text not in self.operands:
                raise ModelError(f"math {self.text!r}: ${text} is not an earlier query or expression")
            return self.operands[text]
        if kind == "name":
            if text not in _FUNCS or self._op() != "(":
                raise ModelError(f"math {self.text!r}: {text} is not a modelled function")
            self.i += 1
            arg = self._level(0)
            if self._op() != ")":
                raise ModelError(f"math {self.text!r}: ')' missing")
            self.i += 1
            f = _FUNCS[text]
            return [Number(n.labels, f(n.value)) for n in arg] if isinstance(arg, list) else f(arg)
        if text == "(":
            out = self._level(0)
            if self._op() != ")":
                raise ModelError(f"math {self.text!r}: ')' missing")
            self.i += 1
            return out
        if text == "-":
            raise ModelError(f"math {self.text!r}: unary - is not modelled (Grafana's binds loosely)")
        raise ModelError(f"math {self.text!r}: unexpected {text!r}")


def threshold_math(ref: str, conditions: list) -> str:
    if len(conditions) != 1:
        raise ModelError(f"threshold with {len(conditions)} conditions is not modelled")
    condition = conditions[0]
    if condition.get("unloadEvaluator"):
        raise ModelError("a recovery threshold (unloadEvaluator) is not modelled")
    kind, params = condition["evaluator"]["type"], condition["evaluator"]["params"]
    x = f"${{{ref}}}"
    if kind == "gt":
        return f"{x} > {params[0]!r}"
    if kind == "lt":
        return f"{x} < {params[0]!r}"
    if kind == "within_range":
        return f"{x} > {params[0]!r} && {x} < {params[1]!r}"
    if kind == "outside_range":
        return f"{x} < {params[0]!r} || {x} > {params[1]!r}"
    raise ModelError(f"threshold type {kind!r} is not modelled")


# ---------------------------------------------------------------- one rule

def prom_interpolate(expr: str, from_ms: int, to_ms: int) -> str:
    """Grafana's Prometheus backend (pkg/promlib) on an alert query: $__range (and _s, _ms) the query's
    time range; any other $ is refused (a dashboard variable has no value in an alert rule)."""
    seconds = (to_ms - from_ms) // 1000
    text = (expr.replace("$__range_ms", str(to_ms - from_ms)).replace("$__range_s", str(seconds))
            .replace("$__range", f"{seconds}s"))
    if "$" in text:
        raise ModelError(f"{expr!r}: only $__range is modelled in an alert's PromQL")
    return text


def prom_frames(ref: str, body: dict, at_ms: int) -> list[Series]:
    """An instant query's vector as Grafana's frames: one per series, labelled by its labels (the
    metric name dropped), its one sample stamped at the evaluation."""
    if body.get("status") != "success" or body["data"]["resultType"] != "vector":
        raise ModelError(f"{ref}: {body}: an instant query's vector is modelled, nothing else")
    out = [Series(tuple(sorted((k, v) for k, v in one["metric"].items() if k != "__name__")),
                  [(at_ms, float(one["value"][1]))]) for one in body["data"]["result"]]
    if len({s.labels for s in out}) != len(out):
        raise ModelError(f"{ref}: several series with the same labels: Grafana's duplicate labels error")
    return out


class Rule:
    def __init__(self, rule: dict, send: Send, datasource_uid: str, prom=None, prometheus_uid: str | None = None):
        """prom(path, params) -> the Prometheus API's JSON, for the queries of the datasource
        prometheus_uid (a Prometheus mode's rules); send: InfluxDB's, for the others."""
        self.rule, self.send, self.datasource_uid = rule, send, datasource_uid
        self.prom, self.prometheus_uid = prom, prometheus_uid
        self.uid, self.title = rule["uid"], rule["title"]
        self.for_s = duration_s(rule.get("for", "0s"))
        self.interval_s = rule.get("_interval_s", 60)
        self.missing_to_resolve = int(rule.get("missing_series_evals_to_resolve", 2))
        if rule.get("noDataState", "NoData") != "OK":
            raise ModelError(f"{self.uid}: noDataState {rule.get('noDataState')!r}: only OK is modelled")
        if duration_s(rule.get("keepFiringFor", "0s")):
            raise ModelError(f"{self.uid}: keepFiringFor is not modelled")

    def evaluate(self, at_ms: int) -> Evaluation:
        results: Dict[str, list] = {}
        sent: Dict[str, str] = {}
        no_data = False
        for query in self.rule["data"]:
            ref, model = query["refId"], query["model"]
            if query["datasourceUid"] == EXPRESSION_UID:
                results[ref] = self._expression(ref, model, results)
                continue
            if self.prometheus_uid and query["datasourceUid"] == self.prometheus_uid:
                if model.get("instant") is not True or model.get("range") or model.get("editorMode") != "code":
                    raise ModelError(f"{self.uid} {ref}: only instant code-mode PromQL queries are modelled")
                window = query["relativeTimeRange"]
                text = prom_interpolate(model["expr"], at_ms - window["from"] * 1000, at_ms - window["to"] * 1000)
                sent[ref] = text
                to_s = (at_ms - window["to"] * 1000) / 1000
                results[ref] = prom_frames(ref, self.prom("/api/v1/query", {"query": text, "time": str(to_s)}),
                                           at_ms)
                no_data = no_data or not results[ref]
                continue
            if query["datasourceUid"] != self.datasource_uid:
                raise ModelError(f"{self.uid} {ref}: datasource {query['datasourceUid']!r} is not the provisioned "
                                 f"InfluxDB ({self.datasource_uid})")
            if model.get("rawQuery") is not True or model.get("policy") not in (None, "default"):
                raise ModelError(f"{self.uid} {ref}: only raw queries on the default policy are modelled")
            if model.get("resultFormat", "time_series") != "time_series":
                raise ModelError(f"{self.uid} {ref}: resultFormat {model.get('resultFormat')!r} is not modelled")
            window = query["relativeTimeRange"]
            text = interpolate(model["query"], at_ms - window["from"] * 1000, at_ms - window["to"] * 1000)
            sent[ref] = text
            results[ref] = frames(ref, self.send(text, None))
            no_data = no_data or not results[ref]
        condition = results.get(self.rule["condition"])
        values = {ref: {n.labels: n.value for n in items} for ref, items in results.items()
                  if items and all(isinstance(n, Number) for n in items)}
        if no_data or not condition:
            return Evaluation(at_ms, True, {}, values, sent)
        if not all(isinstance(n, Number) for n in condition):
            raise ModelError(f"{self.uid}: the condition is time series data: Grafana's error "
                             "\"only reduced data can be alerted on\"")
        states: Dict[Labels, str] = {}
        for n in condition:
            if n.labels in states:
                raise ModelError(f"{self.uid}: duplicate results with labels {n.labels}: Grafana's Error")
            states[n.labels] = "NoData" if n.value is None else NORMAL if n.value == 0 else ALERTING
        return Evaluation(at_ms, False, states, values, sent)

    def _expression(self, ref: str, model: dict, results: Dict[str, list]) -> list:
        kind = model.get("type")
        if kind == "reduce":
            inputs = results[model["expression"]]
            if not all(isinstance(s, Series) for s in inputs):
                raise ModelError(f"{self.uid} {ref}: reduce of numbers is not modelled")
            return [reduce_series(s, model["reducer"], model.get("settings")) for s in inputs]
        if kind == "math":
            operands = {k: v for k, v in results.items()}
            for k, items in operands.items():
                if any(isinstance(s, Series) for s in items) and re.search(rf"\$\{{?{k}\b", model["expression"]):
                    raise ModelError(f"{self.uid} {ref}: math on time series is not modelled")
            out = MathExpression(model["expression"], operands).value()
            if not isinstance(out, list):
                raise ModelError(f"{self.uid} {ref}: a math result without a query in it is not modelled")
            return out
        if kind == "threshold":
            operands = {model["expression"]: results[model["expression"]]}
            return MathExpression(threshold_math(model["expression"], model["conditions"]), operands).value()
        raise ModelError(f"{self.uid} {ref}: expression type {kind!r} is not modelled")


@dataclass
class Instance:
    state: str = NORMAL
    since_ms: int = 0        # when it went Pending or Alerting
    missing: int = 0


@dataclass
class Timeline:
    """What each evaluation said and what state each instance was in after it."""
    rule: Rule
    evaluations: List[Evaluation]
    states: List[Dict[Labels, str]]
    first_alerting: Dict[Labels, int]    # instance -> the evaluation at which it first fired

    def firing(self) -> set:
        return set(self.first_alerting)

    def describe(self) -> str:
        lines = []
        for ev, after in zip(self.evaluations, self.states):
            shown = {dict(k).get("applicationid", "") + "/" + "/".join(v for kk, v in k if kk != "applicationid"):
                     (s, {ref: vals.get(k) for ref, vals in ev.values.items() if ref in ("VALUE",)})
                     for k, s in after.items()}
            lines.append(f"{ev.at_ms}: {'NoData' if ev.no_data else ''} {shown}")
        return f"{self.rule.uid}:\n  " + "\n  ".join(lines)


def simulate(rule: Rule, times_ms: list[int]) -> Timeline:
    """Evaluate at each moment in order and apply `for` and stale resolution as Grafana's state manager."""
    instances: Dict[Labels, Instance] = {}
    evaluations, states, first = [], [], {}
    for at in times_ms:
        ev = rule.evaluate(at)
        evaluations.append(ev)
        for labels, result in ev.states.items():
            inst = instances.setdefault(labels, Instance())
            inst.missing = 0
            if result == ALERTING:
                if inst.state == NORMAL:
                    inst.state, inst.since_ms = (ALERTING if rule.for_s == 0 else PENDING), at
                if inst.state == PENDING and at - inst.since_ms >= rule.for_s * 1000:
                    inst.state = ALERTING
                if inst.state == ALERTING:
                    first.setdefault(labels, at)
            else:  # Normal, or NoData mapped by noDataState OK
                inst.state = NORMAL
        for labels, inst in list(instances.items()):
            if labels not in ev.states:
                inst.missing += 1
                if inst.missing >= rule.missing_to_resolve:
                    del instances[labels]
        states.append({k: v.state for k, v in instances.items()})
    return Timeline(rule, evaluations, states, first)


def every(start_ms: int, end_ms: int, step_s: int) -> list[int]:
    """Evaluation moments from start to end (inclusive) every step."""
    return list(range(int(start_ms), int(end_ms) + 1, step_s * 1000))
