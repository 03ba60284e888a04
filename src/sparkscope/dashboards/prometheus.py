"""The dashboards for a Prometheus store (Thanos, or the user's): the same
panel declarations as the InfluxDB ones (live.py, summary.py), rendered to
PromQL for Grafana's Prometheus datasource (reads.py), with the events still
read from InfluxDB as annotations (they are strings, which a Prometheus store
does not hold).

The live dashboard renders the panels whose every target is a declared read:
the summary's stats, the per-executor graphs, task time by component (the
executors' counters), the GC share (one ratio) and the host's graphs, disk
await included. not_yet() lists the rest, all on data that never reaches
Thanos (telegraf/thanos.conf drops sparkscope_* and block_*): the
applications table (strings), slots busy vs held (spark.executor.cores comes
from the annotator's executor events; no Spark metric carries it), the task
thread panels (the thread sampler), the containers row (the annotator's
cgroup plugin), the streaming row (its progress events) and the block I/O
probe's panels.

The summary (build_summary) keeps every panel: those of declared reads in
PromQL, the others as InfluxDB panels (layout.py picks the datasource per
panel), with the InfluxDB variables they read.

Variables are Grafana's label_values() of the Prometheus names
(store/prometheus.py): the run, its executors, the host's devices. The run picker lists the runs whose driver sends
metrics, in reverse alphabetical order: newest first for standalone
(app-<yyyyMMddHHmmss>-n) and local (local-<epoch ms>) ids, which
label_values cannot order by time. No $top/$drawn limit on the lines yet:
each graph draws every picked executor.
"""

from __future__ import annotations

from typing import Any

from dataclasses import replace

from sparkscope import dashboards
from sparkscope.dashboards import live, summary
from sparkscope.dashboards.layout import (REFRESH_ON_TIME_RANGE, SORT_ALPHABETICAL, SORT_NUMERICAL, Panel, Row,
                                          _executor_cores, _peak_source, dashboard, top_variable)
from sparkscope.dashboards.queries import WHOLE_DISKS
from sparkscope.dashboards.reads import (APP_LABEL, APP_MATCHER, DEVICE_TAG, EXECUTOR_LABEL, PROMETHEUS_DATASOURCE,
                                         PROMQL, SAFE_OPTION, ExecutorPeak, is_read)
from sparkscope.dashboards.uids import LIVE_UID, SUMMARY_UID
from sparkscope.store.prometheus import label_name, series_name
from sparkscope.store.schema import DISKIO_MEASUREMENT, JVM_HEAP_MEMORY

LIVE_PROMETHEUS_UID = f"{LIVE_UID}-thanos"
SORT_ALPHABETICAL_DESC = 2
# How often a series of the store gets a sample: Spark's sink period (5 s,
# spark-conf/metrics.properties) and Telegraf's host inputs (10 s). Grafana's
# "scrape interval" of the datasource (grafana/thanos/datasources): the
# least $__interval, and $__rate_interval = max($__interval + it, 4 x it).
SCRAPE_INTERVAL = "10s"


def promql_panels(row: Row) -> list[Panel]:
    return [panel for panel in row.panels if panel.targets and all(is_read(t) for t in panel.targets)]


def rows() -> list[Row]:
    out = []
    for row in live.rows():
        kept = promql_panels(row)
        if kept:
            out.append(Row(row.title, kept, collapsed=row.collapsed))
    return out


def not_yet() -> list[str]:
    """The live dashboard's panels the PromQL variant does not have yet."""
    return [panel.title for row in live.rows() for panel in row.panels if panel not in promql_panels(row)]


def _variable(name: str, label: str, query: str, description: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "label": label, "type": "query", "datasource": PROMETHEUS_DATASOURCE,
            "query": query, "definition": query, "refresh": REFRESH_ON_TIME_RANGE, "regex": SAFE_OPTION,
            "multi": False, "includeAll": False, "current": {}, "options": [], "hide": 0,
            "description": description, **extra}


def variables() -> list[dict[str, Any]]:
    heap = series_name(JVM_HEAP_MEMORY, "value")
    return [
        _variable("applicationid", "Application", f'label_values({heap}{{{EXECUTOR_LABEL}="driver"}}, {APP_LABEL})',
                  "Runs in the time range whose driver sends metrics, newest first for standalone and local "
                  "ids (label_values sorts by name). A run whose id holds a quote or a line break is not "
                  "listed (reads.SAFE_OPTION).",
                  sort=SORT_ALPHABETICAL_DESC),
        _variable("executorid", "Executor", f"label_values({heap}{{{APP_MATCHER}}}, {EXECUTOR_LABEL})",
                  "Executors of the application; 'driver' is the driver JVM.",
                  sort=SORT_NUMERICAL, multi=True, includeAll=True, allValue=".*",
                  current={"selected": True, "text": ["All"], "value": ["$__all"]}),
        _variable("device", "Device", f"label_values({series_name(DISKIO_MEASUREMENT, 'reads')}, "
                                      f"{label_name(DEVICE_TAG)})",
                  "Block devices of the host panels. All = whole disks (sd*, vd*, nvme*n*, mmcblk*, md*, dm-*): "
                  "loop, ram and partitions are left out unless picked by name.",
                  sort=SORT_ALPHABETICAL, multi=True, includeAll=True, allValue=WHOLE_DISKS,
                  current={"selected": True, "text": ["All"], "value": ["$__all"]}),
    ]


SUMMARY_PROMETHEUS_UID = f"{SUMMARY_UID}-thanos"


def _value_columns_named(panel: Panel) -> Panel:
    """A table of ExecutorPeak columns as PromQL gives it: Grafana names each
    instant table query's value "Value #<refId>"; renamed to the column the
    InfluxDB table names by its alias, after the merge by executor."""
    if not panel.targets or not all(isinstance(t, ExecutorPeak) for t in panel.targets):
        return panel
    names = {f"Value #{chr(ord('A') + n)}": t.column for n, t in enumerate(panel.targets)}
    return replace(panel, transformations=[*panel.transformations,
                                           {"id": "organize", "options": {"renameByName": names}}])


def summary_rows() -> list[Row]:
    """The summary's rows: Spark's metrics in PromQL (the declared reads), the
    rest (the annotator's events and exact peaks, and what needs the
    executors' cores from them) on InfluxDB, panel by panel (layout.py)."""
    return [Row(row.title, [_value_columns_named(p) for p in row.panels], collapsed=row.collapsed)
            for row in dashboards.summary_rows()]


def summary_not_promql() -> list[str]:
    """The summary's panels that read InfluxDB in its PromQL variant."""
    return [panel.title for row in summary_rows() for panel in row.panels
            if not (panel.targets and all(is_read(t) for t in panel.targets))]


def summary_variables() -> list[dict[str, Any]]:
    """The run (from Thanos), and the InfluxDB variables the InfluxDB panels
    read: where peaks read whole minutes ($peak_rp), the executors' cores, the
    run's job and its last runs; $top, how many executors the sampled peak
    table lists (topk in PromQL, no $drawn)."""
    top = top_variable("Executors shown", "The sampled peak table lists at most this many executors: those "
                       "with the highest heap peak in the time range (the driver among them). The stats, the "
                       "sizing and work tables count every executor.")
    return [variables()[0], *_peak_source(), _executor_cores(), top, *summary.variables()]


def build_summary() -> dict[str, Any]:
    return dashboard(
        SUMMARY_PROMETHEUS_UID, "Spark application summary (Thanos)",
        "One Spark application over its whole run, Spark's metrics read from the Thanos store with PromQL: "
        "task time, failures, peak memory and work per executor; the job's last runs, the exact peaks, "
        "stages and SQL queries from InfluxDB (the annotator's events). Set the time range to cover the run.",
        summary_rows(), with_executors=False, time_from="now-6h", refresh="", variables=summary_variables(),
        dialect=PROMQL, datasource=PROMETHEUS_DATASOURCE)


def build() -> dict[str, Any]:
    return dashboard(
        LIVE_PROMETHEUS_UID, "Spark executors (live, Thanos)",
        "One Spark application while it runs, per executor, read from the Thanos store with PromQL: tasks, "
        "CPU, memory, GC, shuffle, spill and I/O, with SQL queries, jobs and stages from InfluxDB as "
        "annotations.",
        rows(), with_executors=True, time_from="now-30m", refresh="10s", variables=variables(),
        dialect=PROMQL, datasource=PROMETHEUS_DATASOURCE)
