"""Panels and rows to Grafana's dashboard JSON: the grid, the variables, the
annotations. Grafana's numeric codes are named here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from sparkscope.dashboards.reads import INFLUXQL, is_read, rendered
from sparkscope.dashboards.queries import (APP, DATASOURCE, PROBE_DEVICE, WHOLE_DISKS, WHOLE_MINUTES, newest_first,
                                           range_max, source)
from sparkscope.store.schema import (ALL_EXECUTORS, BLOCK_OUTLIER, DISKIO_MEASUREMENT, EXECUTOR_MEASUREMENT,
                                     JOB_MEASUREMENT, JVM_HEAP_MEMORY, META_POLICY, PEAK_LEVEL,
                                     PEAK_SOURCE_MEASUREMENT, QUERY_MEASUREMENT, RAW_POLICY, RESOLUTION_MEASUREMENT,
                                     STAGE_MEASUREMENT, STREAMING_QUERY_MEASUREMENT, TASK_SCOPE_MEASUREMENT,
                                     TASK_TOTALS_PREFIX)

SCHEMA_VERSION = 38
GRID_COLUMNS = 24  # a dashboard row is 24 units wide
# Template variables: refresh 2 = re-run the query when the time range changes;
# sort 0 = as the query returns them, 1 = alphabetical, 3 = numerical.
REFRESH_ON_TIME_RANGE = 2
SORT_AS_QUERIED, SORT_ALPHABETICAL, SORT_NUMERICAL = 0, 1, 3
# Per-executor legends list the executors with the highest peak first, so the
# ones that matter stay on top when a panel has a hundred of them.
LEGEND_SORT = "Max"

@dataclass
class Panel:
    title: str
    description: str
    targets: list[dict[str, Any]]
    unit: str
    kind: str = "timeseries"  # timeseries | stat | table | flamegraph
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
    # Shown instead of "No data" where nothing is the honest answer (no task running now).
    no_value: Optional[str] = None
    # The name a single-series stat shows (an expression's series is named by its refId).
    display_name: Optional[str] = None
    # Query, job and stage regions are drawn on this panel (dense runs would
    # drown every graph in dashed lines); straggler stages and executor
    # changes are drawn on every graph.
    annotated: bool = False
    # Block I/O outliers (the probe's slow I/Os) are marked on this panel.
    io_outliers: bool = False


@dataclass
class Row:
    title: str
    panels: list[Panel]
    collapsed: bool = False


def _panel_json(panel: Panel, panel_id: int, x: int, y: int, dialect: str = INFLUXQL,
                datasource: dict[str, str] = DATASOURCE) -> dict[str, Any]:
    targets: list[dict[str, Any]] = []
    for target in panel.targets:
        for body, hidden in rendered(target, dialect, chr(ord("A") + len(targets))):
            ref = chr(ord("A") + len(targets))
            t = dict(body, refId=ref)
            if hidden or ref in panel.hidden_refs:
                t["hide"] = True
            targets.append(t)
    defaults: dict[str, Any] = {"unit": panel.unit}
    if panel.min is not None:
        defaults["min"] = panel.min
    if panel.decimals is not None:
        defaults["decimals"] = panel.decimals
    if panel.links:
        defaults["links"] = panel.links
    if panel.no_value is not None:
        defaults["noValue"] = panel.no_value
    if panel.display_name is not None:
        defaults["displayName"] = panel.display_name
    out: dict[str, Any] = {
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": datasource,
        "gridPos": {"h": panel.height, "w": panel.width, "x": x, "y": y},
        "targets": targets,
    }
    if panel.kind == "timeseries":
        defaults["custom"] = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10 if panel.stacked else 0,
                              "showPoints": "never", "spanNulls": 30000,
                              "stacking": {"mode": "normal" if panel.stacked else "none", "group": "A"}}
        out["options"] = {
            "legend": {"displayMode": "table", "placement": "bottom", "showLegend": True,
                       "calcs": list(panel.legend_calcs),
                       **({"sortBy": LEGEND_SORT, "sortDesc": True} if "max" in panel.legend_calcs else {})},
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


def _layout(rows: list[Row], dialect: str = INFLUXQL, datasource: dict[str, str] = DATASOURCE,
            ) -> tuple[list[dict[str, Any]], list[int], list[int]]:
    """The panels' JSON, the ids of the panels that show query, job and stage
    regions, and the ids of those that mark block I/O outliers."""
    panels: list[dict[str, Any]] = []
    annotated: list[int] = []
    io_marked: list[int] = []
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
            # A panel of a PromQL dashboard that reads something Thanos does not hold (events,
            # strings, the annotator's points) is an InfluxDB panel: Grafana picks the datasource per panel.
            if dialect == INFLUXQL or all(is_read(t) for t in panel.targets):
                body = _panel_json(panel, next_id, x, y, dialect, datasource)
            else:
                body = _panel_json(panel, next_id, x, y, INFLUXQL, DATASOURCE)
            if panel.annotated:
                annotated.append(next_id)
            if panel.io_outliers:
                io_marked.append(next_id)
            next_id += 1
            (row_json["panels"] if row.collapsed else panels).append(body)
            x += panel.width
            line_height = max(line_height, panel.height)
        y += line_height
    return panels, annotated, io_marked


def variable(name: str, label: str, query: str, **extra: Any) -> dict[str, Any]:
    """A query variable of the InfluxDB datasource (a dashboard module's own: Dashboard's extra_variables)."""
    return _variable(name, label, query, **extra)


def _variable(name: str, label: str, query: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "label": label, "type": "query", "datasource": DATASOURCE,
            "query": query, "definition": query, "refresh": REFRESH_ON_TIME_RANGE, "sort": SORT_ALPHABETICAL, "multi": False,
            "includeAll": False, "current": {}, "options": [], "hide": 0, **extra}


def _resolution(column: str, name: str, description: str) -> dict[str, Any]:
    """A hidden variable from stack/rollups.py's lookup (RESOLUTIONS): the
    finest resolution whose range covers the time range."""
    query = (f'SELECT "{column}" FROM "{META_POLICY}"."{RESOLUTION_MEASUREMENT}" '
             'WHERE "up_to_ms" >= ${__to} - ${__from} LIMIT 1')
    return _variable(name, name, query, hide=2, sort=SORT_AS_QUERIED, description=description)


def _peak_source() -> list[dict[str, Any]]:
    """Hidden: where queries.range_max reads the whole minutes of a range.
    The driver's heap samples in those minutes, counted raw and as the minute
    rollup's "samples"; $peak_rp is the rollup when the two agree, raw
    samples otherwise (stack/rollups.py). The driver stands for all: a hole
    in the rollup (InfluxDB down or busy, Telegraf's buffer replayed late, no
    continuous query) is a time, the same for every series. A count with no
    samples is empty, hence the leading 0 (08640 reads as 8640)."""
    driver = f"{APP} AND \"executorid\" = 'driver' AND {WHOLE_MINUTES}"
    gap = "0$peak_raw_samples - 0$peak_rolled_samples"
    return [
        _variable("peak_raw_samples", "peak_raw_samples",
                  f'SELECT count("value") FROM "{RAW_POLICY}"."{JVM_HEAP_MEMORY}" WHERE {driver}', hide=2,
                  sort=SORT_AS_QUERIED, description="The driver's raw heap samples in the range's whole minutes."),
        _variable("peak_rolled_samples", "peak_rolled_samples",
                  f'SELECT sum("samples") FROM "{PEAK_LEVEL}"."{JVM_HEAP_MEMORY}" WHERE {driver}', hide=2,
                  sort=SORT_AS_QUERIED,
                  description="The same samples as the minute rollup counted them."),
        _variable("peak_rp", "peak_rp",
                  f'SELECT "rp" FROM "{META_POLICY}"."{PEAK_SOURCE_MEASUREMENT}" '
                  f'WHERE "lowest_gap" <= {gap} AND "highest_gap" >= {gap} LIMIT 1', hide=2,
                  sort=SORT_AS_QUERIED,
                  description="Where peaks read the range's whole minutes: the minute rollup when it holds every "
                              "raw sample of them, raw samples otherwise. Its edges are always raw."),
    ]


def _executor_cores() -> dict[str, Any]:
    """Hidden: the cores of the run's executors, from the annotator's newest
    added event (every executor of a run gets spark.executor.cores; in local
    mode the driver's). Slots held are the JVMs reporting times this; empty
    without the annotator, hence the leading 0 where it is used (queries.slots_held)."""
    return _variable("executor_cores", "executor_cores",
                     f'SELECT last("cores") FROM "{EXECUTOR_MEASUREMENT}" WHERE {APP} AND "event" = \'added\'',
                     hide=2, sort=SORT_AS_QUERIED,
                     description="Cores per executor of the run (the annotator's executor added events): slots "
                                 "held are executors reporting x this.")


def _task_scope() -> list[dict[str, Any]]:
    """Hidden: whether the task time graph reads the annotator's
    per-application totals or each executor's counters (stack/rollups.py,
    TASK_SCOPE_MEASUREMENT). $task_totals counts the totals' points in the
    range, at the graphs' resolution; empty when the run has none (no
    annotator), hence the leading 0 in $task_scope's query."""
    return [
        _variable("task_totals", "task_totals",
                  f'SELECT count("value") FROM "$rp"."{TASK_TOTALS_PREFIX}runTime.count" WHERE {APP} '
                  "AND $timeFilter", hide=2, sort=SORT_AS_QUERIED,
                  description="Points of the annotator's task time totals of this run in the range."),
        _variable("task_scope", "task_scope",
                  f'SELECT "executors" FROM "{META_POLICY}"."{TASK_SCOPE_MEASUREMENT}" '
                  'WHERE ("selection" =~ /^${executorid:regex}$/ AND "needs_totals" <= 0$task_totals) '
                  'OR "needs_totals" = 0 LIMIT 1', hide=2, sort=SORT_AS_QUERIED,
                  description=f"Task time by component reads the annotator's per-application totals when the "
                              f"Executor picker is All (its regex matches '{ALL_EXECUTORS}') and the run has "
                              "them, each picked executor's counters otherwise: a regex on executorid."),
    ]


def top_variable(label: str, description: str) -> dict[str, Any]:
    """$top: how many executors a panel lists (10, 20, 50 or all; 20 by default), a number
    in either dialect (InfluxQL's top(), PromQL's topk())."""
    return {
        "name": "top", "label": label, "type": "custom", "hide": 0,
        "query": "10,20,50,all : 100000", "multi": False, "includeAll": False,
        "current": {"selected": True, "text": "20", "value": "20"},
        "options": [{"selected": text == "20", "text": text, "value": value}
                    for text, value in (("10", "10"), ("20", "20"), ("50", "50"), ("all", "100000"))],
        "description": description,
    }


def _top_by_heap(label: str, description: str, peaks: str, drawn_description: str) -> list[dict[str, Any]]:
    """$top, how many executors to show (10, 20, 50 or all; 20 by default),
    and the hidden $drawn: the executors with the highest heap peaks, from
    `peaks` (a query of one "peak" per executor). At 500 executors a panel
    of every one is thousands of series that nobody reads one by one, and
    that InfluxDB and Grafana take up to seconds to serve over a day."""
    return [top_variable(label, description), _variable(
        "drawn", "drawn", f'SELECT "executorid" FROM (SELECT top("peak", "executorid", $top) FROM ({peaks}))',
        hide=2, sort=SORT_NUMERICAL, multi=True, includeAll=True,
        current={"selected": True, "text": ["All"], "value": ["$__all"]}, description=drawn_description)]


def _variables(with_executors: bool, top_shown: bool = False, rolled: bool = True) -> list[dict[str, Any]]:
    """with_executors: the live dashboard's Executor, Executors drawn and
    Device; top_shown: the summary's Executors shown; rolled: the graphs read
    the rollups through $rp and $mean_field (queries.raw_samples)."""
    out = [
        *([_resolution("rp", "rp", "Retention policy the Spark panels read for this time range: raw samples, or "
                                   "per-minute, 10-minute or 30-minute rollups of them (highest value and mean)."),
           _resolution("mean_field", "mean_field", "The field holding each interval's mean at that resolution.")]
          if rolled else []),
        _resolution("bucket", "bucket", "The graphs' bucket for this time range, never finer than the resolution "
                                        "they read: 10 s up to 1 h, 30 s up to 2 h, then 1, 10 or 30 minutes."),
        _variable("username", "Prefix",
                  f'SHOW TAG VALUES FROM "{JVM_HEAP_MEMORY}" WITH KEY = "username"',
                  multi=True, includeAll=True, allValue=".*",
                  current={"selected": True, "text": ["All"], "value": ["$__all"]},
                  description="spark.metrics.conf.*.sink.graphite.prefix of the application ('none' when "
                              "unset). All by default, so that no run is hidden behind a prefix."),
        # Runs in the time range, newest first by the time their first metric
        # arrived: ids alone do not sort by time (YARN's sequence numbers,
        # Kubernetes' hex ids, local vs standalone ids). The default is the
        # first, so the dashboard opens on the run that started last.
        # Raw samples, not $rp: in a rollup, runs that started in the same
        # bucket share a time and the outer SELECT keeps one of them (a 6 h
        # range of 10-minute points listed 36 of 359 runs).
        # The driver's samples only: it lives as long as its run, and one
        # series a run instead of one per JVM (at 10,000 runs in 6 h, one of
        # 500 executors, 91 ms against 216 straight from InfluxDB;
        # docs/performance.md). $peak_rp leans on the driver's samples too.
        _variable("applicationid", "Application",
                  newest_first("applicationid", f'SELECT first("value") FROM "{JVM_HEAP_MEMORY}" '
                               "WHERE \"username\" =~ /^${username:regex}$/ AND \"executorid\" = 'driver' "
                               'AND $timeFilter GROUP BY "applicationid"'),
                  sort=SORT_AS_QUERIED,
                  description="Runs in the time range whose driver sends metrics (spark-conf/metrics.properties "
                              "sets the sink for every instance), the newest first. The 'Applications' table "
                              "names each run."),
        *_peak_source(),
        _executor_cores(),
    ]
    if top_shown:
        by_executor = ' GROUP BY "executorid"'
        out += _top_by_heap(
            "Executors shown",
            "The sampled peak table lists at most this many executors: those with the highest heap peak in the "
            "time range (the driver among them). The stats, the sizing and work tables count every executor.",
            # Grafana's UI fills only the first $timeFilter of a variable's query
            # (panels' are filled by the server, every one): the range written out.
            f'SELECT max("v") AS "peak" FROM {range_max(JVM_HEAP_MEMORY, APP, by_executor)}{by_executor}'
            .replace("$timeFilter", "time >= ${__from}ms AND time <= ${__to}ms"),
            "The executors the sampled peak table lists: the Executors shown with the highest heap peak in the "
            "range, read as exactly as the table's own columns.")
    if with_executors:
        out.append(_variable(
            "executorid", "Executor",
            f'SHOW TAG VALUES FROM "{JVM_HEAP_MEMORY}" WITH KEY = "executorid" '
            'WHERE "applicationid" =~ /^${applicationid:regex}$/',
            sort=SORT_NUMERICAL, multi=True, includeAll=True, allValue=".*",
            current={"selected": True, "text": ["All"], "value": ["$__all"]},
            description="Executors of the application; 'driver' is the driver JVM."))
        out += _task_scope()
        out += _top_by_heap(
            "Executors drawn",
            "Graphs with a line per executor draw at most this many of the executors picked in Executor: those "
            "with the highest heap peak in the time range. Sums over executors (task time, task threads) and the "
            "stat panels count every picked one.",
            # The graphs' own resolution: a ranking needs no exact peak.
            f'SELECT max("value") AS "peak" FROM "$rp"."{JVM_HEAP_MEMORY}" WHERE {APP} '
            'AND "executorid" =~ /^${executorid:regex}$/ AND $timeFilter GROUP BY "executorid"',
            "The executors the per-executor graphs draw: of those picked, the Executors drawn with the highest "
            "heap peak in the range.")
        out.append(_variable(
            "device", "Device", f'SHOW TAG VALUES FROM "{DISKIO_MEASUREMENT}" WITH KEY = "name"',
            multi=True, includeAll=True, allValue=WHOLE_DISKS,
            current={"selected": True, "text": ["All"], "value": ["$__all"]},
            description="Block devices of the host panels. All = whole disks (sd*, vd*, nvme*n*, mmcblk*, md*, "
                        "dm-*): loop, ram and partitions are left out unless picked by name."))
    return out


def _annotations(annotated: list[int]) -> list[dict[str, Any]]:
    """Queries, jobs and stages as regions (start to end) on the panels in
    `annotated`; one still running is a single line at its start, tagged
    RUNNING. Straggler stages and executor changes go on every panel."""
    only_on = {"filter": {"exclude": False, "ids": annotated}} if annotated else {}

    def events(name: str, measurement: str, color: str, enable: bool, where: str = "",
               everywhere: bool = False) -> dict[str, Any]:
        query = (f'SELECT "text", "end_time_ms", "status"::tag FROM {source(measurement)} WHERE {APP}'
                 f"{where} AND $timeFilter")
        return {"name": name, "datasource": DATASOURCE, "enable": enable, "hide": False, "iconColor": color,
                **({} if everywhere else only_on),
                "target": {"query": query, "rawQuery": True, "fromAnnotations": True, "textColumn": "text",
                           "tagsColumn": "status", "timeEndColumn": "end_time_ms"}}

    executor_query = (f'SELECT "text", "event" FROM "{EXECUTOR_MEASUREMENT}" WHERE {APP} AND $timeFilter')
    return [
        events("SQL queries", QUERY_MEASUREMENT, "#5794F2", True),
        events("Jobs", JOB_MEASUREMENT, "#B877D9", False),
        events("Stages", STAGE_MEASUREMENT, "#73BF69", False),
        events("Straggler stages", STAGE_MEASUREMENT, "#F2495C", True,
               " AND \"straggler\" = 'true' AND \"status\"::tag <> 'RUNNING'", everywhere=True),
        events("Streaming queries", STREAMING_QUERY_MEASUREMENT, "#FADE2A", True, everywhere=True),
        {"name": "Executors added/removed", "datasource": DATASOURCE, "enable": True, "hide": False,
         "iconColor": "#FF9830",
         "target": {"query": executor_query, "rawQuery": True, "fromAnnotations": True, "textColumn": "text",
                    "tagsColumn": "event"}},
    ]


def _io_outlier_annotation(panel_ids: list[int]) -> dict[str, Any]:
    """The probe's slow I/Os as marks on the disk panels: device, direction,
    latency, size and the submitting process, so a slow disk lines up with
    the stage that ran."""
    query = f'SELECT "text", "direction" FROM "{BLOCK_OUTLIER}" WHERE {PROBE_DEVICE} AND $timeFilter'
    return {"name": "Slow block I/O", "datasource": DATASOURCE, "enable": True, "hide": False,
            "iconColor": "#FADE2A", "filter": {"exclude": False, "ids": panel_ids},
            "target": {"query": query, "rawQuery": True, "fromAnnotations": True, "textColumn": "text",
                       "tagsColumn": "direction"}}


def dashboard(uid: str, title: str, description: str, rows: list[Row], with_executors: bool,
              time_from: str, refresh: str, variables: Optional[list[dict[str, Any]]] = None,
              annotations: bool = True, top_shown: bool = False, rolled: bool = True,
              extra_variables: list[dict[str, Any]] = (), dialect: str = INFLUXQL,
              datasource: dict[str, str] = DATASOURCE) -> dict[str, Any]:
    """dialect and datasource: what the panels' queries are written in and
    sent to (reads.py); annotations always read the events from InfluxDB."""
    panels, annotated, io_marked = _layout(rows, dialect, datasource)
    marks = (_annotations(annotated) if annotations else []) + (
        [_io_outlier_annotation(io_marked)] if io_marked else [])
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
        "templating": {"list": (variables if variables is not None else _variables(with_executors, top_shown, rolled))
                       + list(extra_variables)},
        "annotations": {"list": marks},
        "links": [{"title": "Spark dashboards", "type": "dashboards", "tags": ["sparkscope"], "asDropdown": False,
                   "includeVars": True, "keepTime": True}],
        "panels": panels,
    }
