"""What sparkscope stores in InfluxDB, in one place: every measurement, who
writes it, whether it is a gauge, a counter or an event, and whether it is
rolled up; the tags every reader groups by; the policies and lookup
measurements the dashboards pick resolutions from.

The Python side reads its names from here: the rollups (stack/rollups.py),
the dashboards' counters and lookups (dashboards/), the report's old
generation pools, the probes' measurements. What is not Python is checked
against it by tests/test_schema.py: the Telegraf filter's list of Spark
metrics and the events listener's namepass (telegraf/telegraf.conf), and the
measurements the Java writers of the annotator jar name. Every measurement
any dashboard, the report, the demo's summary, `top`, the alert rules or
`profile` reads must be declared here; that test fails on one that is not.

Standard library only: the probes import it.
"""

from __future__ import annotations

from dataclasses import dataclass

# --- tags ------------------------------------------------------------------------------

APPLICATION = "applicationid"
EXECUTOR = "executorid"
DRIVER = "driver"  # the executorid of the driver's metrics

# --- who writes a measurement -------------------------------------------------------------

SPARK = "spark"  # Spark's GraphiteSink, through Telegraf's Graphite template (telegraf.conf)
ANNOTATOR = "annotator"  # the annotator jar (listener and plugins), over the events listener
BLOCK_PROBE = "block I/O probe"  # src/sparkscope/blockprobe, over the events listener
THREAD_SAMPLER = "thread sampler"  # src/sparkscope/threadprobe, over the events listener
PROFILES = "profiles"  # sparkscope profile and the profiler plugin's stacks (src/sparkscope/profiles)
TELEGRAF = "telegraf"  # Telegraf's own inputs and processors (host, internal, no end seen)
STACK = "stack"  # ./sparkscope up and status (lookups, self-check)

GAUGE, COUNTER, EVENT = "gauge", "counter", "event"


@dataclass(frozen=True)
class Measurement:
    name: str
    writer: str
    kind: str = GAUGE  # counter: cumulative, read with differences or max, never a mean
    rolled: bool = False  # rolled up into the 1m/10m/30m policies (stack/rollups.py)


# --- retention policies and the dashboards' lookups -----------------------------------------

RAW_POLICY = "sparkscope"  # the database's default policy (influx.database_statements)
META_POLICY = "sparkscope_meta"  # the lookups below: a few points, kept forever
RESOLUTION_MEASUREMENT = "sparkscope_resolution"
# Where the highest value over a range is read (dashboards' $peak_rp): the
# minute rollup when it holds exactly as many samples as the raw data over
# the same minutes, raw samples otherwise. Two points, picked by the gap
# (raw minus rolled samples): 0 -> the rollup, anything else -> raw. A
# continuous query does not run again over a time InfluxDB was down or
# busy (nor at all where ./sparkscope up never created it), and Telegraf
# replays its buffer afterwards: the gap shows exactly those holes.
PEAK_SOURCE_MEASUREMENT = "sparkscope_peak_source"
PEAK_LEVEL = "sparkscope_1m"
# Where the live dashboard's "Task time by component" reads (its hidden
# $task_scope): with every executor picked, the annotator's per-application
# totals of the same counters (annotator TaskTimeTotals: measurements
# TASK_TOTALS_PREFIX + counter, no executorid tag), one series per counter
# instead of one per executor; otherwise, or for a run without them, each
# executor's own counters. $task_scope is a regex on executorid: "(?:)"
# matches only the totals (a missing tag reads as ""), "(?:.+)" only
# executors. The first point is taken when the Executor picker's regex
# matches ALL_EXECUTORS (only "All", i.e. .*, does: no executor id has a
# space) and the range holds totals; the second otherwise.
TASK_SCOPE_MEASUREMENT = "sparkscope_task_scope"
TASK_TOTALS_PREFIX = "sparkscope_app."
# The counters the totals keep: annotator TaskTimeTotals.COUNTERS, in the same order.
TASK_TIME_COUNTERS = ("runTime.count", "cpuTime.count", "jvmGCTime.count", "deserializeTime.count",
                      "shuffleFetchWaitTime.count", "shuffleWriteTime.count")
ALL_EXECUTORS = "all executors"

# --- Spark's metrics (GraphiteSink) ---------------------------------------------------------

# The old generation's use after the last collection (the live set), per
# collector: G1 (Java's default), Parallel, CMS. Read by name, one query each,
# never through a measurement regex: InfluxDB 1.8 dies when a query over a
# measurement regex is interrupted after a matched measurement had no series
# (coordinator.LocalShardMapping.CreateIterator closes a nil iterator), as
# the collectors this run did not use have none.
OLD_GEN_POOLS = ("pools.G1-Old-Gen.used-after-gc", "pools.PS-Old-Gen.used-after-gc",
                 "pools.CMS-Old-Gen.used-after-gc")
FILESYSTEM_SCHEMES = ("file", "hdfs", "s3a", "gs", "abfs")

_SPARK_GAUGES = (
    "JVMHeapMemory", "heap.max", "threadpool.activeTasks",
    "OnHeapExecutionMemory", "OnHeapStorageMemory", "OnHeapUnifiedMemory",
    "OffHeapExecutionMemory", "OffHeapStorageMemory", "OffHeapUnifiedMemory",
    "ProcessTreeJVMRSSMemory", "ProcessTreePythonRSSMemory", "ProcessTreeOtherRSSMemory",
    *OLD_GEN_POOLS,
)
_SPARK_COUNTERS = (
    "jvmCpuTime", "MinorGCCount", "MinorGCTime", "MajorGCCount", "MajorGCTime",
    *TASK_TIME_COUNTERS, "shuffleBytesWritten.count",
    "shuffleLocalBytesRead.count", "shuffleRemoteBytesRead.count",
    "memoryBytesSpilled.count", "diskBytesSpilled.count", "bytesRead.count", "bytesWritten.count",
    "resultSerializationTime.count", "succeededTasks.count",
    # Hadoop FileSystem statistics: Dropwizard gauges whose value only grows.
    *(f"filesystem.{scheme}.{way}_bytes" for scheme in FILESYSTEM_SCHEMES for way in ("read", "write")),
)
# Read over the whole range only (totals, tables): never through a rollup.
_SPARK_RAW_COUNTERS = ("shuffleTotalBytesRead.count", "tasks.failedTasks.count", "stages.failedStages.count")
# Counters of Spark's JVM source that no panel reads (kept with SPARKSCOPE_UNREAD_METRICS=pass):
# named here so that their kind is known to a user's own query through dashboards.queries.is_counter.
_SPARK_UNREAD_COUNTERS = ("TotalGCTime", "G1-Young-Generation.count", "G1-Young-Generation.time",
                          "G1-Old-Generation.count", "G1-Old-Generation.time")

# --- sparkscope's own writers -----------------------------------------------------------------

APPLICATION_MEASUREMENT = "sparkscope_application"  # a run's start and end (status, name, end_time_ms)
CONTAINER_MEASUREMENT = "sparkscope_container"  # each JVM's cgroup: limit, usage, working set, OOM kills
# sparkscope_container's counter fields (the rest are gauges).
CONTAINER_COUNTER_FIELDS = frozenset({"oom_kills", "limit_hits"})
BLOCK_LATENCY = "block_latency"
BLOCK_LATENCY_HIST = "block_latency_hist"
BLOCK_OUTLIER = "block_outlier"
BLOCK_OUTLIER_DROPPED = "block_outlier_dropped"
THREADS_MEASUREMENT = "sparkscope_threads"
THREAD_WAITS_MEASUREMENT = "sparkscope_thread_waits"
THREAD_SAMPLER_MEASUREMENT = "sparkscope_threadprobe"  # the sampler's own health (periods, cuts)
FLAME_MEASUREMENT = "sparkscope_flame"  # a profile's nested-set rows
PROFILES_MEASUREMENT = "sparkscope_profiles"  # one point per profile: its id, kind, span
NO_END_SEEN_MEASUREMENT = "sparkscope_no_end_seen"  # Telegraf's starlark: a run ended for its silent driver
SELF_CHECK_MEASUREMENT = "sparkscope_selfcheck"  # ./sparkscope status' test write
TELEGRAF_WRITE_MEASUREMENT = "internal_write"  # Telegraf's own: buffer size and drops per output

MEASUREMENTS: tuple[Measurement, ...] = (
    *(Measurement(name, SPARK, GAUGE, rolled=True) for name in _SPARK_GAUGES),
    *(Measurement(name, SPARK, COUNTER, rolled=True) for name in _SPARK_COUNTERS),
    *(Measurement(name, SPARK, COUNTER) for name in _SPARK_RAW_COUNTERS),
    *(Measurement(name, SPARK, COUNTER) for name in _SPARK_UNREAD_COUNTERS),
    # The annotator (annotator/src/main/java/dev/sparkscope/annotator/).
    Measurement(APPLICATION_MEASUREMENT, ANNOTATOR, EVENT),
    Measurement("sparkscope_query", ANNOTATOR, EVENT),
    Measurement("sparkscope_job", ANNOTATOR, EVENT),
    Measurement("sparkscope_stage", ANNOTATOR, EVENT),
    Measurement("sparkscope_executor", ANNOTATOR, EVENT),
    Measurement("sparkscope_executor_peaks", ANNOTATOR),
    Measurement("sparkscope_stage_peaks", ANNOTATOR),
    Measurement("sparkscope_stage_executor_peaks", ANNOTATOR),
    Measurement("sparkscope_memory_conf", ANNOTATOR),
    Measurement(CONTAINER_MEASUREMENT, ANNOTATOR),
    Measurement("sparkscope_streaming", ANNOTATOR, EVENT),
    Measurement("sparkscope_streaming_query", ANNOTATOR, EVENT),
    Measurement("sparkscope_streaming_state", ANNOTATOR),
    Measurement("sparkscope_streaming_end", ANNOTATOR, EVENT),  # stamped when a query ended (failed 0/1)
    *(Measurement(TASK_TOTALS_PREFIX + counter, ANNOTATOR, COUNTER, rolled=True)
      for counter in TASK_TIME_COUNTERS),
    # Profiles: the profiler plugin (Java) and sparkscope profile / the thread sampler (Python).
    Measurement(FLAME_MEASUREMENT, PROFILES),
    Measurement(PROFILES_MEASUREMENT, PROFILES, EVENT),
    # The host probes.
    Measurement(BLOCK_LATENCY, BLOCK_PROBE),
    Measurement(BLOCK_LATENCY_HIST, BLOCK_PROBE),
    Measurement(BLOCK_OUTLIER, BLOCK_PROBE, EVENT),
    Measurement(BLOCK_OUTLIER_DROPPED, BLOCK_PROBE, COUNTER),
    Measurement(THREADS_MEASUREMENT, THREAD_SAMPLER),
    Measurement(THREAD_WAITS_MEASUREMENT, THREAD_SAMPLER),
    Measurement(THREAD_SAMPLER_MEASUREMENT, THREAD_SAMPLER),
    # Telegraf's host inputs and its own processors.
    Measurement("cpu", TELEGRAF),
    Measurement("mem", TELEGRAF),
    Measurement("net", TELEGRAF, COUNTER),  # bytes_recv and bytes_sent are cumulative per interface
    Measurement("diskio", TELEGRAF, COUNTER),  # /proc/diskstats counters per device
    Measurement("pressure", TELEGRAF, COUNTER),  # PSI "total", microseconds stalled since boot
    Measurement(TELEGRAF_WRITE_MEASUREMENT, TELEGRAF),
    Measurement(NO_END_SEEN_MEASUREMENT, TELEGRAF, EVENT),
    # The stack's lookups and self-check.
    Measurement(RESOLUTION_MEASUREMENT, STACK),
    Measurement(PEAK_SOURCE_MEASUREMENT, STACK),
    Measurement(TASK_SCOPE_MEASUREMENT, STACK),
    Measurement(SELF_CHECK_MEASUREMENT, STACK),
)

BY_NAME = {m.name: m for m in MEASUREMENTS}


def names(writer: str) -> tuple[str, ...]:
    return tuple(m.name for m in MEASUREMENTS if m.writer == writer)


# The measurements the dashboards read through "$rp" or "$peak_rp", and those
# the report reads from the 10-minute rollup for a long run: every one of
# them, and nothing else (tests/test_rollups.py compares).
ROLLED_MEASUREMENTS = tuple(m.name for m in MEASUREMENTS if m.rolled)
# Spark's metrics the Telegraf filter always stores (telegraf.conf, the "pass" rule).
SPARK_READ = tuple(m.name for m in MEASUREMENTS if m.writer == SPARK and m.name not in _SPARK_UNREAD_COUNTERS)
COUNTER_MEASUREMENTS = frozenset(m.name for m in MEASUREMENTS if m.kind == COUNTER)
