"""The Grafana dashboards in dashboards/, written as code.

Dashboards are data, checked in as JSON so that Grafana provisions them as
they are; this module is where they are edited. It keeps every panel to the
same rules (unit, description, legend by executor, gauges read with
mean/max/last and counters with non_negative_derivative) that a hand-edited
JSON file of forty panels would drift from. Regenerate after a change:

    .venv/bin/python -m sparkscope.dashboard_build

tests/test_dashboards.py fails when the checked-in files differ from what
this module writes, and runs every panel query against a real Spark run.

Schema: schemaVersion 38 (Grafana 10.0, what the native build serves), which
Grafana 12 (the compose image) migrates on load.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from sparkscope.settings import ROOT

DASHBOARDS_DIR = ROOT / "dashboards"
DATASOURCE = {"type": "influxdb", "uid": "sparkscope-influxdb"}
EXPRESSION = {"type": "__expr__", "uid": "__expr__"}
SCHEMA_VERSION = 38

# Counters: cumulative since the executor started. Read with
# non_negative_derivative (rates) or max (totals), never mean.
COUNTER_SUFFIXES = (".count",)
COUNTER_MEASUREMENTS = {
    "jvmCpuTime", "MinorGCCount", "MinorGCTime", "MajorGCCount", "MajorGCTime", "TotalGCTime",
    "G1-Young-Generation.count", "G1-Young-Generation.time", "G1-Old-Generation.count",
    "G1-Old-Generation.time",
    "net",  # Telegraf: bytes_recv and bytes_sent are cumulative per interface
}
# Hadoop FileSystem statistics: Dropwizard gauges whose value only grows.
COUNTER_PATTERNS = ("filesystem.",)

APP = '"applicationid" =~ /^$applicationid$/'
EXECUTORS = f'{APP} AND "executorid" =~ /^$executorid$/'
NOT_DRIVER = f"{APP} AND \"executorid\" != 'driver'"

# Spark settings named in panel descriptions.
NEEDS_SINK = "Needs the Graphite sink (spark-conf/metrics.properties)."
NEEDS_EXECUTOR_METRICS = ("Needs spark.metrics.executorMetricsSource.enabled=true (the default) and the "
                          "Graphite sink; polled every spark.executor.metrics.pollingInterval.")
NEEDS_PROCESS_TREE = ("Needs spark.executor.processTreeMetrics.enabled=true (Linux /proc only) and "
                      "the Graphite sink.")
NEEDS_APP_STATUS = "Needs spark.metrics.appStatusSource.enabled=true (driver) and the Graphite sink."
NEEDS_ANNOTATOR = ("Needs the sparkscope annotator: --jars sparkscope-annotator.jar and "
                   "spark.extraListeners=dev.sparkscope.annotator.AnnotatorListener.")
NEEDS_TELEGRAF = "From Telegraf's host inputs on the machine running the stack, not Spark."


def is_counter(measurement: str) -> bool:
    return (measurement.endswith(COUNTER_SUFFIXES) or measurement in COUNTER_MEASUREMENTS
            or measurement.startswith(COUNTER_PATTERNS))


# ---------------------------------------------------------------- queries

def gauge(measurement: str, alias: str = "$tag_executorid", agg: str = "mean",
          where: str = EXECUTORS) -> dict[str, Any]:
    """A gauge per executor: mean (or max) of each interval."""
    return _target(f'SELECT {agg}("value") FROM {_source(measurement)} WHERE {where} AND $timeFilter '
                   f'GROUP BY time($interval), "executorid" fill(none)', alias)


def rate(measurement: str, alias: str = "$tag_executorid", per: str = "1s", scale: str = "",
         where: str = EXECUTORS) -> dict[str, Any]:
    """A counter per executor as a rate: its increase per `per`, times `scale`."""
    return _target(f'SELECT non_negative_derivative(max("value"), {per}){scale} FROM {_source(measurement)} '
                   f'WHERE {where} AND $timeFilter GROUP BY time($interval), "executorid" fill(none)',
                   alias)


def summed_rate(measurement: str, alias: str, per: str = "1s", scale: str = "",
                where: str = EXECUTORS) -> dict[str, Any]:
    """A counter's rate summed over the selected executors."""
    inner = (f'SELECT non_negative_derivative(max("value"), {per}){scale} AS "r" FROM {_source(measurement)} '
             f'WHERE {where} AND $timeFilter GROUP BY time($interval), "executorid" fill(none)')
    return _target(f'SELECT sum("r") FROM ({inner}) WHERE $timeFilter GROUP BY time($interval) fill(none)',
                   alias)


def total(measurement: str, alias: str, where: str = NOT_DRIVER, scale: str = "") -> dict[str, Any]:
    """A counter's total over the application: each executor's last (max)
    value, summed. Counters start at 0 when an executor starts."""
    inner = (f'SELECT max("value"){scale} AS "v" FROM {_source(measurement)} WHERE {where} AND $timeFilter '
             'GROUP BY "executorid"')
    return _target(f'SELECT sum("v") FROM ({inner})', alias)


def peak(measurement: str, alias: str, where: str = NOT_DRIVER) -> dict[str, Any]:
    return _target(f'SELECT max("value") FROM {_source(measurement)} WHERE {where} AND $timeFilter', alias)


def per_executor_peak(measurement: str, column: str) -> dict[str, Any]:
    """One table column: each executor's highest value. sum() of the single
    maximum gives every column the same time, so a merge joins them by
    executor."""
    inner = (f'SELECT max("value") AS "v" FROM {_source(measurement)} WHERE {EXECUTORS} AND $timeFilter '
             'GROUP BY "executorid"')
    target = _target(f'SELECT sum("v") AS "{column}" FROM ({inner}) GROUP BY "executorid"', column)
    target["resultFormat"] = "table"
    return target


def raw(query: str, alias: str = "", result_format: str = "time_series") -> dict[str, Any]:
    target = _target(query, alias)
    target["resultFormat"] = result_format
    return target


def _source(measurement: str) -> str:
    """A measurement name, or a /regex/ matching several."""
    return measurement if measurement.startswith("/") else f'"{measurement}"'


def _target(query: str, alias: str) -> dict[str, Any]:
    return {"datasource": DATASOURCE, "rawQuery": True, "resultFormat": "time_series",
            "query": query, "alias": alias}


def math(expression: str) -> dict[str, Any]:
    """A Grafana server-side expression over the panel's other queries ($A, $B)."""
    return {"datasource": EXPRESSION, "type": "math", "expression": expression}


# ---------------------------------------------------------------- panels

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
                    "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []}
        next_id += 1
        panels.append(row_json)
        y += 1
        x, line_height = 0, 0
        for panel in row.panels:
            if x + panel.width > 24:
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
            "query": query, "definition": query, "refresh": 2, "sort": 1, "multi": False,
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
                  sort=2,
                  description="Newest first (the ids of standalone, local and YARN apps start with their "
                              "start time). The 'Applications' table names each run."),
    ]
    if with_executors:
        out.append(_variable(
            "executorid", "Executor",
            'SHOW TAG VALUES FROM "JVMHeapMemory" WITH KEY = "executorid" WHERE "applicationid" =~ /^$applicationid$/',
            sort=3, multi=True, includeAll=True, allValue=".*",
            current={"selected": True, "text": ["All"], "value": ["$__all"]},
            description="Executors of the application; 'driver' is the driver JVM."))
        out.append({
            "name": "interval", "label": "Interval", "type": "interval", "auto": True, "auto_count": 200,
            "auto_min": "10s", "query": "10s,30s,1m,5m,15m,1h", "refresh": 2, "hide": 0,
            "current": {"selected": False, "text": "auto", "value": "$__auto_interval_interval"},
            "options": [],
            "description": "Bucket size of the graphs; keep it at or above the sink period "
                           "(*.sink.graphite.period: 5 s in spark-conf/metrics.properties)."})
    return out


def _annotations() -> list[dict[str, Any]]:
    def events(name: str, measurement: str, color: str, enable: bool, where: str = "") -> dict[str, Any]:
        query = (f'SELECT "text", "end_time_ms", "status" FROM {_source(measurement)} WHERE {APP} '
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


# ---------------------------------------------------------------- live dashboard

def _applications_table() -> Panel:
    # The annotator writes a RUNNING point and a FINISHED point, both at the
    # start time: last() of each field takes whichever has it.
    query = ('SELECT last("app_name") AS "name", last("spark_user") AS "user", '
             'last("spark_version") AS "Spark", last("duration_ms") AS "run time" '
             'FROM "sparkscope_application" WHERE $timeFilter GROUP BY "applicationid"')
    return Panel(
        "Applications",
        "Applications started in the time range, newest first: start time, id, name, user, Spark version "
        "and run time (empty while it runs). Pick one in the Application variable above. " + NEEDS_ANNOTATOR,
        [raw(query, result_format="table")], "none", kind="table", width=24, height=5,
        options={"sortBy": [{"displayName": "Time", "desc": True}]},
        overrides=[{"matcher": {"id": "byName", "options": "run time"},
                    "properties": [{"id": "unit", "value": "ms"}]}],
        # A click on a row opens that run, here or in the summary.
        links=[{"title": "Live view of this application",
                "url": "/d/sparkscope-executors?var-username=${username}"
                       "&var-applicationid=${__data.fields.applicationid}&${__url_time_range}"},
               {"title": "Summary of this application",
                "url": "/d/sparkscope-application?var-username=${username}"
                       "&var-applicationid=${__data.fields.applicationid}&${__url_time_range}"}])


def live_rows() -> list[Row]:
    summary = Row("Summary: the selected application", [
        Panel("Active tasks now",
              "Tasks running right now, summed over the executors that still report (a dead executor stops "
              "reporting and drops out). Compare with executors x spark.executor.cores. " + NEEDS_SINK,
              [_target('SELECT sum("v") FROM (SELECT last("value") AS "v" FROM "threadpool.activeTasks" WHERE '
                       f'{APP} AND $timeFilter GROUP BY time($interval), "executorid" fill(none)) '
                       'WHERE $timeFilter GROUP BY time($interval) fill(none)', "active tasks")],
              "none", kind="stat", width=3, height=4, decimals=0,
              options={"graphMode": "area"}),
        Panel("Executors alive",
              "Executors (driver excluded) that reported in the latest interval. A drop means executors were "
              "lost or released (dynamic allocation). " + NEEDS_EXECUTOR_METRICS,
              [_target('SELECT count("v") FROM (SELECT last("value") AS "v" FROM "JVMHeapMemory" WHERE '
                       f'{NOT_DRIVER} AND $timeFilter GROUP BY time($interval), "executorid" fill(none)) '
                       'WHERE $timeFilter GROUP BY time($interval) fill(none)', "executors")],
              "none", kind="stat", width=3, height=4, decimals=0, options={"graphMode": "area"}),
        Panel("Task time",
              "Total time tasks ran and, of it, CPU time, summed over all executors since they started "
              "(executor source: runTime, cpuTime). Task time well above CPU time means tasks wait: on "
              "I/O, shuffle fetch, GC or locks. " + NEEDS_SINK,
              [total("runTime.count", "run time"), total("cpuTime.count", "CPU time", scale=" / 1000000")],
              "ms", kind="stat", width=4, height=4),
        Panel("GC share of task time",
              "JVM GC time during tasks over task run time, all executors (jvmGCTime / runTime). Above 10% "
              "the executors are short of heap: raise spark.executor.memory or cut cached data. " + NEEDS_SINK,
              [total("jvmGCTime.count", "GC"), total("runTime.count", "run"), math("$A / $B")],
              "percentunit", kind="stat", width=3, height=4, hidden_refs=("A", "B"), decimals=1),
        Panel("Failed tasks and stages",
              "Failed tasks and failed stages of the application so far (driver's appStatus source). "
              + NEEDS_APP_STATUS,
              [_target(f'SELECT max("value") FROM "tasks.failedTasks.count" WHERE {APP} AND $timeFilter',
                       "failed tasks"),
               _target(f'SELECT max("value") FROM "stages.failedStages.count" WHERE {APP} AND $timeFilter',
                       "failed stages")],
              "none", kind="stat", width=3, height=4, decimals=0),
        Panel("Peak executor heap",
              "Highest JVM heap used by any executor in the time range (ExecutorMetrics JVMHeapMemory); "
              "compare with spark.executor.memory. " + NEEDS_EXECUTOR_METRICS,
              [peak("JVMHeapMemory", "heap")], "bytes", kind="stat", width=4, height=4),
        Panel("Peak executor RSS",
              "Highest resident memory of any executor's JVM process in the time range (process tree). "
              "On YARN and Kubernetes the container is killed when RSS plus Python exceeds "
              "spark.executor.memory + spark.executor.memoryOverhead. " + NEEDS_PROCESS_TREE,
              [peak("ProcessTreeJVMRSSMemory", "RSS")], "bytes", kind="stat", width=4, height=4),
        _applications_table(),
    ])
    tasks = Row("Tasks and CPU, per executor", [
        Panel("Active tasks",
              "Tasks running on each executor (mean of the interval). A flat line below the executor's "
              "cores means idle slots; one executor busy while the others idle is skew. " + NEEDS_SINK,
              [gauge("threadpool.activeTasks")], "none", decimals=1),
        Panel("Executor CPU",
              "CPU used by each executor JVM, in cores (rate of JVMCPU jvmCpuTime): all threads, tasks, "
              "GC and JIT included. Near spark.executor.cores = CPU-bound. " + NEEDS_SINK,
              [rate("jvmCpuTime", scale=" / 1000000000")], "suffix: cores"),
        Panel("Task time by component",
              "Where task time goes, summed over the selected executors, in seconds per second (2 = two "
              "task slots busy). CPU well below run time points at the other lines: GC, deserialization, "
              "shuffle fetch wait (slow or remote shuffle reads), shuffle write. " + NEEDS_SINK,
              [summed_rate("runTime.count", "run time", scale=" / 1000"),
               summed_rate("cpuTime.count", "CPU", scale=" / 1000000000"),
               summed_rate("jvmGCTime.count", "GC", scale=" / 1000"),
               summed_rate("deserializeTime.count", "deserialize", scale=" / 1000"),
               summed_rate("shuffleFetchWaitTime.count", "shuffle fetch wait", scale=" / 1000"),
               summed_rate("shuffleWriteTime.count", "shuffle write", scale=" / 1000000000")],
              "suffix: s/s", width=24),
    ])
    memory = Row("Memory, per executor", [
        Panel("JVM heap used vs max",
              "Heap in use (ExecutorMetrics JVMHeapMemory, polled every "
              "spark.executor.metrics.pollingInterval) and the heap limit (jvm heap.max, about "
              "spark.executor.memory). Used touching max with rising GC time means the executor is short "
              "of memory. " + NEEDS_EXECUTOR_METRICS,
              [gauge("JVMHeapMemory", "$tag_executorid used"),
               gauge("heap.max", "$tag_executorid max", agg="max")], "bytes"),
        Panel("Process RSS: JVM, Python, other",
              "Resident memory of each executor's process tree: the JVM, its Python workers (PySpark UDFs) "
              "and any other children. This is what YARN and Kubernetes count against "
              "spark.executor.memory + memoryOverhead. " + NEEDS_PROCESS_TREE,
              [gauge("ProcessTreeJVMRSSMemory", "$tag_executorid JVM"),
               gauge("ProcessTreePythonRSSMemory", "$tag_executorid Python"),
               gauge("ProcessTreeOtherRSSMemory", "$tag_executorid other")], "bytes"),
        Panel("Unified memory, on-heap: execution + storage",
              "Spark's unified memory region on the heap: execution (joins, sorts, aggregations) and storage "
              "(cached blocks, broadcasts). Its size is (heap - 300 MB) x spark.memory.fraction; execution "
              "can evict storage down to spark.memory.storageFraction. " + NEEDS_EXECUTOR_METRICS,
              [gauge("OnHeapExecutionMemory", "$tag_executorid execution"),
               gauge("OnHeapStorageMemory", "$tag_executorid storage")], "bytes"),
        Panel("Unified memory, off-heap: execution + storage",
              "The same region off the heap; zero unless spark.memory.offHeap.enabled=true with "
              "spark.memory.offHeap.size. " + NEEDS_EXECUTOR_METRICS,
              [gauge("OffHeapExecutionMemory", "$tag_executorid execution"),
               gauge("OffHeapStorageMemory", "$tag_executorid storage")], "bytes"),
    ])
    gc = Row("Garbage collection, per executor", [
        Panel("GC time share",
              "Share of wall-clock time each JVM spent in minor (young) and major (old) collections "
              "(rate of ExecutorMetrics MinorGCTime, MajorGCTime). Major GC above a few percent, or minor "
              "above 10%, slows every task on the executor. " + NEEDS_EXECUTOR_METRICS,
              [rate("MinorGCTime", "$tag_executorid minor", scale=" / 1000"),
               rate("MajorGCTime", "$tag_executorid major", scale=" / 1000")], "percentunit"),
        Panel("GC count",
              "Collections per minute, minor and major, per executor (rate of MinorGCCount, MajorGCCount). "
              + NEEDS_EXECUTOR_METRICS,
              [rate("MinorGCCount", "$tag_executorid minor", per="1m"),
               rate("MajorGCCount", "$tag_executorid major", per="1m")], "cpm"),
    ])
    shuffle = Row("Shuffle, spill and I/O, per executor", [
        Panel("Shuffle read: local vs remote",
              "Shuffle bytes read per second by each executor's tasks, from its own host (local) and from "
              "other executors over the network (remote). High remote reads with high fetch wait above "
              "point at the network or at spark.reducer.maxSizeInFlight. " + NEEDS_SINK,
              [rate("shuffleLocalBytesRead.count", "$tag_executorid local"),
               rate("shuffleRemoteBytesRead.count", "$tag_executorid remote")], "Bps"),
        Panel("Shuffle write",
              "Shuffle bytes written per second by each executor's map tasks. " + NEEDS_SINK,
              [rate("shuffleBytesWritten.count")], "Bps"),
        Panel("Spill",
              "Bytes spilled per second: memory = size of the spilled data in memory, disk = what reached "
              "disk. Any spill means execution memory ran short: more partitions "
              "(spark.sql.shuffle.partitions) or more memory per task. " + NEEDS_SINK,
              [rate("memoryBytesSpilled.count", "$tag_executorid memory"),
               rate("diskBytesSpilled.count", "$tag_executorid disk")], "Bps"),
        Panel("File system read",
              "Bytes read per second through Hadoop file systems, per executor and scheme: file (local), "
              "hdfs, s3a when used. " + NEEDS_SINK,
              [rate(r"/^filesystem\.(file|hdfs|s3a)\.read_bytes$/", "$tag_executorid $m")],
              "Bps"),
        Panel("File system write",
              "Bytes written per second through Hadoop file systems, per executor and scheme: file, hdfs, "
              "s3a when used. " + NEEDS_SINK,
              [rate(r"/^filesystem\.(file|hdfs|s3a)\.write_bytes$/", "$tag_executorid $m")],
              "Bps"),
    ])
    host = Row("Host: the machine running the stack (Telegraf)", [
        Panel("CPU busy",
              "CPU time of the host by state, percent of all cores: user, system, iowait (waiting on disk), "
              "steal (taken by the hypervisor). " + NEEDS_TELEGRAF,
              [raw(f'SELECT mean("usage_{state}") FROM "cpu" WHERE "cpu" = \'cpu-total\' AND $timeFilter '
                   'GROUP BY time($interval), "host" fill(none)', f"$tag_host {state}")
               for state in ("user", "system", "iowait", "steal")],
              "percent", width=6, stacked=True),
        Panel("Memory",
              "Host memory used and available (mem used, available). " + NEEDS_TELEGRAF,
              [raw('SELECT mean("used") FROM "mem" WHERE $timeFilter GROUP BY time($interval), "host" fill(none)',
                   "$tag_host used"),
               raw('SELECT mean("available") FROM "mem" WHERE $timeFilter GROUP BY time($interval), "host" '
                   'fill(none)', "$tag_host available")], "bytes", width=6),
        Panel("Disk utilisation and latency",
              "Per device: share of time busy (io_util; 100% = saturated for a single disk) and average "
              "wait per I/O including queueing (io_await, ms, the 'await' of iostat). Shuffle and spill "
              "land on spark.local.dir. " + NEEDS_TELEGRAF,
              [raw('SELECT mean("io_util") FROM "diskio" WHERE $timeFilter GROUP BY time($interval), "host", '
                   '"name" fill(none)', "$tag_name busy %"),
               raw('SELECT mean("io_await") FROM "diskio" WHERE $timeFilter GROUP BY time($interval), "host", '
                   '"name" fill(none)', "$tag_name await ms")], "none", width=6),
        Panel("Network",
              "Bytes per second received and sent per interface. " + NEEDS_TELEGRAF,
              [raw('SELECT non_negative_derivative(max("bytes_recv"), 1s) FROM "net" WHERE $timeFilter '
                   'GROUP BY time($interval), "host", "interface" fill(none)', "$tag_interface in"),
               raw('SELECT non_negative_derivative(max("bytes_sent"), 1s) FROM "net" WHERE $timeFilter '
                   'GROUP BY time($interval), "host", "interface" fill(none)', "$tag_interface out")],
              "Bps", width=6),
    ])
    return [summary, tasks, memory, gc, shuffle, host]


# ---------------------------------------------------------------- application summary

def _peak_table(title: str, description: str, columns: list[tuple[str, str]], unit: str,
                overrides: list[dict[str, Any]] = ()) -> Panel:
    panel = Panel(title, description, [per_executor_peak(m, name) for m, name in columns], unit,
                  kind="table", width=24, height=7,
                  options={"sortBy": [{"displayName": "executorid", "desc": False}]}, overrides=list(overrides))
    # One row per executor: join the columns, drop the (shared) time.
    panel.transformations = [{"id": "merge", "options": {}},
                             {"id": "organize", "options": {"excludeByName": {"Time": True}}}]
    return panel


def _stage_table(title: str, description: str, sort_by: str) -> Panel:
    # The slowest task's own partition, executor, host, bytes read, GC and fetch wait (not stage-wide
    # maxima): bytes far above the average task mean data skew, about average bytes a slow host.
    query = ('SELECT "stage_id", "attempt", "name", "job_description" AS "job / query", "duration_ms" AS "duration", '
             '"num_tasks" AS "tasks", "task_p50_ms" AS "median task", "task_max_ms" AS "slowest task", '
             '"skew_ratio" AS "max / median", "slowest_partition" AS "slowest partition", '
             '"slowest_executor" AS "slowest on", "slowest_host" AS "host", '
             '"slowest_input_bytes" + "slowest_shuffle_read_bytes" AS "slowest read", '
             '"task_mean_input_bytes" + "task_mean_shuffle_read_bytes" AS "average read", '
             '"slowest_gc_ms" AS "slowest GC", "slowest_fetch_wait_ms" AS "slowest fetch wait", '
             f'"straggler", "status" FROM "sparkscope_stage" WHERE {APP} AND "status" <> \'RUNNING\' '
             'AND $timeFilter')
    ms = ["duration", "median task", "slowest task", "slowest GC", "slowest fetch wait"]
    return Panel(title, description, [raw(query, result_format="table")], "none", kind="table", width=24,
                 height=8, options={"sortBy": [{"displayName": sort_by, "desc": True}]},
                 overrides=[{"matcher": {"id": "byName", "options": name},
                             "properties": [{"id": "unit", "value": "ms"}]} for name in ms]
                 + [{"matcher": {"id": "byName", "options": name}, "properties": [{"id": "unit", "value": "bytes"}]}
                    for name in ("slowest read", "average read")]
                 + [{"matcher": {"id": "byName", "options": "max / median"},
                     "properties": [{"id": "decimals", "value": 1}]}])


def summary_rows() -> list[Row]:
    bytes_columns = [
        ("JVMHeapMemory", "heap used"), ("heap.max", "heap max"),
        ("ProcessTreeJVMRSSMemory", "JVM RSS"), ("ProcessTreePythonRSSMemory", "Python RSS"),
        ("ProcessTreeOtherRSSMemory", "other RSS"),
        ("OnHeapUnifiedMemory", "unified on-heap"), ("OnHeapExecutionMemory", "execution on-heap"),
        ("OnHeapStorageMemory", "storage on-heap"), ("OffHeapUnifiedMemory", "unified off-heap"),
    ]
    app = Row("The application", [
        Panel("Run time",
              "Wall-clock time from application start to end (empty while it runs). " + NEEDS_ANNOTATOR,
              [_target(f'SELECT max("duration_ms") FROM "sparkscope_application" WHERE {APP} AND $timeFilter',
                       "run time")], "ms", kind="stat", width=4, height=4),
        Panel("Executors used",
              "Executors (driver excluded) that reported metrics during the run. " + NEEDS_EXECUTOR_METRICS,
              [_target('SELECT count("v") FROM (SELECT max("value") AS "v" FROM "JVMHeapMemory" WHERE '
                       f'{NOT_DRIVER} AND $timeFilter GROUP BY "executorid")', "executors")],
              "none", kind="stat", width=4, height=4, decimals=0),
        Panel("Task time",
              "Total task run time and CPU time over all executors. " + NEEDS_SINK,
              [total("runTime.count", "run time"), total("cpuTime.count", "CPU time", scale=" / 1000000")],
              "ms", kind="stat", width=4, height=4),
        Panel("GC share of task time",
              "JVM GC time during tasks over task run time (jvmGCTime / runTime), all executors. "
              + NEEDS_SINK,
              [total("jvmGCTime.count", "GC"), total("runTime.count", "run"), math("$A / $B")],
              "percentunit", kind="stat", width=4, height=4, hidden_refs=("A", "B"), decimals=1),
        Panel("Failed tasks and stages",
              "Failed tasks and stages over the run (driver's appStatus source). " + NEEDS_APP_STATUS,
              [_target(f'SELECT max("value") FROM "tasks.failedTasks.count" WHERE {APP} AND $timeFilter',
                       "failed tasks"),
               _target(f'SELECT max("value") FROM "stages.failedStages.count" WHERE {APP} AND $timeFilter',
                       "failed stages")], "none", kind="stat", width=4, height=4, decimals=0),
        Panel("Peak memory, any executor",
              "Highest heap used and highest JVM RSS of any executor over the run. " + NEEDS_PROCESS_TREE,
              [peak("JVMHeapMemory", "heap"), peak("ProcessTreeJVMRSSMemory", "RSS")], "bytes",
              kind="stat", width=4, height=4),
    ])
    memory = Row("Memory: what each executor really needed", [
        _peak_table(
            "Peak memory per executor",
            "The highest value each memory metric reached on each executor over the run, beside the "
            "configured heap (heap max, about spark.executor.memory). Size executors from these: heap "
            "used near heap max with GC time = too small; RSS JVM + Python + other is what the cluster "
            "manager sees against spark.executor.memory + spark.executor.memoryOverhead. "
            + NEEDS_EXECUTOR_METRICS + " RSS: " + NEEDS_PROCESS_TREE,
            bytes_columns, "bytes"),
    ])
    work = Row("Work: task time per executor and in all", [
        Panel("Task time by component, all executors",
              "Where task time went over the run, summed over executors: run time, and within it CPU, GC, "
              "deserialization, shuffle fetch wait, shuffle write, result serialization. " + NEEDS_SINK,
              [total("runTime.count", "run time"), total("cpuTime.count", "CPU", scale=" / 1000000"),
               total("jvmGCTime.count", "GC"), total("deserializeTime.count", "deserialize"),
               total("shuffleFetchWaitTime.count", "shuffle fetch wait"),
               total("shuffleWriteTime.count", "shuffle write", scale=" / 1000000"),
               total("resultSerializationTime.count", "result serialization")],
              "ms", kind="bargauge", width=24, height=7,
              options={"displayMode": "basic", "orientation": "horizontal", "showUnfilled": True,
                       "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}}),
        _peak_table(
            "Work per executor",
            "Totals per executor over the run: task run time and GC time (ms), succeeded tasks, shuffle "
            "read and written, spilled to disk. An executor far above the others did more work: skewed "
            "partitions or a slow node. " + NEEDS_SINK,
            [("runTime.count", "run time"), ("jvmGCTime.count", "GC time"),
             ("succeededTasks.count", "tasks"), ("shuffleTotalBytesRead.count", "shuffle read"),
             ("shuffleBytesWritten.count", "shuffle written"), ("diskBytesSpilled.count", "spilled to disk")],
            "none",
            overrides=[{"matcher": {"id": "byName", "options": name}, "properties": [{"id": "unit", "value": unit}]}
                       for name, unit in [("run time", "ms"), ("GC time", "ms"), ("shuffle read", "bytes"),
                                          ("shuffle written", "bytes"), ("spilled to disk", "bytes")]]),
    ])
    stages = Row("Stages and queries", [
        _stage_table("Slowest stages",
                     "Completed and failed stages, slowest first: duration, tasks, median and slowest task, "
                     "where the slowest ran. " + NEEDS_ANNOTATOR, "duration"),
        _stage_table("Most skewed stages",
                     "Stages by skew (slowest task / median task), worst first. straggler = true when the "
                     "slowest task is far above the typical one and delayed the stage "
                     "(spark.sparkscope.straggler.* settings). Slowest read far above average read: data "
                     "skew in that partition; about equal: look at the executor and host named. "
                     + NEEDS_ANNOTATOR, "max / median"),
        Panel("SQL queries",
              "SQL queries (executions) of the run with status and duration; the description is the query "
              "text or the job description set by the application. " + NEEDS_ANNOTATOR,
              [raw('SELECT "execution_id", "duration_ms" AS "duration", "status", "description" '
                   f'FROM "sparkscope_query" WHERE {APP} AND "status" <> \'RUNNING\' AND $timeFilter',
                   result_format="table")],
              "none", kind="table", width=24, height=8,
              options={"sortBy": [{"displayName": "duration", "desc": True}]},
              overrides=[{"matcher": {"id": "byName", "options": "duration"},
                          "properties": [{"id": "unit", "value": "ms"}]}]),
    ])
    return [app, memory, work, stages]


def build() -> dict[str, dict[str, Any]]:
    """File name in dashboards/ -> dashboard JSON."""
    return {
        "spark-executors.json": dashboard(
            "sparkscope-executors", "Spark executors (live)",
            "One Spark application while it runs, per executor: tasks, CPU, memory, GC, shuffle, spill "
            "and I/O, with SQL queries, jobs and stages as annotations.",
            live_rows(), with_executors=True, time_from="now-30m", refresh="10s"),
        "spark-application.json": dashboard(
            "sparkscope-application", "Spark application summary",
            "One Spark application over its whole run: peak memory per executor against its configured "
            "size, where task time went, the slowest and most skewed stages. Set the time range to cover "
            "the run.",
            summary_rows(), with_executors=False, time_from="now-6h", refresh=""),
    }


def render(board: dict[str, Any]) -> str:
    return json.dumps(board, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else DASHBOARDS_DIR
    for name, board in build().items():
        (out / name).write_text(render(board))
        print(f"wrote {out / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
