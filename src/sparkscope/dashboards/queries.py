"""InfluxQL for the panels, to the rules of DESIGN.md: gauges are read with
mean/max/last, counters with non_negative_derivative (rates) or max (totals),
never averaged; every query is per application and, where it says so, per
executor."""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterator

from sparkscope.store.schema import (CONTAINER_COUNTER_FIELDS, CONTAINER_MEASUREMENT, COUNTER_MEASUREMENTS,
                                     DISKIO_MEASUREMENT, EXECUTOR_PEAKS_MEASUREMENT, HEAP_MAX,
                                     TASK_TOTALS_PREFIX, THREADPOOL_ACTIVE_TASKS, THREADS_MEASUREMENT)

DATASOURCE = {"type": "influxdb", "uid": "sparkscope-influxdb"}
EXPRESSION = {"type": "__expr__", "uid": "__expr__"}

# Counters (schema.COUNTER_MEASUREMENTS): cumulative since the executor
# started. Read with non_negative_derivative (rates) or max (totals), never
# mean. Spark's task metrics (.count) and Hadoop's FileSystem statistics (Dropwizard
# gauges whose value only grows) by their names' shape too, for a user's own
# panels over metrics kept with SPARKSCOPE_UNREAD_METRICS=pass.
COUNTER_SUFFIXES = (".count",)
COUNTER_PATTERNS = ("filesystem.",)

# Spark's metrics are read at the resolution the time range needs: raw samples
# or a per-minute or per-10-minute rollup (stack/rollups.py), picked by the
# hidden variables $rp and $mean_field (layout.py). A rollup keeps each
# interval's highest value as "value", so max("value") reads the same from
# any of them, and its mean as $mean_field.
# The graphs do at every level. Numbers over the whole range read raw
# samples (totals, tables), since a rollup lags its samples by up to 20
# minutes and a run that just ended would show nothing; memory peaks read the
# minute rollup for the whole minutes of the range where it is complete, raw
# samples at its edges (PEAK_RP below).
# (policy, mean field) of the graphs: by the range through the hidden
# variables, or raw samples (raw_samples below).
BY_RANGE = ('"$rp".', '"$mean_field"')
RAW = ("", '"value"')
_read_from: ContextVar[tuple[str, str]] = ContextVar("read_from", default=BY_RANGE)


@contextmanager
def raw_samples() -> Iterator[None]:
    """The graphs built inside read raw samples only, for a dashboard that
    has no $rp and $mean_field (the summary: it is opened on a run that often
    ended minutes ago, before the rollups of its range exist)."""
    token = _read_from.set(RAW)
    try:
        yield
    finally:
        _read_from.reset(token)

APP = '"applicationid" =~ /^${applicationid:regex}$/'
EXECUTORS = f'{APP} AND "executorid" =~ /^${{executorid:regex}}$/'
# The graphs that draw a line per executor draw those of $drawn: the picked
# executors, at most $top of them, the highest heap peaks first (layout.py).
# At 500 executors a three-measurement panel is 1,503 series, which nobody
# reads as lines and which InfluxDB and Grafana take 350-480 ms to serve
# over 6 h; 20 executors are 60. Sums over executors keep every picked one.
DRAWN = f'{APP} AND "executorid" =~ /^${{drawn:regex}}$/'
NOT_DRIVER = f"{APP} AND \"executorid\" != 'driver'"

# Spark settings named in panel descriptions.
NEEDS_SINK = "Needs the Graphite sink (spark-conf/metrics.properties)."
NEEDS_EXECUTOR_METRICS = ("Needs spark.metrics.executorMetricsSource.enabled=true (the default) and the "
                          "Graphite sink; polled every spark.executor.metrics.pollingInterval.")
NEEDS_PROCESS_TREE = ("Needs the annotator's ContainerMemoryPlugin in spark.plugins (Linux /proc only; "
                      "it reads the process tree without forking), or Spark's own "
                      "spark.executor.processTreeMetrics.enabled=true and the Graphite sink.")
NEEDS_APP_STATUS = "Needs spark.metrics.appStatusSource.enabled=true (driver) and the Graphite sink."
NEEDS_ANNOTATOR = ("Needs the sparkscope annotator: its jar and "
                   "spark.plugins=dev.sparkscope.annotator.ListenerPlugin (./sparkscope conf prints both).")
NEEDS_TELEGRAF = "From Telegraf's host inputs on the machine running the stack, not Spark."


# A gauge's highest value over the range (peaks, sizing) reads the minute
# rollup for whole minutes inside the range and raw samples at its edges:
# from the start to the first whole minute after it, and the last 3 minutes
# (a minute bucket is final once the continuous query ran over it twice).
# $peak_rp is the rollup only when it holds every raw sample of those
# minutes (layout.py checks on the driver's heap samples), raw samples
# otherwise, so the peak is exact either way. Over 24 h of 500 executors one
# heap peak reads 1,440 instead of 8,640 points a series (docs/performance.md).
# The minute bounds are the browser's own formatting of the range (the same
# instant in its time zone, seconds dropped), as InfluxQL time strings.
FROM_MINUTE = "'${__from:date:YYYY-MM-DD[T]HH:mm:00Z}'"
TO_MINUTE = "'${__to:date:YYYY-MM-DD[T]HH:mm:00Z}'"
WHOLE_MINUTES = f"time >= {FROM_MINUTE} + 1m AND time < {TO_MINUTE} - 3m"
PEAK_RP = '"$peak_rp".'


def range_max(measurement: str, where: str, group: str = "") -> str:
    """The FROM clause of a gauge's highest value over the range as "v" (per
    `group`, e.g. ' GROUP BY "executorid"'): three subqueries, the whole
    minutes from $peak_rp and the two raw edges, for an outer max("v")."""
    parts = [f'{PEAK_RP}{source(measurement)} WHERE {where} AND {WHOLE_MINUTES}',
             f'{source(measurement)} WHERE {where} AND $timeFilter AND time < {FROM_MINUTE} + 1m',
             f'{source(measurement)} WHERE {where} AND $timeFilter AND time >= {TO_MINUTE} - 3m']
    return ", ".join(f'(SELECT max("value") AS "v" FROM {part}{group})' for part in parts)


# Gauges that hold still while a JVM lives: its maximum heap is set at start
# (-Xmx; G1 reports exactly that, other collectors move it by a survivor
# space at most), so its last sample is its highest.
CONSTANT_GAUGES = {HEAP_MAX}


# Measurements of sparkscope's own writers that hold gauges and counters side
# by side: their counter fields (cumulative, read with differences or max).
COUNTER_FIELDS = {CONTAINER_MEASUREMENT: CONTAINER_COUNTER_FIELDS}


def is_counter(measurement: str, field: str = "value") -> bool:
    if measurement in COUNTER_FIELDS:
        return field in COUNTER_FIELDS[measurement]
    return (measurement.endswith(COUNTER_SUFFIXES) or measurement in COUNTER_MEASUREMENTS
            or measurement.startswith(COUNTER_PATTERNS))


def read_last(measurement: str) -> bool:
    """Whether a series' last value is its highest: a counter (it only grows
    while its executor lives; a new executor is a new series) or a constant
    gauge. InfluxDB reads the last value from the end of each series instead
    of every sample of the range (over 24 h of 500 executors' raw samples,
    18 ms against 239 ms; docs/performance.md)."""
    return is_counter(measurement) or measurement in CONSTANT_GAUGES


def highest(measurement: str) -> str:
    """The selector for a series' highest value: max, or last where that is the same (read_last)."""
    return "last" if read_last(measurement) else "max"


def gauge(measurement: str, alias: str = "$tag_executorid", agg: str = "mean",
          where: str = DRAWN) -> dict[str, Any]:
    """A gauge per executor: mean (or max) of each interval."""
    rolled, mean_field = _read_from.get()
    field = mean_field if agg == "mean" else '"value"'
    return target(f'SELECT {agg}({field}) FROM {rolled}{source(measurement)} WHERE {where} AND $timeFilter '
                   f'GROUP BY time($bucket), "executorid" fill(none)', alias)


def rate(measurement: str, alias: str = "$tag_executorid", per: str = "1s", scale: str = "",
         where: str = DRAWN) -> dict[str, Any]:
    """A counter per executor as a rate: its increase per `per`, times `scale`."""
    rolled = _read_from.get()[0]
    return target(f'SELECT non_negative_derivative(max("value"), {per}){scale} FROM {rolled}{source(measurement)} '
                   f'WHERE {where} AND $timeFilter GROUP BY time($bucket), "executorid" fill(none)',
                   alias)


def summed_rate(measurement: str, alias: str, per: str = "1s", scale: str = "",
                where: str = EXECUTORS) -> dict[str, Any]:
    """A counter's rate summed over the selected executors."""
    rolled = _read_from.get()[0]
    inner = (f'SELECT non_negative_derivative(max("value"), {per}){scale} AS "r" FROM {rolled}{source(measurement)} '
             f'WHERE {where} AND $timeFilter GROUP BY time($bucket), "executorid" fill(none)')
    return target(f'SELECT sum("r") FROM ({inner}) WHERE $timeFilter GROUP BY time($bucket) fill(none)',
                   alias)


def summed_gauge(measurement: str, alias: str, agg: str = "max", where: str = EXECUTORS) -> dict[str, Any]:
    """A gauge summed over the selected executors: each one's max (or mean) of
    the interval, added up (one series, for stacking what fills the whole)."""
    rolled, mean_field = _read_from.get()
    field = mean_field if agg == "mean" else '"value"'
    inner = (f'SELECT {agg}({field}) AS "v" FROM {rolled}{source(measurement)} WHERE {where} AND $timeFilter '
             f'GROUP BY time($bucket), "executorid" fill(none)')
    return target(f'SELECT sum("v") FROM ({inner}) WHERE $timeFilter GROUP BY time($bucket) fill(none)', alias)


def task_time(counter: str, alias: str, scale: str) -> list[dict[str, Any]]:
    """One of Spark's task time counters (ExecutorSource: runTime.count ...)
    as a rate summed over the picked executors: two queries under one
    alias, the executors' own counter and the annotator's per-application
    total of it (one series instead of one per executor), of which
    $task_scope (layout.py), a regex on executorid, keeps one: the totals
    have no executorid tag. Two queries, not one measurement regex: InfluxDB
    1.8 dies when a query over a measurement regex is interrupted, as
    Grafana does to the queries of a panel it redraws (OLD_GEN_POOLS), and
    here one of the two never has series."""
    where = f'{EXECUTORS} AND "executorid" =~ /^${{task_scope:raw}}$/'
    return [summed_rate(measurement, alias, scale=scale, where=where)
            for measurement in (counter, TASK_TOTALS_PREFIX + counter)]


def total(measurement: str, alias: str, where: str = APP, scale: str = "") -> dict[str, Any]:
    """A counter's total over the application: each executor's last value
    (its highest), summed. Counters start at 0 when an executor starts. The driver
    is not left out: it has the executor source only in local mode, where
    it is the one executor."""
    inner = (f'SELECT {highest(measurement)}("value"){scale} AS "v" FROM {source(measurement)} WHERE {where} '
             'AND $timeFilter GROUP BY "executorid"')
    return target(f'SELECT sum("v") FROM ({inner})', alias)


def peak(measurement: str, alias: str, where: str = NOT_DRIVER) -> dict[str, Any]:
    return target(f'SELECT max("v") FROM {range_max(measurement, where)}', alias)


EXECUTOR_PEAKS = EXECUTOR_PEAKS_MEASUREMENT


def exact_peaks(field: str, what: str) -> list[dict[str, Any]]:
    """The annotator's exact peak (Spark's own maximum between polls) over the
    executors and, apart, the driver's: what the sizing table lists, so the
    headline and the table agree."""
    def one(where: str, alias: str) -> dict[str, Any]:
        return target(f'SELECT max("{field}") FROM "{EXECUTOR_PEAKS}" WHERE {APP} AND {where} AND $timeFilter',
                      alias)
    return [one("\"executor_id\" != 'driver'", f"{what}, executors"),
            one("\"executor_id\" = 'driver'", f"{what}, driver")]


def recent_per_executor(measurement: str, agg: str, alias: str, window: str = "20s") -> dict[str, Any]:
    """agg over executors of each one's last value in the window that ends at
    the end of the time range: an executor that stopped reporting drops out,
    and a half-filled last interval cannot make the number dip."""
    inner = (f'SELECT last("value") AS "v" FROM {source(measurement)} WHERE {APP} '
             f'AND time > ${{__to}}ms - {window} AND time <= ${{__to}}ms GROUP BY "executorid"')
    return target(f'SELECT {agg}("v") FROM ({inner})', alias)


def slots_held(alias: str) -> dict[str, Any]:
    """Task slots held per bucket: the JVMs that reported running tasks in it
    (threadpool.activeTasks: the executors, and the driver in local mode)
    times $executor_cores (layout.py, the annotator's cores per executor)."""
    rolled = _read_from.get()[0]
    inner = (f'SELECT max("value") AS "v" FROM {rolled}{source(THREADPOOL_ACTIVE_TASKS)} WHERE {EXECUTORS} '
             'AND $timeFilter GROUP BY time($bucket), "executorid" fill(none)')
    return target(f'SELECT count("v") * 0$executor_cores FROM ({inner}) WHERE $timeFilter '
                  'GROUP BY time($bucket) fill(none)', alias)


def slot_seconds_held(alias: str) -> dict[str, Any]:
    """Slot-seconds held over the range: each JVM's time from its first running-tasks
    sample to its last (elapsed between samples, summed) times $executor_cores."""
    inner = (f'SELECT elapsed("value", 1s) AS "alive" FROM {source(THREADPOOL_ACTIVE_TASKS)} WHERE {APP} '
             'AND $timeFilter GROUP BY "executorid"')
    return target(f'SELECT sum("alive") * 0$executor_cores FROM ({inner})', alias)


def highest_per_executor(measurement: str, where: str = APP) -> str:
    """A subquery: each executor's highest value over the range as "v": the
    last value where that is the highest (read_last), else the max through
    range_max."""
    if read_last(measurement):
        return (f'SELECT last("value") AS "v" FROM {source(measurement)} WHERE {where} '
                'AND $timeFilter GROUP BY "executorid"')
    by_executor = ' GROUP BY "executorid"'
    return f'SELECT max("v") AS "v" FROM {range_max(measurement, where, by_executor)}{by_executor}'


def per_executor_peak(measurement: str, column: str, derived: tuple[tuple[str, str], ...] = (),
                      where: str = APP) -> dict[str, Any]:
    """One table column: each executor's highest value. sum() of the single
    maximum gives every column the same time, so a merge joins them by
    executor. `derived`: further columns from the same read, each an InfluxQL
    expression of sum("v") and its name (e.g. the unified pool from the
    heap): one read of 500 executors' series instead of one per column."""
    inner = highest_per_executor(measurement, where)
    fields = ", ".join([f'sum("v") AS "{column}"'] + [f'{expression} AS "{name}"' for expression, name in derived])
    # Grafana's alias $col names each series by its column.
    made = target(f'SELECT {fields} FROM ({inner}) GROUP BY "executorid"', "$col" if derived else column)
    made["resultFormat"] = "table"
    return made


# At most this many runs in a picker: more than anyone scrolls through, and
# far above the 10,000 runs the benchmarks hold in a range.
MOST_RUNS = 1_000_000


def newest_first(tag: str, firsts: str) -> str:
    """A picker's query: the values of `tag`, newest first, given `firsts`, a
    query of each value's first point (GROUP BY the tag). One column only:
    Grafana 12 offers every non-time column's values as options, so a
    second column (the time or the first value) would list numbers too.
    top() turns the tag into a field, which a SELECT may name alone."""
    return f'SELECT "{tag}" FROM (SELECT top("first", "{tag}", {MOST_RUNS}) FROM ({firsts})) ORDER BY time DESC'


def raw(query: str, alias: str = "", result_format: str = "time_series") -> dict[str, Any]:
    made = target(query, alias)
    made["resultFormat"] = result_format
    return made


def source(measurement: str) -> str:
    """A measurement name, quoted. Never a /regex/: see OLD_GEN_POOLS."""
    if measurement.startswith("/"):
        raise ValueError(f"{measurement}: a measurement regex can crash InfluxDB 1.8; name each measurement")
    return f'"{measurement}"'


def target(query: str, alias: str) -> dict[str, Any]:
    return {"datasource": DATASOURCE, "rawQuery": True, "resultFormat": "time_series",
            "query": query, "alias": alias}


def math(expression: str) -> dict[str, Any]:
    """A Grafana server-side expression over the panel's other queries ($A, $B)."""
    return {"datasource": EXPRESSION, "type": "math", "expression": expression}


# --- disks: Telegraf's diskio (tag "name") and the block I/O probe (tag "device") ---

# Whole disks: what the Device variable's "All" means. Loop, ram, zram and
# partitions (sda1, nvme0n1p1) are left out; a user picks them by name.
WHOLE_DISKS = r"(?:(?:sd|vd|xvd|hd)[a-z]+|nvme[0-9]+n[0-9]+|mmcblk[0-9]+|md[0-9]+|dm-[0-9]+|nbd[0-9]+|rbd[0-9]+)"
DISKIO_DEVICE = '"name" =~ /^${device:regex}$/'
PROBE_DEVICE = '"device" =~ /^${device:regex}$/'
NEEDS_BLOCKPROBE = ("Needs the block I/O probe (eBPF, root or CAP_BPF + CAP_PERFMON): ./sparkscope up starts it "
                    "when it can and says why when it cannot; compose: the blockprobe profile.")


def disk_await(time_field: str, count_field: str, alias: str) -> dict[str, Any]:
    """Milliseconds per completed I/O in each interval: the increase of the
    time counter over the increase of the I/O count. Intervals without an I/O
    of this direction give no point (not 0 ms): an idle disk, or one that only
    wrote, has no read latency to show."""
    inner = (f'SELECT non_negative_difference(max("{time_field}")) AS "ms", '
             f'non_negative_difference(max("{count_field}")) AS "ios" FROM "{DISKIO_MEASUREMENT}" '
             f'WHERE {DISKIO_DEVICE} AND $timeFilter GROUP BY time($bucket), "host", "name" fill(none)')
    return target(f'SELECT "ms" / "ios" FROM ({inner}) WHERE "ios" > 0 GROUP BY "host", "name"', alias)


# --- the thread sampler (sparkscope.probes.threadprobe): averages per 10 s period ---

NEEDS_THREADPROBE = ("Needs the thread sampler (python -m sparkscope.probes.threadprobe, no Spark setting): ./sparkscope up "
                     "starts it on the stack's host (THREADPROBE_ENABLED); compose: the threadprobe profile; "
                     "another host: run it there with --url pointing at this stack's events port.")


def task_threads(field: str, alias: str) -> dict[str, Any]:
    """Task threads of the selected executors in one state, summed over the
    executors: each executor's mean of its periods' averages per interval,
    then the sum."""
    inner = (f'SELECT mean("{field}") AS "n" FROM "{THREADS_MEASUREMENT}" WHERE {EXECUTORS} AND "class" = \'task\' '
             'AND $timeFilter GROUP BY time($bucket), "executorid" fill(none)')
    return target(f'SELECT sum("n") FROM ({inner}) WHERE $timeFilter GROUP BY time($bucket) fill(none)', alias)


# The annotator's exact peaks (sparkscope_*_peaks): Spark's own maxima between
# heartbeats, per executor and per stage, polled every
# spark.executor.metrics.pollingInterval; not the Graphite samples.
NEEDS_PEAKS = ("Needs the sparkscope annotator (its jar and "
               "spark.plugins=dev.sparkscope.annotator.ListenerPlugin): it writes the exact peaks "
               "when an executor is removed, when a stage ends and at application end, as fine as "
               "spark.executor.metrics.pollingInterval (2s in spark-conf/).")
RESERVED_BYTES = 300 * 1024 * 1024  # Spark keeps this much heap out of the unified pool


def annotator_fields(measurement: str, columns: list[tuple[str, str]]) -> dict[str, Any]:
    """One table row per point of an annotator measurement: each (expression,
    column name) pair a column. Expressions are InfluxQL field expressions,
    so they may add fields ("a" + "b")."""
    select = ", ".join(f'{expr} AS "{name}"' for expr, name in columns)
    return raw(f'SELECT {select} FROM "{measurement}" WHERE {APP} AND $timeFilter', result_format="table")
