"""A rule entry (rules.py) to Grafana 12's file-provisioning format for alert
rules, and that format to YAML text.

Each rule becomes the same small pipeline, so every rule reads alike in
Grafana's editor and in the file:

    A, B ...   InfluxQL queries (the provisioned InfluxDB datasource), each over
               its own window of the recent past (relativeTimeRange), one
               series per alert instance (GROUP BY the instance's tags); in
               the Prometheus modes, the rules on Spark's metrics read them
               with PromQL instead (PromQuery: the Thanos or the user's store,
               an instant query over [$__range], one series per instance by
               its labels)
    LastA ...  reduce: the last value of each series; a null becomes 0 (mode
               replaceNN), so a missing field reads as "nothing wrong" and
               never as NaN, which Grafana counts as firing
    VALUE      math over the reductions ($A stands for LastA): the number
               the messages show ({{ $values.VALUE.Value }})
    FIRING     the condition: a threshold on VALUE, or a math expression over
               the reductions where a ratio must not divide by zero

Grafana facts this relies on (docs/grafana.md, "Alerting"): the InfluxDB
datasource replaces $timeFilter with the query's own time range; a query that
returns no series makes the whole evaluation NoData (noDataState OK: quiet);
a condition of 0 is Normal, anything else (NaN and Inf too) is Alerting.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from sparkscope.dashboards.queries import DATASOURCE, EXPRESSION
from sparkscope.dashboards.reads import PROMETHEUS_DATASOURCE

ORG_ID = 1
FOLDER = "Spark"  # the dashboards' folder (grafana/provisioning/dashboards/sparkscope.yaml)
GROUP = "sparkscope"
# Where the condition is NoData (a query found no series: no run, no event)
# the rule is quiet; where InfluxDB cannot be queried it is an Error, which
# Grafana reports as its own DatasourceError alert.
NO_DATA_STATE = "OK"
EXEC_ERR_STATE = "Error"
# Reductions replace a null (a field missing from a point) by this value.
NULL_AS = 0


@dataclass(frozen=True)
class Query:
    """One InfluxQL query over the last `window_s` seconds; $timeFilter is that window."""
    influxql: str
    window_s: int


@dataclass(frozen=True)
class PromQuery:
    """One PromQL instant query over the last `window_s` seconds (the Prometheus
    modes' twin of a Query on Spark's metrics): Grafana's Prometheus backend
    writes $__range as the window and evaluates the query at its end."""
    promql: str
    window_s: int


@dataclass(frozen=True)
class Above:
    """FIRING when VALUE is above this number (Grafana's threshold expression, gt)."""
    value: float


@dataclass(frozen=True)
class AlertRule:
    """One rule: what to query, what number to show, when it fires, and what to tell."""
    uid: str
    title: str
    queries: dict[str, Union[Query, PromQuery]]  # refId -> query; refIds A, B, ...
    value: str                          # math over $A, $B ... (their last values)
    fires: Union[Above, str]            # a threshold on VALUE, or math over $A, $B ...
    for_s: int
    summary: str                        # one line, Go template ($labels, $values)
    description: str                    # what it means and what to do
    severity: str                       # warning | critical
    component: str                      # spark | stack
    panel: Optional[str] = None         # title of the live dashboard's panel to link
    url_vars: tuple[str, ...] = ()      # labels that pick the panel's variables (var-<label>)
    extra_labels: dict[str, str] = field(default_factory=dict)


def reduced(ref: str) -> str:
    # Letters only: a $name in a math expression is read up to the first character that is
    # not a letter by Grafana 11's lexer (12's also takes digits and _).
    return f"Last{ref}"


def _over_reductions(expression: str, refs: list[str]) -> str:
    """$A -> $LastA for the rule's own query refIds; anything else is an error."""
    def swap(m: re.Match) -> str:
        if m.group(1) not in refs:
            raise ValueError(f"{expression!r}: ${m.group(1)} is not one of the rule's queries {refs}")
        return "$" + reduced(m.group(1))
    return re.sub(r"\$([A-Za-z_]\w*)", swap, expression)


def _expression(ref: str, model: dict[str, Any]) -> dict[str, Any]:
    return {"refId": ref, "datasourceUid": EXPRESSION["uid"],
            "model": {"refId": ref, "datasource": dict(EXPRESSION), **model}}


def duration(seconds: int) -> str:
    """Seconds as Grafana's duration text: 90 -> 1m30s, 3600 -> 1h, 0 -> 0s."""
    if seconds == 0:
        return "0s"
    out = ""
    for unit, size in (("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            out += f"{seconds // size}{unit}"
            seconds %= size
    return out


def panel_link(dashboard_uid: str, panel_id: int, url_vars: tuple[str, ...], lookback_s: int) -> str:
    """A Go template of the panel's URL on this Grafana, with the alert's run (and
    executor, device) picked: externalURL is Grafana's root_url."""
    params = [f"var-{name}={{{{ urlquery (index $labels \"{name}\") }}}}" for name in url_vars]
    params += [f"from=now-{duration(lookback_s)}", "to=now", f"viewPanel=panel-{panel_id}"]
    return ('{{ reReplaceAll "/+$" "" externalURL }}' + f"/d/{dashboard_uid}?" + "&".join(params))


def rule_model(rule: AlertRule, dashboard_uid: str, panels: dict[str, int]) -> dict[str, Any]:
    """The rule as Grafana's file format (groups[].rules[]) writes it."""
    refs = list(rule.queries)
    if refs != [chr(ord("A") + i) for i in range(len(refs))]:
        raise ValueError(f"{rule.uid}: queries must be named A, B, C ... in order, got {refs}")
    data: list[dict[str, Any]] = []
    for ref, query in rule.queries.items():
        if isinstance(query, PromQuery):
            data.append({"refId": ref, "relativeTimeRange": {"from": query.window_s, "to": 0},
                         "datasourceUid": PROMETHEUS_DATASOURCE["uid"],
                         "model": {"refId": ref, "datasource": dict(PROMETHEUS_DATASOURCE), "editorMode": "code",
                                   "expr": query.promql, "instant": True, "range": False}})
            continue
        data.append({"refId": ref, "relativeTimeRange": {"from": query.window_s, "to": 0},
                     "datasourceUid": DATASOURCE["uid"],
                     "model": {"refId": ref, "datasource": dict(DATASOURCE), "rawQuery": True,
                               "query": query.influxql, "resultFormat": "time_series"}})
    for ref in refs:
        data.append(_expression(reduced(ref), {"type": "reduce", "expression": ref, "reducer": "last",
                                               "settings": {"mode": "replaceNN", "replaceWithValue": NULL_AS}}))
    data.append(_expression("VALUE", {"type": "math", "expression": _over_reductions(rule.value, refs)}))
    if isinstance(rule.fires, Above):
        data.append(_expression("FIRING", {"type": "threshold", "expression": "VALUE",
                                           "conditions": [{"evaluator": {"type": "gt",
                                                                         "params": [rule.fires.value]}}]}))
    else:
        data.append(_expression("FIRING", {"type": "math", "expression": _over_reductions(rule.fires, refs)}))

    annotations = {"summary": rule.summary, "description": rule.description}
    out: dict[str, Any] = {"uid": rule.uid, "title": rule.title, "condition": "FIRING", "data": data}
    if rule.panel is not None:
        if rule.panel not in panels:
            raise ValueError(f"{rule.uid}: the live dashboard has no panel titled {rule.panel!r}")
        lookback = max(1800, 2 * max(q.window_s for q in rule.queries.values()))
        annotations["panel_url"] = panel_link(dashboard_uid, panels[rule.panel], rule.url_vars, lookback)
        out["dashboardUid"] = dashboard_uid
        out["panelId"] = panels[rule.panel]
    out.update({"noDataState": NO_DATA_STATE, "execErrState": EXEC_ERR_STATE, "for": duration(rule.for_s),
                "annotations": annotations,
                "labels": {"source": "sparkscope", "component": rule.component, "severity": rule.severity,
                           **rule.extra_labels},
                "isPaused": False})
    return out


def rules_file(rules: list[AlertRule], interval_s: int, dashboard_uid: str,
               panels: dict[str, int]) -> dict[str, Any]:
    uids = [r.uid for r in rules]
    if len(set(uids)) != len(uids):
        raise ValueError(f"rule uids must be unique: {uids}")
    return {"apiVersion": 1,
            "groups": [{"orgId": ORG_ID, "name": GROUP, "folder": FOLDER, "interval": duration(interval_s),
                        "rules": [rule_model(r, dashboard_uid, panels) for r in rules]}]}
