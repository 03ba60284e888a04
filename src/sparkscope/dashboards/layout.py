"""Panels and rows to Grafana's dashboard JSON: the grid, the variables, the
annotations. Grafana's numeric codes are named here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from sparkscope.dashboards.queries import APP, DATASOURCE, source

SCHEMA_VERSION = 38
GRID_COLUMNS = 24  # a dashboard row is 24 units wide
# Template variables: refresh 2 = re-run the query when the time range changes;
# sort 1 = alphabetical, 2 = alphabetical descending, 3 = numerical.
REFRESH_ON_TIME_RANGE = 2
SORT_ALPHABETICAL, SORT_ALPHABETICAL_DESC, SORT_NUMERICAL = 1, 2, 3

@dataclass
class Panel:
    title: str
    description: str
    targets: list[dict[str, Any]]
    unit: str
    kind: str = "timeseries"  # timeseries | stat | table
    width: int = 12
    height: int = 8
    hidden_refs: tuple[str, ...] = ()
    stacked: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    decimals: Optional[int] = None
    legend_calcs: tuple[str, ...] = ("mean", "max", "lastNotNull")
    overrides: list[dict[str, Any]] = field(default_factory=list)
    min: Optional[float] = 0
    transformations: list[dict[str, Any]] = field(default_factory=list)
    links: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Row:
    title: str
    panels: list[Panel]
    collapsed: bool = False


def _panel_json(panel: Panel, panel_id: int, x: int, y: int) -> dict[str, Any]:
    targets = []
    for index, target in enumerate(panel.targets):
        ref = chr(ord("A") + index)
        t = dict(target, refId=ref)
        if ref in panel.hidden_refs:
            t["hide"] = True
        targets.append(t)
    defaults: dict[str, Any] = {"unit": panel.unit}
    if panel.min is not None:
        defaults["min"] = panel.min
    if panel.decimals is not None:
        defaults["decimals"] = panel.decimals
    if panel.links:
        defaults["links"] = panel.links
    out: dict[str, Any] = {
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": DATASOURCE,
        "gridPos": {"h": panel.height, "w": panel.width, "x": x, "y": y},
        "targets": targets,
    }
    if panel.kind == "timeseries":
        defaults["custom"] = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10 if panel.stacked else 0,
                              "showPoints": "never", "spanNulls": 30000,
                              "stacking": {"mode": "normal" if panel.stacked else "none", "group": "A"}}
        out["options"] = {
            "legend": {"displayMode": "table", "placement": "bottom", "showLegend": True,
                       "calcs": list(panel.legend_calcs)},
            "tooltip": {"mode": "multi", "sort": "desc"},
        }
    elif panel.kind == "stat":
        out["options"] = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                          "colorMode": "none", "graphMode": "none", "textMode": "value_and_name",
                          "justifyMode": "auto", "orientation": "auto"}
    elif panel.kind == "table":
        out["options"] = {"showHeader": True, "cellHeight": "sm", "footer": {"show": False}}
    out["options"] = {**out.get("options", {}), **panel.options}
    out["fieldConfig"] = {"defaults": defaults, "overrides": panel.overrides}
    if panel.transformations:
        out["transformations"] = panel.transformations
    return out


def _layout(rows: list[Row]) -> list[dict[str, Any]]:
    panels: list[dict[str, Any]] = []
    next_id = 1
    y = 0
    for row in rows:
        row_json = {"id": next_id, "type": "row", "title": row.title, "collapsed": row.collapsed,
                    "gridPos": {"h": 1, "w": GRID_COLUMNS, "x": 0, "y": y}, "panels": []}
        next_id += 1
        panels.append(row_json)
        y += 1
        x, line_height = 0, 0
        for panel in row.panels:
            if x + panel.width > GRID_COLUMNS:
                x, y = 0, y + line_height
                line_height = 0
            body = _panel_json(panel, next_id, x, y)
            next_id += 1
            (row_json["panels"] if row.collapsed else panels).append(body)
            x += panel.width
            line_height = max(line_height, panel.height)
        y += line_height
    return panels


def _variable(name: str, label: str, query: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "label": label, "type": "query", "datasource": DATASOURCE,
            "query": query, "definition": query, "refresh": REFRESH_ON_TIME_RANGE, "sort": SORT_ALPHABETICAL, "multi": False,
            "includeAll": False, "current": {}, "options": [], "hide": 0, **extra}


def _variables(with_executors: bool) -> list[dict[str, Any]]:
    out = [
        _variable("username", "Prefix",
                  'SHOW TAG VALUES FROM "JVMHeapMemory" WITH KEY = "username"',
                  description="spark.metrics.conf.*.sink.graphite.prefix of the application ('none' when unset)."),
        # Standalone (app-<yyyyMMddHHmmss>-n), local (local-<epoch ms>) and YARN
        # (application_<epoch ms>_n) ids carry their start time, so reverse
        # alphabetical order puts the newest first, and the default (the first)
        # is the run just started. Kubernetes ids (spark-<hex>) do not.
        _variable("applicationid", "Application",
                  'SHOW TAG VALUES FROM "JVMHeapMemory" WITH KEY = "applicationid" '
                  'WHERE "username" =~ /^$username$/ AND $timeFilter',
                  sort=SORT_ALPHABETICAL_DESC,
                  description="Newest first (the ids of standalone, local and YARN apps start with their "
                              "start time). The 'Applications' table names each run."),
    ]
    if with_executors:
        out.append(_variable(
            "executorid", "Executor",
            'SHOW TAG VALUES FROM "JVMHeapMemory" WITH KEY = "executorid" WHERE "applicationid" =~ /^$applicationid$/',
            sort=SORT_NUMERICAL, multi=True, includeAll=True, allValue=".*",
            current={"selected": True, "text": ["All"], "value": ["$__all"]},
            description="Executors of the application; 'driver' is the driver JVM."))
        out.append({
            "name": "interval", "label": "Interval", "type": "interval", "auto": True, "auto_count": 200,
            "auto_min": "10s", "query": "10s,30s,1m,5m,15m,1h", "refresh": REFRESH_ON_TIME_RANGE, "hide": 0,
            "current": {"selected": False, "text": "auto", "value": "$__auto_interval_interval"},
            "options": [],
            "description": "Bucket size of the graphs; keep it at or above the sink period "
                           "(*.sink.graphite.period: 5 s in spark-conf/metrics.properties)."})
    return out


def _annotations() -> list[dict[str, Any]]:
    def events(name: str, measurement: str, color: str, enable: bool, where: str = "") -> dict[str, Any]:
        query = (f'SELECT "text", "end_time_ms", "status" FROM {source(measurement)} WHERE {APP} '
                 f"AND \"status\" <> 'RUNNING'{where} AND $timeFilter")
        return {"name": name, "datasource": DATASOURCE, "enable": enable, "hide": False, "iconColor": color,
                "target": {"query": query, "rawQuery": True, "fromAnnotations": True, "textColumn": "text",
                           "tagsColumn": "status", "timeEndColumn": "end_time_ms"}}

    executor_query = (f'SELECT "text", "event" FROM "sparkscope_executor" WHERE {APP} AND $timeFilter')
    return [
        events("SQL queries", "sparkscope_query", "#5794F2", True),
        events("Jobs", "sparkscope_job", "#B877D9", False),
        events("Stages", "sparkscope_stage", "#73BF69", False),
        events("Straggler stages", "sparkscope_stage", "#F2495C", True, " AND \"straggler\" = 'true'"),
        {"name": "Executors added/removed", "datasource": DATASOURCE, "enable": True, "hide": False,
         "iconColor": "#FF9830",
         "target": {"query": executor_query, "rawQuery": True, "fromAnnotations": True, "textColumn": "text",
                    "tagsColumn": "event"}},
    ]


def dashboard(uid: str, title: str, description: str, rows: list[Row], with_executors: bool,
              time_from: str, refresh: str) -> dict[str, Any]:
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["spark", "sparkscope"],
        "timezone": "browser",
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "editable": False,
        "graphTooltip": 1,
        "refresh": refresh,
        "time": {"from": time_from, "to": "now"},
        "templating": {"list": _variables(with_executors)},
        "annotations": {"list": _annotations()},
        "links": [{"title": "Spark dashboards", "type": "dashboards", "tags": ["sparkscope"], "asDropdown": False,
                   "includeVars": True, "keepTime": True}],
        "panels": _layout(rows),
    }
