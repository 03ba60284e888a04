"""What sparkscope stores in InfluxDB, in one place: every measurement, who
writes it, whether it is a gauge, a counter or an event, and whether it is
rolled up; the tags every reader groups by; the policies and lookup
measurements the dashboards pick resolutions from.

Every reader and writer takes its names from here: no product module outside
store/ spells a measurement name (tests/test_schema.py). Generated from it
(python -m sparkscope.generate): the annotator's Java constants
(core/Schema.java, which every Java writer uses), Telegraf's ingest guard and
"no end seen" writer. Checked against it by tests/test_schema.py: the
Telegraf filter's list of Spark metrics and the events listener's namepass
(telegraf/telegraf.conf); by tests/test_schema_contract.py: what a real run
stored.

Standard library only: the probes import it.
"""

from __future__ import annotations

from dataclasses import dataclass

# --- tags ------------------------------------------------------------------------------

APPLICATION = "applicationid"
EXECUTOR = "executorid"
DRIVER = "driver"  # the executorid of the driver's metrics
# A Spark Connect server's jobs: who ran them (sparkscope_job; docs/capacity.md).
CONNECT_USER = "connect_user"  # a tag: few values per server
CONNECT_SESSION = "connect_session"  # fields: one value per client session, per operation
CONNECT_OPERATION = "connect_operation"

# --- who writes a measurement -------------------------------------------------------------

SPARK = "spark"  # Spark's GraphiteSink, through Telegraf's Graphite template (telegraf.conf)
ANNOTATOR = "annotator"  # the annotator jar (listener and plugins), over the events listener
BLOCK_PROBE = "block I/O probe"  # src/sparkscope/probes/blockprobe, over the events listener
THREAD_SAMPLER = "thread sampler"  # src/sparkscope/probes/threadprobe, over the events listener
PROFILES = "profiles"  # sparkscope profile and the profiler plugin's stacks (src/sparkscope/profiles)
TELEGRAF = "telegraf"  # Telegraf's own inputs and processors (host, internal, no end seen)
STACK = "stack"  # ./sparkscope up and status (lookups, self-check)

GAUGE, COUNTER, EVENT = "gauge", "counter", "event"


# Field types, as InfluxDB names them (SHOW FIELD KEYS): line protocol's 1i is an
# integer, 1 and 1.5 are floats, "x" a string, true a boolean.
INTEGER, FLOAT, STRING, BOOLEAN = "integer", "float", "string", "boolean"
FIELD_TYPES = (INTEGER, FLOAT, STRING, BOOLEAN)
# Telegraf tags every point it receives with the machine's name (omit_hostname =
# false in telegraf.conf): a tag of every measurement, whoever writes it.
HOST_TAG = "host"


@dataclass(frozen=True)
class Measurement:
    name: str
    writer: str
    kind: str = GAUGE  # counter: cumulative, read with differences or max, never a mean
    rolled: bool = False  # rolled up into the 1m/10m/30m policies (stack/rollups.py)
    # What a point holds, for the measurements written through the events listener,
    # where Telegraf's ingest guard (generated from these, sparkscope.ingest_guard)
    # stores only these tags and these fields with these types. Empty for Spark's
    # Graphite metrics (tags from telegraf.conf's templates, one float "value") and
    # Telegraf's own inputs.
    tags: tuple[str, ...] = ()
    fields: tuple[tuple[str, str], ...] = ()  # (name, type)
    # Fields named by what the writer sees (a streaming batch's durationMs keys,
    # written as <key in snake case>_ms): (suffix, type) for any name ending so.
    field_suffixes: tuple[tuple[str, str], ...] = ()
    # A second writer of the same points (Telegraf's "no end seen" writes the end
    # of a run whose driver fell silent, sparkscope_application, as the annotator does;
    # the annotator's process-tree sampler writes Spark's ProcessTree*RSSMemory). A
    # Spark measurement also written through the events listener declares the tags
    # and fields that writer may send, which the ingest guard holds it to.
    also_written_by: tuple[str, ...] = ()

    def field_type(self, field: str) -> str | None:
        """The declared type of a field of this measurement, None if it has no such field."""
        declared = dict(self.fields).get(field)
        if declared:
            return declared
        return next((kind for suffix, kind in self.field_suffixes if field.endswith(suffix)), None)


def _f(kind: str, *names: str) -> tuple[tuple[str, str], ...]:
    return tuple((name, kind) for name in names)


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
# The counters the annotator's task totals keep (TaskTimeTotals iterates them from Schema.java).
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
# Every name a reader or writer uses, as a constant: no product module outside
# store/ spells a measurement name (tests/test_schema.py holds it), so a rename
# is one edit here and a failed import anywhere it was missed.
JVM_HEAP_MEMORY = "JVMHeapMemory"
HEAP_MAX = "heap.max"
THREADPOOL_ACTIVE_TASKS = "threadpool.activeTasks"
ON_HEAP_EXECUTION_MEMORY = "OnHeapExecutionMemory"
ON_HEAP_STORAGE_MEMORY = "OnHeapStorageMemory"
ON_HEAP_UNIFIED_MEMORY = "OnHeapUnifiedMemory"
OFF_HEAP_EXECUTION_MEMORY = "OffHeapExecutionMemory"
OFF_HEAP_STORAGE_MEMORY = "OffHeapStorageMemory"
OFF_HEAP_UNIFIED_MEMORY = "OffHeapUnifiedMemory"
PROCESS_TREE_JVM_RSS_MEMORY = "ProcessTreeJVMRSSMemory"
PROCESS_TREE_PYTHON_RSS_MEMORY = "ProcessTreePythonRSSMemory"
PROCESS_TREE_OTHER_RSS_MEMORY = "ProcessTreeOtherRSSMemory"
PROCESS_TREE_RSS = (PROCESS_TREE_JVM_RSS_MEMORY, PROCESS_TREE_PYTHON_RSS_MEMORY, PROCESS_TREE_OTHER_RSS_MEMORY)
JVM_CPU_TIME = "jvmCpuTime"
MINOR_GC_COUNT = "MinorGCCount"
MINOR_GC_TIME = "MinorGCTime"
MAJOR_GC_COUNT = "MajorGCCount"
MAJOR_GC_TIME = "MajorGCTime"
RUN_TIME_COUNT = "runTime.count"
CPU_TIME_COUNT = "cpuTime.count"
JVM_GC_TIME_COUNT = "jvmGCTime.count"
DESERIALIZE_TIME_COUNT = "deserializeTime.count"
SHUFFLE_FETCH_WAIT_TIME_COUNT = "shuffleFetchWaitTime.count"
SHUFFLE_WRITE_TIME_COUNT = "shuffleWriteTime.count"
SHUFFLE_BYTES_WRITTEN_COUNT = "shuffleBytesWritten.count"
SHUFFLE_LOCAL_BYTES_READ_COUNT = "shuffleLocalBytesRead.count"
SHUFFLE_REMOTE_BYTES_READ_COUNT = "shuffleRemoteBytesRead.count"
MEMORY_BYTES_SPILLED_COUNT = "memoryBytesSpilled.count"
DISK_BYTES_SPILLED_COUNT = "diskBytesSpilled.count"
BYTES_READ_COUNT = "bytesRead.count"
BYTES_WRITTEN_COUNT = "bytesWritten.count"
RESULT_SERIALIZATION_TIME_COUNT = "resultSerializationTime.count"
SUCCEEDED_TASKS_COUNT = "succeededTasks.count"
SHUFFLE_TOTAL_BYTES_READ_COUNT = "shuffleTotalBytesRead.count"
TASKS_FAILED_TASKS_COUNT = "tasks.failedTasks.count"
STAGES_FAILED_STAGES_COUNT = "stages.failedStages.count"
TOTAL_GC_TIME = "TotalGCTime"

# The old generation's use after the last collection (the live set), per
# collector: G1 (Java's default), Parallel, CMS. Read by name, one query each,
# never through a measurement regex: InfluxDB 1.8 dies when a query over a
# measurement regex is interrupted after a matched measurement had no series
# (coordinator.LocalShardMapping.CreateIterator closes a nil iterator), as
# the collectors this run did not use have none.
OLD_GEN_POOLS = ("pools.G1-Old-Gen.used-after-gc", "pools.PS-Old-Gen.used-after-gc",
                 "pools.CMS-Old-Gen.used-after-gc")
FILESYSTEM_SCHEMES = ("file", "hdfs", "s3a", "gs", "abfs")


def filesystem_bytes(scheme: str, way: str) -> str:
    """Hadoop FileSystem statistics of one scheme: way is "read" or "write"."""
    return f"filesystem.{scheme}.{way}_bytes"


_SPARK_GAUGES = (
    JVM_HEAP_MEMORY, HEAP_MAX, THREADPOOL_ACTIVE_TASKS,
    ON_HEAP_EXECUTION_MEMORY, ON_HEAP_STORAGE_MEMORY, ON_HEAP_UNIFIED_MEMORY,
    OFF_HEAP_EXECUTION_MEMORY, OFF_HEAP_STORAGE_MEMORY, OFF_HEAP_UNIFIED_MEMORY,
    *PROCESS_TREE_RSS, *OLD_GEN_POOLS,
)
_SPARK_COUNTERS = (
    JVM_CPU_TIME, MINOR_GC_COUNT, MINOR_GC_TIME, MAJOR_GC_COUNT, MAJOR_GC_TIME,
    *TASK_TIME_COUNTERS, SHUFFLE_BYTES_WRITTEN_COUNT,
    SHUFFLE_LOCAL_BYTES_READ_COUNT, SHUFFLE_REMOTE_BYTES_READ_COUNT,
    MEMORY_BYTES_SPILLED_COUNT, DISK_BYTES_SPILLED_COUNT, BYTES_READ_COUNT, BYTES_WRITTEN_COUNT,
    RESULT_SERIALIZATION_TIME_COUNT, SUCCEEDED_TASKS_COUNT,
    # Hadoop FileSystem statistics: Dropwizard gauges whose value only grows.
    *(filesystem_bytes(scheme, way) for scheme in FILESYSTEM_SCHEMES for way in ("read", "write")),
)
# Read over the whole range only (totals, tables): never through a rollup.
_SPARK_RAW_COUNTERS = (SHUFFLE_TOTAL_BYTES_READ_COUNT, TASKS_FAILED_TASKS_COUNT, STAGES_FAILED_STAGES_COUNT)
# Counters of Spark's JVM source that no panel reads (kept with SPARKSCOPE_UNREAD_METRICS=pass):
# named here so that their kind is known to a user's own query through dashboards.queries.is_counter.
_SPARK_UNREAD_COUNTERS = (TOTAL_GC_TIME, "G1-Young-Generation.count", "G1-Young-Generation.time",
                          "G1-Old-Generation.count", "G1-Old-Generation.time")

# --- sparkscope's own writers -----------------------------------------------------------------

APPLICATION_MEASUREMENT = "sparkscope_application"  # a run's start and end (status, name, end_time_ms)
# The tag of sparkscope_application naming the recurring job a run belongs to:
# spark.sparkscope.job when set, else the application name; alerts and the
# summary dashboard group runs by it. A tag beside the run's applicationid, of
# which it is a function: it adds no series (one run, one job), and its values
# are as many as the recurring jobs (one per spark.sparkscope.job a user names).
JOB_KEY = "job"
QUERY_MEASUREMENT = "sparkscope_query"  # SQL executions
JOB_MEASUREMENT = "sparkscope_job"
STAGE_MEASUREMENT = "sparkscope_stage"  # stage attempts, with task statistics and the straggler verdict
EXECUTOR_MEASUREMENT = "sparkscope_executor"  # executors added and removed
EXECUTOR_PEAKS_MEASUREMENT = "sparkscope_executor_peaks"  # each executor's exact peaks, whole run
STAGE_PEAKS_MEASUREMENT = "sparkscope_stage_peaks"  # each stage's exact peaks over its executors
STAGE_EXECUTOR_PEAKS_MEASUREMENT = "sparkscope_stage_executor_peaks"
MEMORY_CONF_MEASUREMENT = "sparkscope_memory_conf"  # the memory settings of the run, as given
STREAMING_MEASUREMENT = "sparkscope_streaming"  # one point per micro-batch
STREAMING_QUERY_MEASUREMENT = "sparkscope_streaming_query"  # a streaming query's run, start to end
STREAMING_STATE_MEASUREMENT = "sparkscope_streaming_state"
STREAMING_END_MEASUREMENT = "sparkscope_streaming_end"
ANNOTATION_MEASUREMENTS = (APPLICATION_MEASUREMENT, QUERY_MEASUREMENT, JOB_MEASUREMENT, STAGE_MEASUREMENT,
                           EXECUTOR_MEASUREMENT)
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
TELEGRAF_WRITE_MEASUREMENT = "internal_write"
# Telegraf's host inputs (telegraf.conf).
CPU_MEASUREMENT, MEM_MEASUREMENT, NET_MEASUREMENT = "cpu", "mem", "net"
CPU_TAG = "cpu"  # the cpu input's tag: cpu0, cpu1 ... and cpu-total, the sum of them
DISKIO_MEASUREMENT, PRESSURE_MEASUREMENT = "diskio", "pressure"  # Telegraf's own: buffer size and drops per output

# The tags of the annotator's events: a run, and where it is (RUNNING, FINISHED ...).
# "status" is a tag of these and a field of sparkscope_stage_peaks.
STATUS = "status"
_RUN_TAGS = (APPLICATION, STATUS)
# Spark's ExecutorMetricType names the annotator writes as integer fields
# (ExecutorPeaks iterates them from Schema.java; TaskPeakExecutionMemory last).
EXECUTOR_METRICS = ("JVMHeapMemory", "JVMOffHeapMemory", "OnHeapExecutionMemory", "OffHeapExecutionMemory",
                    "OnHeapStorageMemory", "OffHeapStorageMemory", "OnHeapUnifiedMemory", "OffHeapUnifiedMemory",
                    "DirectPoolMemory", "MappedPoolMemory", "ProcessTreeJVMVMemory", "ProcessTreeJVMRSSMemory",
                    "ProcessTreePythonVMemory", "ProcessTreePythonRSSMemory", "ProcessTreeOtherVMemory",
                    "ProcessTreeOtherRSSMemory", "MinorGCCount", "MinorGCTime", "MajorGCCount", "MajorGCTime",
                    "TotalGCTime", "ConcurrentGCCount", "ConcurrentGCTime", "TaskPeakExecutionMemory")
_PEAKS = _f(INTEGER, *EXECUTOR_METRICS)
# The Spark settings the annotator writes, as given, to sparkscope_memory_conf
# (ExecutorPeaks iterates them from Schema.java).
MEMORY_SETTINGS = ("spark.master", "spark.executor.memory", "spark.executor.memoryOverhead",
                   "spark.executor.memoryOverheadFactor", "spark.executor.pyspark.memory", "spark.executor.cores",
                   "spark.executor.instances", "spark.driver.memory", "spark.driver.memoryOverhead",
                   "spark.driver.cores", "spark.memory.fraction", "spark.memory.storageFraction",
                   "spark.memory.offHeap.enabled", "spark.memory.offHeap.size",
                   "spark.executor.metrics.pollingInterval", "spark.executor.heartbeatInterval",
                   "spark.dynamicAllocation.enabled", "spark.task.cpus")
INGEST_REFUSED_MEASUREMENT = "sparkscope_ingest_refused"
# The process tree's resident memory (JVM, Python workers, other children), in
# bytes: Spark's ExecutorMetrics with spark.executor.processTreeMetrics.enabled
# (over Graphite; Spark forks pgrep per process at every poll), or, with that off
# (the shipped setting), the annotator's fork-free sampler (proctree
# ProcessTreeSampler, in every JVM of ContainerMemoryPlugin) over the events
# listener: the same names, the tags the readers group by and a float "value", so
# every reader reads either source the same way. The sampler stays off where
# Spark's own are on: never the same series twice.
_PROCESS_TREE_SHAPE = {"tags": (APPLICATION, EXECUTOR), "fields": _f(FLOAT, "value"), "also_written_by": (ANNOTATOR,)}

MEASUREMENTS: tuple[Measurement, ...] = (
    *(Measurement(name, SPARK, GAUGE, rolled=True, **(_PROCESS_TREE_SHAPE if name in PROCESS_TREE_RSS else {}))
      for name in _SPARK_GAUGES),
    *(Measurement(name, SPARK, COUNTER, rolled=True) for name in _SPARK_COUNTERS),
    *(Measurement(name, SPARK, COUNTER) for name in _SPARK_RAW_COUNTERS),
    *(Measurement(name, SPARK, COUNTER) for name in _SPARK_UNREAD_COUNTERS),
    # The annotator (annotator/src/main/java/dev/sparkscope/annotator/): tags and
    # fields as its Point calls write them (AnnotationRecorder, ExecutorPeaks,
    # CgroupMemory, StreamingQueries, TaskTimeTotals, ProfileLines).
    # job: the recurring job's stable key (spark.sparkscope.job, else the
    # application name), which comparisons, alerts and boards group runs by.
    Measurement(APPLICATION_MEASUREMENT, ANNOTATOR, EVENT, tags=(*_RUN_TAGS, JOB_KEY),
                fields=_f(STRING, "app_name", "spark_user", "spark_version", "text")
                + _f(INTEGER, "end_time_ms", "duration_ms", "exit_code"),
                also_written_by=(TELEGRAF,)),
    Measurement(QUERY_MEASUREMENT, ANNOTATOR, EVENT, tags=_RUN_TAGS,
                fields=_f(INTEGER, "execution_id", "end_time_ms", "duration_ms")
                + _f(STRING, "text", "description", "error")),
    # task_ms: the job's tasks' time from launch to finish, summed (the slots the
    # scheduler held for them), task_count its tasks seen. On a Spark Connect server
    # the job's owner: the user a tag (a server has few users, and dashboards group
    # and pick by it), the session and the operation fields (a new id for every
    # client connection and every statement: as tags they would grow a series each).
    Measurement(JOB_MEASUREMENT, ANNOTATOR, EVENT, tags=(*_RUN_TAGS, CONNECT_USER),
                fields=_f(INTEGER, "job_id", "execution_id", "end_time_ms", "duration_ms", "task_ms", "task_count")
                + _f(STRING, "text", "job_group", "description", "error", CONNECT_SESSION, CONNECT_OPERATION)),
    Measurement(STAGE_MEASUREMENT, ANNOTATOR, EVENT, tags=(*_RUN_TAGS, "straggler"),
                fields=_f(INTEGER, "stage_id", "attempt", "job_id", "num_tasks", "execution_id", "end_time_ms",
                          "duration_ms", "task_count_seen", "task_failed_count", "task_killed_count",
                          "task_resubmitted_count", "task_max_ms", "task_p50_ms", "task_p75_ms", "task_p95_ms",
                          "task_mean_input_bytes", "task_mean_shuffle_read_bytes", "slowest_partition",
                          "slowest_input_bytes", "slowest_shuffle_read_bytes", "slowest_gc_ms",
                          "slowest_fetch_wait_ms")
                + _f(FLOAT, "skew_ratio")
                + _f(STRING, "text", "job_description", "name", "failure_reason", "slowest_executor",
                     "slowest_host")),
    Measurement(EXECUTOR_MEASUREMENT, ANNOTATOR, EVENT, tags=(*_RUN_TAGS, "event"),
                fields=_f(STRING, "executor_id", "host", "text", "reason", "cause")
                + _f(INTEGER, "cores", "exit_code")),
    Measurement(EXECUTOR_PEAKS_MEASUREMENT, ANNOTATOR, tags=(APPLICATION,),
                fields=_PEAKS + _f(STRING, "executor_id", "written_at", "text")),
    Measurement(STAGE_PEAKS_MEASUREMENT, ANNOTATOR, tags=(APPLICATION,),
                fields=_PEAKS + _f(INTEGER, "stage_id", "attempt", "execution_id", "executors")
                + _f(STRING, "name", "status", "heap_peak_executor", "execution_peak_executor", "text")),
    Measurement(STAGE_EXECUTOR_PEAKS_MEASUREMENT, ANNOTATOR, tags=(APPLICATION,),
                fields=_PEAKS + _f(INTEGER, "stage_id", "attempt", "execution_id") + _f(STRING, "executor_id")),
    Measurement(MEMORY_CONF_MEASUREMENT, ANNOTATOR, tags=(APPLICATION,),
                fields=_f(STRING, *MEMORY_SETTINGS) + _f(INTEGER, "settings_set")),
    Measurement(CONTAINER_MEASUREMENT, ANNOTATOR, tags=(APPLICATION, EXECUTOR),
                fields=_f(INTEGER, "cgroup_version", "usage_bytes", "working_set_bytes", "anon_bytes",
                          "file_bytes", "limit_bytes", "limit_hits", "oom_kills")
                + _f(FLOAT, "pressure_some_avg10")),
    Measurement(STREAMING_MEASUREMENT, ANNOTATOR, EVENT, tags=(APPLICATION, "query_name"),
                fields=_f(STRING, "query_id", "run_id")
                + _f(INTEGER, "batch_id", "input_rows", "batch_ms", "trigger_ms", "watermark_ms",
                     "event_time_max_ms", "event_time_lag_ms", "backlog", "state_rows", "state_memory_bytes")
                + _f(FLOAT, "input_rate", "processing_rate"),
                # StreamingQueries.durationField: each durationMs key but triggerExecution.
                field_suffixes=(("_ms", INTEGER),)),
    Measurement(STREAMING_QUERY_MEASUREMENT, ANNOTATOR, EVENT, tags=_RUN_TAGS,
                fields=_f(STRING, "query_id", "run_id", "name", "text", "exception", "slowest_batch_why")
                + _f(INTEGER, "end_time_ms", "duration_ms", "batches", "slowest_batch_id", "slowest_batch_ms")),
    Measurement(STREAMING_STATE_MEASUREMENT, ANNOTATOR, tags=(APPLICATION, "query_name", "operator"),
                fields=_f(INTEGER, "batch_id", "rows_total", "rows_updated", "memory_bytes",
                          "rows_dropped_by_watermark")),
    # stamped when a query ended (failed 0/1)
    Measurement(STREAMING_END_MEASUREMENT, ANNOTATOR, EVENT, tags=(APPLICATION, "query_name"),
                fields=_f(STRING, "query_id", "run_id", "exception") + _f(INTEGER, "failed", "start_time_ms")),
    *(Measurement(TASK_TOTALS_PREFIX + counter, ANNOTATOR, COUNTER, rolled=True, tags=(APPLICATION,),
                  fields=_f(FLOAT, "value"))
      for counter in TASK_TIME_COUNTERS),
    # Profiles: the profiler plugin (Java ProfileLines) and sparkscope profile / the
    # thread sampler (Python profiles/store.py) write the same lines.
    Measurement(FLAME_MEASUREMENT, PROFILES, tags=(APPLICATION, EXECUTOR, "kind"),
                fields=_f(INTEGER, "level", "value", "self") + _f(STRING, "label", "profile")),
    # executorid is a field here, a tag in sparkscope_flame: a name that is both.
    Measurement(PROFILES_MEASUREMENT, PROFILES, EVENT, tags=(APPLICATION, "kind"),
                fields=_f(STRING, "profile", EXECUTOR, "stage", "unit", "top") + _f(FLOAT, "seconds")
                + _f(INTEGER, "samples")),
    # The host probes (src/sparkscope/probes/blockprobe/probe.py, threadprobe/periods.py, sampler.py).
    Measurement(BLOCK_LATENCY, BLOCK_PROBE, tags=("device", "direction"),
                fields=_f(INTEGER, "count") + _f(FLOAT, "mean_ms", "p50_ms", "p99_ms", "max_ms")),
    Measurement(BLOCK_LATENCY_HIST, BLOCK_PROBE, tags=("device", "direction", "le_us"), fields=_f(INTEGER, "count")),
    Measurement(BLOCK_OUTLIER, BLOCK_PROBE, EVENT, tags=("device", "direction"),
                fields=_f(FLOAT, "latency_ms") + _f(INTEGER, "bytes", "pid") + _f(STRING, "comm", "text")),
    Measurement(BLOCK_OUTLIER_DROPPED, BLOCK_PROBE, COUNTER, fields=_f(INTEGER, "count")),
    Measurement(THREADS_MEASUREMENT, THREAD_SAMPLER, tags=(APPLICATION, EXECUTOR, "class"),
                fields=_f(FLOAT, "running", "disk", "sleeping", "other", "threads", "on_cpu", "cpu_wait",
                          "io", "network", "lock", "other_wait") + _f(INTEGER, "samples")),
    Measurement(THREAD_WAITS_MEASUREMENT, THREAD_SAMPLER, tags=(APPLICATION, EXECUTOR, "state", "wchan"),
                fields=_f(FLOAT, "threads", "seconds")),
    Measurement(THREAD_SAMPLER_MEASUREMENT, THREAD_SAMPLER,
                fields=_f(FLOAT, "cpu_pct") + _f(INTEGER, "jvms", "thread_samples", "skipped", "errors",
                                                  "dropped_lines")),
    # Telegraf's host inputs and its own processors.
    Measurement(CPU_MEASUREMENT, TELEGRAF),
    Measurement(MEM_MEASUREMENT, TELEGRAF),
    Measurement(NET_MEASUREMENT, TELEGRAF, COUNTER),  # bytes_recv and bytes_sent are cumulative per interface
    Measurement(DISKIO_MEASUREMENT, TELEGRAF, COUNTER),  # /proc/diskstats counters per device
    Measurement(PRESSURE_MEASUREMENT, TELEGRAF, COUNTER),  # PSI "total", microseconds stalled since boot
    Measurement(TELEGRAF_WRITE_MEASUREMENT, TELEGRAF),
    Measurement(NO_END_SEEN_MEASUREMENT, TELEGRAF, EVENT, tags=(APPLICATION,),
                fields=_f(INTEGER, "end_time_ms", "silent_s")),
    # Telegraf's ingest guard: points and keys it refused at the door, per reason,
    # since Telegraf started (sparkscope.ingest_guard; ./sparkscope status shows them).
    Measurement(INGEST_REFUSED_MEASUREMENT, TELEGRAF, COUNTER, tags=("refusal",),
                fields=_f(INTEGER, "points", "keys") + _f(STRING, "last")),
    # The stack's lookups and self-check.
    Measurement(RESOLUTION_MEASUREMENT, STACK),
    Measurement(PEAK_SOURCE_MEASUREMENT, STACK),
    Measurement(TASK_SCOPE_MEASUREMENT, STACK),
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

# Which of Spark's metrics sources each read name comes from: the namespace of
# <prefix>.<app>.<executor>.<source>.<name> (tests/test_schema.py checks it
# against the names a real Spark application sent).
SPARK_SOURCES: dict[str, tuple[str, ...]] = {
    "ExecutorMetrics": (JVM_HEAP_MEMORY, ON_HEAP_EXECUTION_MEMORY, ON_HEAP_STORAGE_MEMORY, ON_HEAP_UNIFIED_MEMORY,
                        OFF_HEAP_EXECUTION_MEMORY, OFF_HEAP_STORAGE_MEMORY, OFF_HEAP_UNIFIED_MEMORY, *PROCESS_TREE_RSS,
                        MINOR_GC_COUNT, MINOR_GC_TIME, MAJOR_GC_COUNT, MAJOR_GC_TIME),
    "JVMCPU": (JVM_CPU_TIME,),
    "executor": (THREADPOOL_ACTIVE_TASKS, *TASK_TIME_COUNTERS, RESULT_SERIALIZATION_TIME_COUNT, SUCCEEDED_TASKS_COUNT,
                 SHUFFLE_BYTES_WRITTEN_COUNT, SHUFFLE_LOCAL_BYTES_READ_COUNT, SHUFFLE_REMOTE_BYTES_READ_COUNT,
                 SHUFFLE_TOTAL_BYTES_READ_COUNT, MEMORY_BYTES_SPILLED_COUNT, DISK_BYTES_SPILLED_COUNT,
                 BYTES_READ_COUNT, BYTES_WRITTEN_COUNT,
                 *(filesystem_bytes(scheme, way) for scheme in FILESYSTEM_SCHEMES for way in ("read", "write"))),
    "jvm": (HEAP_MAX, *OLD_GEN_POOLS),
    "appStatus": (TASKS_FAILED_TASKS_COUNT, STAGES_FAILED_STAGES_COUNT),
}
# The sources Spark's sink sends whole (its regex, spark/conf.sink_regex): Spark
# compiles the sink's regex anew for every metric at every report (GraphiteSink's
# MetricFilter, Spark 3.5 to 4.3), so a regex naming each of the ~50 read names
# cost more CPU than the lines it saved; naming these three sources and the five
# other names halved the sink's CPU again (docs/performance.md). Of the rest of
# these sources, Telegraf keeps only what SPARK_READ names.
SINK_WHOLE_SOURCES = ("ExecutorMetrics", "JVMCPU", "executor")


# --- what comes in through the events listener --------------------------------------------

# The writers that post line protocol to Telegraf's events listener: for their
# measurements Telegraf's ingest guard holds the declared tags and fields.
EVENTS_WRITERS = (ANNOTATOR, BLOCK_PROBE, THREAD_SAMPLER, PROFILES)
EVENTS_MEASUREMENTS = tuple(m for m in MEASUREMENTS
                            if m.writer in EVENTS_WRITERS or set(m.also_written_by) & set(EVENTS_WRITERS))
# Names that are a tag of one measurement and a field of another (or of the same:
# Telegraf's host tag beside sparkscope_executor's host field). A reader qualifies
# them ("status"::tag): InfluxQL reads a bare name as the field when both exist.
_ALL_TAGS = {t for m in MEASUREMENTS for t in m.tags} | {HOST_TAG}
_ALL_FIELDS = {f for m in MEASUREMENTS for f, _ in m.fields}
TAG_AND_FIELD_NAMES = frozenset(_ALL_TAGS & _ALL_FIELDS)
# Tags that are never a field of any measurement, and fields that are never a tag.
TAGS_ONLY = frozenset(_ALL_TAGS - _ALL_FIELDS)
FIELDS_ONLY = frozenset(_ALL_FIELDS - _ALL_TAGS)
