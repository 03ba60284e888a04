"""What Grafana 12.4 and 13 send to a Prometheus API (Thanos Query) for one
of our PromQL dashboards, without Grafana.

PrometheusDashboard opens a dashboard as grafana12.Dashboard12 does (the
variables in list order, URL values, the selection rules: shared code), with
the Prometheus datasource's own rules where they differ:

- variables: `label_values(<selector>, <label>)` and `label_values(<label>)`
  (Grafana's metricFindQuery) ask GET /api/v1/label/<label>/values with
  match[]=<selector> and the range in seconds; the options are the answer,
  through the variable's regex and sort as every variable's;
- interpolation (the datasource's interpolateQueryExpr, in panel and
  variable queries alike): a variable with an explicit ${name:format} is
  formatted by the template service (grafana12.apply_format); otherwise a
  variable that is neither multi-value nor include-All is escaped for a
  string literal only (prometheusRegularEscape), and any other value of it
  for a regex inside a string literal (prometheusSpecialRegexEscape), several
  joined as (a|b); a custom All value goes in as it is. Both escapes exist in
  two versions, chosen by the feature toggle prometheusSpecialCharsInLabelValues
  (READINGS): the model interpolates under each and accepts a query only when
  every reading gives a query that means what the template says;
- macros (the backend, pkg/promlib): $__interval the panel's interval (as
  Dashboard12.interval, the datasource's scrape interval as its least),
  $__rate_interval max($__interval + scrape, 4 x scrape) as a Go duration,
  $__range the range in whole seconds; the step of a range query is the
  interval, start and end floored to it; an instant query (stat panels) is
  evaluated at the end of the range.

"Means what the template says" (check_substitution): the query lexes as
PromQL with the same tokens as its template (a value cannot end its string
and add matchers or operators); every string decodes (Go escapes only:
\\. is an error in PromQL); a matcher whose string is one variable matches
exactly its values: with = the string is the value, with =~ the regex is
those values as literals (a|b), or the custom All value. A substitution
that fails under one reading raises ModelError naming it.

Annotations, and the panels of the InfluxDB datasource a PromQL dashboard keeps (events
and strings, which a Prometheus store does not hold), are InfluxDB queries: Dashboard12's rules,
unchanged.

Sources: Grafana's Prometheus datasource (packages/grafana-prometheus,
datasource.ts: interpolateQueryExpr, prometheusRegularEscape,
prometheusSpecialRegexEscape, both toggle states), Grafana's documentation
($__rate_interval: "max($__interval + Scrape interval, 4 * Scrape
interval)"; label_values), the Prometheus HTTP API and PromQL's lexer
(string escapes).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional, Tuple, Union

from sparkscope_testkit.grafana12 import (Dashboard12, ModelError, _provisioned_datasource, checked_targets, Variable, _CustomAll, _VARIABLE,
                                          apply_format, calculate_interval, interval_to_ms, options_from_texts,
                                          round_interval)
from sparkscope_testkit.grafana13 import Dashboard13

# send(path, params) -> the JSON body of a GET to the Prometheus HTTP API.
PromSend = Callable[[str, dict], dict]

THANOS_DATASOURCES = Path(__file__).resolve().parents[2] / "grafana" / "thanos" / "datasources"
CLASSIC, SPECIAL_CHARS = "classic", "prometheusSpecialCharsInLabelValues"
READINGS = (CLASSIC, SPECIAL_CHARS)
MACROS = ("__interval", "__interval_ms", "__rate_interval", "__rate_interval_ms", "__range", "__range_s",
          "__range_ms", "__from", "__to")
SAFE_RESOLUTION = 11000  # pkg/promlib: a step never finer than range / 11000


# ------------------------------------------------------------------ the datasource's escaping

def regular_escape(value: str, reading: str) -> str:
    """prometheusRegularEscape: for a string literal."""
    if reading == SPECIAL_CHARS:
        if re.match(r'^\w+(=|!=|=~|!~)".*"$', value, re.S):
            return value  # "looks like a whole matcher": left as it is
        return value.replace("\\", "\\\\").replace('"', '\\"')
    return value.replace("\\", "\\\\").replace("'", "\\\\'")


def special_regex_escape(value: str, reading: str) -> str:
    """prometheusSpecialRegexEscape: for a regex inside a string literal."""
    out = value.replace("\\", "\\\\\\\\")
    if reading == SPECIAL_CHARS:
        out = out.replace('"', '\\\\\\"')
        return re.sub(r"[$^*{}\[\]'+?.()|]", lambda m: "\\\\" + m.group(0), out)
    return re.sub(r"[$^*{}\[\]+?.()|]", lambda m: "\\\\" + m.group(0), out)


def interpolate_query_expr(value: Union[str, List[str]], var: Variable, reading: str) -> str:
    if not var.multi and not var.include_all:
        return ",".join(regular_escape(v, reading) for v in value) if isinstance(value, list) \
            else regular_escape(value, reading)
    if isinstance(value, str):
        return special_regex_escape(value, reading)
    escaped = [special_regex_escape(v, reading) for v in value]
    return escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"


# ------------------------------------------------------------------ PromQL, as its lexer reads it

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<comment>\#[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`[^`]*`)
  | (?P<var>\$\{[^}]*\}|\$\w+|\[\[\w+(?::\w+)?\]\])
  | (?P<duration>(?:[0-9]+(?:ms|[smhdwy]))+)
  | (?P<number>(?:0x[0-9a-fA-F]+|[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?))
  | (?P<ident>[A-Za-z_:][\w:]*)
  | (?P<op>=~|!~|!=|==|<=|>=|[-+*/%^=<>(){}\[\],@])
""", re.X)


@dataclass(frozen=True)
class Token:
    kind: str
    text: str


def tokens(query: str, template: bool = False) -> List[Token]:
    """PromQL's tokens of a query (a template: its variables outside strings as 'var' tokens)."""
    out, pos = [], 0
    while pos < len(query):
        m = _TOKEN.match(query, pos)
        if not m or (m.lastgroup == "var" and not template):
            raise ModelError(f"PromQL does not lex {query[pos:pos + 40]!r} (at {pos} of {query!r}): an "
                             "unterminated string or a stray character")
        if m.lastgroup not in ("space", "comment"):
            out.append(Token(m.lastgroup, m.group(0)))
        pos = m.end()
    return out


_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\"}


def decode_string(literal: str) -> str:
    """A PromQL string literal's value: Go's escapes, an unknown one an error (as PromQL's lexer)."""
    quote, body = literal[0], literal[1:-1]
    if quote == "`":
        return body
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        e = body[i + 1]
        if e in _ESCAPES:
            out.append(_ESCAPES[e])
            i += 2
        elif e == quote:
            out.append(quote)
            i += 2
        elif e in "01234567" and re.fullmatch(r"[0-7]{3}", body[i + 1:i + 4]):
            out.append(chr(int(body[i + 1:i + 4], 8)))
            i += 4
        elif e in "xuU":
            size = {"x": 2, "u": 4, "U": 8}[e]
            digits = body[i + 2:i + 2 + size]
            if not re.fullmatch(f"[0-9a-fA-F]{{{size}}}", digits):
                raise ModelError(f"PromQL string {literal}: bad \\{e} escape")
            out.append(chr(int(digits, 16)))
            i += 2 + size
        else:
            raise ModelError(f"PromQL string {literal}: unknown escape sequence \\{e} (Prometheus refuses "
                             "the query)")
    return "".join(out)


_REGEX_META = set(".^$*+?()[]{}|\\")


def literal_alternatives(regex: str) -> Optional[List[str]]:
    """The strings a regex matches when it is literals joined by | (in one group or none), else None."""
    body = regex[1:-1] if regex.startswith("(") and regex.endswith(")") else regex
    alternatives, current, i = [], [], 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            if i + 1 >= len(body) or body[i + 1].isalnum() or body[i + 1] == "_":
                return None  # \d, \w, ...: a class, not a literal
            current.append(body[i + 1])
            i += 2
        elif c == "|":
            alternatives.append("".join(current))
            current = []
            i += 1
        elif c in _REGEX_META:
            return None
        else:
            current.append(c)
            i += 1
    alternatives.append("".join(current))
    if body is regex and len(alternatives) > 1:
        return None  # a|b unparenthesised is not what the datasource writes
    return alternatives


def check_substitution(template: str, sent: str, values: dict[str, Union[str, List[str], _CustomAll]],
                       reading: str) -> None:
    """ModelError unless `sent` (the template interpolated under `reading`) has the template's tokens
    and each matcher of one variable matches exactly that variable's `values`."""
    want, got = tokens(template, template=True), tokens(sent)
    kinds_want = [t.kind for t in want]
    kinds_got = [t.kind for t in got]
    same_shape = len(want) == len(got) and all(
        w == g or (w == "var" and g in ("duration", "number", "ident")) for w, g in zip(kinds_want, kinds_got))
    if not same_shape or any(w.kind in ("ident", "op") and w.text != g.text for w, g in zip(want, got)):
        raise ModelError(f"[{reading}] {sent!r} does not have the tokens of its template {template!r}: a value "
                         "ended its string or added to the query")
    for n, (w, g) in enumerate(zip(want, got)):
        if w.kind != "string":
            continue
        decoded = decode_string(g.text)
        refs = list(_VARIABLE.finditer(w.text[1:-1]))
        if not refs:
            continue
        ref = refs[0]
        if len(refs) > 1 or ref.span() != (0, len(w.text) - 2):
            raise ModelError(f"{w.text}: a string of more than one variable is not modelled")
        name = ref.group(1) or ref.group(2) or ref.group(4)
        op = want[n - 1].text if n else ""
        value = values.get(name)
        if value is None:
            continue  # not a dashboard variable (a macro): its own check
        if op in ("=", "!="):
            if isinstance(value, (list, _CustomAll)) and not (isinstance(value, list) and len(value) == 1):
                raise ModelError(f"[{reading}] ${name} {op} {g.text}: several values or All in an exact matcher")
            expected = value[0] if isinstance(value, list) else value
            if decoded != expected:
                raise ModelError(f"[{reading}] {name} {op} {g.text} matches {decoded!r}, not the value "
                                 f"{expected!r}")
        elif op in ("=~", "!~"):
            if isinstance(value, _CustomAll):
                if decoded != value.text:
                    raise ModelError(f"[{reading}] ${name} All: {decoded!r}, not its all value {value.text!r}")
                continue
            expected = value if isinstance(value, list) else [value]
            found = literal_alternatives(decoded)
            if found is None or sorted(found) != sorted(expected):
                raise ModelError(f"[{reading}] {name} {op} {g.text}: the regex {decoded!r} does not match "
                                 f"exactly {expected!r}")
        else:
            raise ModelError(f"{w.text} after {op!r}: a variable outside a label matcher is not modelled")


def go_duration(ms: int) -> str:
    """time.Duration.String() of whole milliseconds: 40s, 1m30s, 2m0s, 1h0m0s."""
    if ms % 1000:
        return f"{ms}ms" if ms < 1000 else f"{ms / 1000:g}s"
    s = ms // 1000
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    if h:
        return f"{h}h{m}m{sec}s"
    if m:
        return f"{m}m{sec}s"
    return f"{sec}s"


def _provisioned_prometheus() -> Tuple[Optional[str], Optional[str]]:
    """(uid, timeInterval) of the Prometheus datasource the Thanos store provisions."""
    return _provisioned_datasource(THANOS_DATASOURCES, "prometheus")


@dataclass
class PromRequest:
    """One panel target as Grafana sends it to the Prometheus API."""
    ref_id: str
    expr: str
    legend: str
    hidden: bool
    instant: bool
    params: dict

    @property
    def path(self) -> str:
        return "/api/v1/query" if self.instant else "/api/v1/query_range"


class PrometheusDashboard(Dashboard12):
    """A PromQL dashboard opened as Grafana 12.4 (and 13: the Prometheus datasource is built in to
    both, with these rules) opens it: prom answers the Prometheus API, influx the annotations."""

    def __init__(self, board: dict, prom: PromSend, time_from_ms: int, time_to_ms: int, *,
                 influx=None, readings: Tuple[str, ...] = READINGS, scrape_interval: str | None = None,
                 prometheus_uid: str | None = None, **options):
        uid, interval = _provisioned_prometheus()
        self.prometheus_uid = prometheus_uid or uid
        self.scrape_interval = scrape_interval or interval or "15s"  # Grafana's default scrape interval
        self.readings = readings
        self._prom = prom
        self.prom_sent: list[tuple[str, dict]] = []

        def no_influx(query, rp=None):
            raise ModelError(f"an InfluxDB query without an InfluxDB to send it to: {query}")
        super().__init__(board, influx or no_influx, time_from_ms, time_to_ms, **options)

    # ---------------------------------------------------------------- sending

    def prom_send(self, path: str, params: dict) -> dict:
        self.prom_sent.append((path, params))
        body = self._prom(path, params)
        if body.get("status") != "success":
            raise ModelError(f"{path} {params}: {body}")
        return body

    def _is_prometheus(self, ds) -> bool:
        if not isinstance(ds, dict) or ds.get("type") != "prometheus":
            return False
        if self.prometheus_uid and ds.get("uid") != self.prometheus_uid:
            raise ModelError(f"datasource {ds!r} is not the provisioned Prometheus ({self.prometheus_uid})")
        return True

    # ---------------------------------------------------------------- interpolation

    def prom_interpolate(self, text: str, *, panel: dict | None = None, where: str = "panel") -> str:
        """The query Grafana sends for `text`, checked under every reading; the first reading's text."""
        sent = [self._prom_text(text, panel, where, reading) for reading in self.readings]
        values = {name: var.query_value() for name, var in self.variables.items()}
        for reading, query in zip(self.readings, sent):
            check_substitution(text, query, values, reading)
        return sent[0]

    def _prom_text(self, template: str, panel: dict | None, where: str, reading: str) -> str:
        def replace(m: re.Match) -> str:
            name = m.group(1) or m.group(2) or m.group(4)
            fmt = m.group(3) or m.group(6)
            if m.group(5):
                raise ModelError(f"{m.group(0)}: field paths of variables are not modelled")
            if name in self._pending:
                raise ModelError(f"{m.group(0)} is used before Grafana resolves ${name}: move it above its users")
            if name in self.variables:
                var = self.variables[name]
                value = var.query_value()
                if isinstance(value, _CustomAll):
                    return value.text  # a custom all value goes in as it is
                if fmt:
                    return apply_format(fmt, value, var.text, var.name)
                return interpolate_query_expr(value, var, reading)
            if name in MACROS:
                if fmt:
                    raise ModelError(f"{m.group(0)}: a format on a macro is not modelled")
                return self._macro(name, panel, where)
            raise ModelError(f"{m.group(0)} is neither a variable of the dashboard nor a macro of the "
                             "Prometheus datasource: Grafana leaves it in the query")
        return _VARIABLE.sub(replace, template)

    def _macro(self, name: str, panel: dict | None, where: str) -> str:
        range_ms = self.time_to_ms - self.time_from_ms
        if name == "__from":
            return str(self.time_from_ms)
        if name == "__to":
            return str(self.time_to_ms)
        if name.startswith("__range"):
            seconds = round(range_ms / 1000)
            return {"__range": f"{seconds}s", "__range_s": str(seconds), "__range_ms": str(range_ms)}[name]
        if where != "panel":
            raise ModelError(f"${name} in a {where} query: the interval Grafana uses there is not modelled")
        text, step_ms = self.step(panel)
        if name == "__interval":
            return text
        if name == "__interval_ms":
            return str(step_ms)
        rate_ms = self.rate_interval_ms(panel)
        return go_duration(rate_ms) if name == "__rate_interval" else str(rate_ms)

    def step(self, panel: dict | None) -> Tuple[str, int]:
        """($__interval, its ms): the panel's interval with the scrape interval as its least, never
        finer than range / 11000."""
        low = (panel or {}).get("interval") or self.scrape_interval
        if "$" in low:
            raise ModelError(f"panel min interval {low!r} holds a variable: not modelled")
        resolution = (panel or {}).get("maxDataPoints") or self.panel_width_px(panel) or 500
        text, ms = calculate_interval(self.time_to_ms - self.time_from_ms, resolution, low)
        safe = round_interval((self.time_to_ms - self.time_from_ms) / SAFE_RESOLUTION)
        if safe > ms:
            raise ModelError(f"interval {ms} ms below the safe {safe} ms: not modelled")
        return text, ms

    def rate_interval_ms(self, panel: dict | None) -> int:
        scrape = interval_to_ms(self.scrape_interval)
        return max(self.step(panel)[1] + scrape, 4 * scrape)

    # ---------------------------------------------------------------- variables

    def _query_options(self, var: Variable, spec: dict) -> list[tuple[str, str]]:
        if not self._is_prometheus(spec.get("datasource")):
            return super()._query_options(var, spec)
        if spec.get("refresh", 1) == 0:
            raise ModelError(f"${var.name}: a Prometheus variable never refreshed is not modelled")
        query = spec.get("query")
        if isinstance(query, dict):
            query = query.get("query")
        m = re.fullmatch(r"\s*label_values\((?:(.*),\s*)?(\w+)\)\s*", query or "", re.S)
        if not m:
            raise ModelError(f"${var.name}: {query!r}: only label_values() variables are modelled")
        selector, label = m.group(1), m.group(2)
        params = {"start": str(math.floor(self.time_from_ms / 1000)), "end": str(math.floor(self.time_to_ms / 1000))}
        if selector:
            sent = self.prom_interpolate(selector, where="variable")
            var.request = f"label_values({sent}, {label})"
            params["match[]"] = sent
        else:
            var.request = f"label_values({label})"
        texts = [str(v) for v in self.prom_send(f"/api/v1/label/{label}/values", params)["data"]]
        regex = spec.get("regex")
        if regex:
            regex = self._frontend(regex, "variable", None, "regex")
        return options_from_texts(texts, regex, int(spec.get("sort") or 0))

    # ---------------------------------------------------------------- panels

    def is_influx_panel(self, panel: dict) -> bool:
        """A panel of the InfluxDB datasource in a PromQL dashboard (Grafana picks the datasource per
        panel): its queries are Dashboard12's, with its rules and checks."""
        ds = panel.get("datasource")
        return isinstance(ds, dict) and ds.get("type") == "influxdb"

    def panel_requests(self, panel: dict) -> list[PromRequest]:
        if self.is_influx_panel(panel):
            return super().panel_requests(panel)
        requests = []
        for title, ref_id, target in checked_targets(panel):
            what = f"panel {title!r} target {ref_id}"
            if not self._is_prometheus(target.get("datasource") or panel.get("datasource")):
                raise ModelError(f"{what}: not the Prometheus datasource")
            if target.get("editorMode") not in (None, "code"):
                raise ModelError(f"{what}: builder-mode queries are not modelled")
            if not target.get("expr"):
                raise ModelError(f"{what}: empty expr")
            if target.get("range") and target.get("instant"):
                raise ModelError(f"{what}: both a range and an instant query: not modelled")
            expr = self.prom_interpolate(target["expr"], panel=panel)
            instant = bool(target.get("instant"))
            _, step_ms = self.step(panel)
            step = step_ms // 1000 or 1
            end = math.floor(self.time_to_ms / 1000 / step) * step
            # An instant query is evaluated at the end of the range as it is; a range query's
            # start and end are floored to its step.
            params = {"query": expr, "time": str(self.time_to_ms / 1000)} if instant else {
                "query": expr, "start": str(math.floor(self.time_from_ms / 1000 / step) * step),
                "end": str(end), "step": str(step)}
            requests.append(PromRequest(ref_id, expr, target.get("legendFormat") or "", bool(target.get("hide")),
                                        instant, params))
        return requests

    def run_panel(self, panel: dict) -> dict[str, list[dict]]:
        """refId -> the API's result (each {metric, values or value}) of each visible target; of an
        InfluxDB panel, its InfluxDB series (Dashboard12.run_panel)."""
        if self.is_influx_panel(panel):
            return super().run_panel(panel)
        return {r.ref_id: self.prom_send(r.path, r.params)["data"]["result"]
                for r in self.panel_requests(panel) if not r.hidden}

    def series_names(self, request: PromRequest, result: list[dict]) -> list[str]:
        """Each series' legend: {{label}} replaced by its value (an absent label: empty)."""
        return [re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: one["metric"].get(m.group(1), ""), request.legend)
                for one in result]



class PrometheusDashboard13(PrometheusDashboard, Dashboard13):
    """Grafana 13: the Prometheus datasource as in 12.4 (built in to both, the same code); the v2
    conversion's losses refused and the InfluxDB annotations read by the grafana-influxdb-datasource
    plugin's rules (grafana13.py)."""


RULE_SETS = {"grafana12.4": PrometheusDashboard, "grafana13": PrometheusDashboard13}
