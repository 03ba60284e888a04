"""The alert rules, one entry each. Numbers come from thresholds.py.

To add a rule, append an entry to `rules()`:

    AlertRule(
        uid="sparkscope-<what>",                  # stable: Grafana keys the rule by it
        title="<what is wrong, in words>",
        queries={"A": Query('SELECT ... FROM "<measurement>" WHERE $timeFilter '
                            'GROUP BY "applicationid"', t.<window>)},
        value="$A",                               # the number the messages show
        fires=Above(t.<threshold>),               # or math over $A, $B ...
        for_s=t.<for>, severity="warning", component="spark",
        panel="<a panel title of the live dashboard>", url_vars=("applicationid",),
        summary="... {{ $labels.applicationid }} ... {{ $values.VALUE.Value }}",
        description="What it means and what to change.")

then add its threshold to thresholds.py, run `.venv/bin/python -m sparkscope.generate`,
and give it a test in tests/test_alerts.py on a run that has the problem and
one that does not (src/sparkscope_testkit/alerts12.py evaluates rules as Grafana does).
Every query: one InfluxQL statement, `$timeFilter` for the window (no now(), so
that a test can evaluate the rule at any past moment), GROUP BY the tags that
name an alert instance, and no $__interval (its value in an alert query is not
what a panel gets).
"""

from __future__ import annotations

from sparkscope.alerts.provisioning import Above, AlertRule, PromQuery, Query
from sparkscope.dashboards.reads import APP_LABEL, EXECUTOR_LABEL
from sparkscope.store.prometheus import series_name
from sparkscope.alerts.thresholds import DEFAULTS, Thresholds
# Two rules window a run's end by a point stamped when the end was seen:
# NO_END_SEEN_MEASUREMENT, Telegraf's note of the moment it ended a run "no end
# seen" (telegraf.conf, processors.starlark "No end seen"), as the run's own
# NO_END_SEEN point in sparkscope_application is stamped at the run's start, too
# far back to window; STREAMING_END_MEASUREMENT, the annotator's note of each
# streaming query's end at the moment it came (StreamingQueries.java), as
# sparkscope_streaming_query's end point is stamped at the query's start,
# perhaps days back.
from sparkscope.store.reads import FINISHED
from sparkscope.store.schema import (APPLICATION_MEASUREMENT, BLOCK_OUTLIER, CONTAINER_MEASUREMENT, JOB_KEY, EXECUTOR_MEASUREMENT, HEAP_MAX,
                                     JVM_HEAP_MEMORY, MAJOR_GC_TIME, MINOR_GC_TIME, NO_END_SEEN_MEASUREMENT,
                                     STAGE_MEASUREMENT, STREAMING_END_MEASUREMENT, STREAMING_MEASUREMENT,
                                     TELEGRAF_WRITE_MEASUREMENT, THREADPOOL_ACTIVE_TASKS)

# sparkscope_executor causes (annotator ExecutorLoss.java) that are no loss: the driver gave the
# executor back, or the cluster manager moved it away. Every other cause is: container_oom, killed,
# jvm_oom, exited, and other (on standalone, a SIGKILLed executor's disconnect often reaches the
# driver before its exit code: "Remote RPC client disassociated").
NOT_LOST = ("released", "decommissioned")

_EXECUTOR = '{{ $labels.executorid }} of {{ $labels.applicationid }}'


def _percent(share: float) -> str:
    return f"{share * 100:g} %"


def _minutes(seconds: int) -> str:
    return f"{seconds / 60:g} min" if seconds < 3600 else f"{seconds / 3600:g} h"


def _baseline(t: Thresholds, aggregate: str) -> Query:
    """An aggregate of the durations of each job's baseline: its last baseline_runs
    finished runs before its newest (OFFSET 1), newest first within the window
    (InfluxDB wants the outer query ordered as its subquery)."""
    return Query(f'SELECT {aggregate}("duration_ms") FROM (SELECT "duration_ms" FROM "{APPLICATION_MEASUREMENT}" '
                 f'WHERE "status" = \'{FINISHED}\' AND $timeFilter GROUP BY "{JOB_KEY}" ORDER BY time DESC '
                 f'LIMIT {t.baseline_runs} OFFSET 1) GROUP BY "{JOB_KEY}" ORDER BY time DESC', t.baseline_window_s)


# Where the rules read Spark's metrics: InfluxDB (the default), or a Prometheus
# store (SPARKSCOPE_METRICS_STORE=thanos or remote), where the rules on
# Spark's metrics (heap near max, GC share, idle slots) are PromQL twins of the
# InfluxQL ones: the same instances (labels applicationid, executorid), the
# same reductions, math and condition. The rules on events, the annotator's
# points, the probes' and Telegraf's own stay on InfluxDB in both: a
# Prometheus store holds none of them (telegraf/thanos.conf).
INFLUXDB_STORE, PROMETHEUS_STORE = "influxdb", "prometheus"
_BY_EXECUTOR = f"{APP_LABEL}, {EXECUTOR_LABEL}"


def _prom(measurement: str, per_executor: bool = True) -> str:
    """A series' selector, of the series that name an instance whole: a series without one of
    the instance's labels would be a label set inside every run's (by () drops nothing to
    an empty label, as InfluxDB's GROUP BY does), which Grafana's union joins with each of
    them: duplicate results, an Error."""
    labels = [APP_LABEL, EXECUTOR_LABEL] if per_executor else [APP_LABEL]
    return series_name(measurement, "value") + "{" + ", ".join(f'{label}!=""' for label in labels) + "}"


def _spread(measurement: str) -> str:
    """A counter's increase over the window, as InfluxQL's spread(): its highest minus its lowest sample."""
    return (f"max by ({_BY_EXECUTOR}) (max_over_time({_prom(measurement)}[$__range]) - "
            f"min_over_time({_prom(measurement)}[$__range]))")


def _on(store: str, influxdb: dict[str, Query], prometheus: dict[str, Query | PromQuery]) -> dict:
    """A rule's queries in the store of Spark's metrics: every refId in both, in the same order."""
    if list(influxdb) != list(prometheus):
        raise ValueError(f"the twins' refIds differ: {list(influxdb)} and {list(prometheus)}")
    return prometheus if store == PROMETHEUS_STORE else influxdb


def rules(t: Thresholds = DEFAULTS, store: str = INFLUXDB_STORE) -> list[AlertRule]:
    if store not in (INFLUXDB_STORE, PROMETHEUS_STORE):
        raise ValueError(f"store {store!r}: {INFLUXDB_STORE} or {PROMETHEUS_STORE}")
    kept = " AND ".join(f"\"cause\" <> '{c}'" for c in NOT_LOST)
    cores = Query(f'SELECT last("cores") FROM "{EXECUTOR_MEASUREMENT}" WHERE "event" = \'added\' '
                  'AND $timeFilter GROUP BY "applicationid"', t.idle_cores_window_s)
    return [
        AlertRule(
            uid="sparkscope-heap-near-max", title="Executor heap near its max",
            queries=_on(store, {
                "A": Query(f'SELECT min("value") FROM "{JVM_HEAP_MEMORY}" WHERE $timeFilter '
                           'GROUP BY "applicationid", "executorid"', t.heap_window_s),
                "B": Query(f'SELECT max("value") FROM "{HEAP_MAX}" WHERE $timeFilter '
                           'GROUP BY "applicationid", "executorid"', t.heap_window_s),
            }, {
                "A": PromQuery(f"min by ({_BY_EXECUTOR}) (min_over_time({_prom(JVM_HEAP_MEMORY)}[$__range]))",
                               t.heap_window_s),
                "B": PromQuery(f"max by ({_BY_EXECUTOR}) (max_over_time({_prom(HEAP_MAX)}[$__range]))",
                               t.heap_window_s),
            }),
            value="$A / $B",
            fires=f"$B > 0 && $A > {t.heap_used_share} * $B",
            for_s=t.heap_for_s, severity="warning", component="spark",
            panel="JVM heap used vs max", url_vars=("applicationid", "executorid"),
            summary=f"Heap of executor {_EXECUTOR} stays at {{{{ humanizePercentage $values.VALUE.Value }}}} "
                    f"of its max, even right after garbage collection",
            description=(
                f"For {_minutes(t.heap_for_s)} the lowest heap use of this JVM in every "
                f"{_minutes(t.heap_window_s)} was above {_percent(t.heap_used_share)} of its max heap: live data "
                "fill the heap, and an OutOfMemoryError (executor lost, exit 52) or a GC storm is next.\n"
                "What to do: give executors more heap (spark.executor.memory) or fewer concurrent tasks "
                "(spark.executor.cores), cache less (unpersist what later stages do not read, or persist "
                "MEMORY_AND_DISK_SER), and look for a skewed key or a large collect/broadcast on the stage "
                "running now. executorid driver: the driver's heap (spark.driver.memory; collect() and "
                "broadcasts land there).")),
        AlertRule(
            uid="sparkscope-gc-share", title="Executor spends its time in garbage collection",
            queries=_on(store, {
                "A": Query(f'SELECT spread("value") FROM "{MINOR_GC_TIME}" WHERE $timeFilter '
                           'GROUP BY "applicationid", "executorid"', t.gc_window_s),
                "B": Query(f'SELECT spread("value") FROM "{MAJOR_GC_TIME}" WHERE $timeFilter '
                           'GROUP BY "applicationid", "executorid"', t.gc_window_s),
            }, {
                "A": PromQuery(_spread(MINOR_GC_TIME), t.gc_window_s),
                "B": PromQuery(_spread(MAJOR_GC_TIME), t.gc_window_s),
            }),
            value=f"($A + $B) / {t.gc_window_s * 1000}",
            fires=Above(t.gc_share),
            for_s=t.gc_for_s, severity="warning", component="spark",
            panel="GC time share", url_vars=("applicationid", "executorid"),
            summary=f"Executor {_EXECUTOR} spent {{{{ humanizePercentage $values.VALUE.Value }}}} of the last "
                    f"{_minutes(t.gc_window_s)} in garbage collection",
            description=(
                f"Garbage collection pauses (minor + major) took more than {_percent(t.gc_share)} of wall-clock "
                f"time over {_minutes(t.gc_window_s)}, for {_minutes(t.gc_for_s)}: tasks run that much slower, "
                "and long pauses miss heartbeats (executor lost with a heartbeat timeout).\n"
                "What to do: the heap is too small for what the tasks hold. Give executors more memory "
                "(spark.executor.memory) or fewer cores each, use more partitions so each task holds less "
                "(spark.sql.shuffle.partitions), avoid caching deserialized objects (MEMORY_ONLY_SER or "
                "DataFrame caches), and check the heap panel: a heap that stays full is the rule above.")),
        AlertRule(
            uid="sparkscope-executor-lost", title="Executor lost",
            queries={
                "A": Query(f'SELECT count("executor_id") FROM "{EXECUTOR_MEASUREMENT}" WHERE "event" = \'removed\' '
                           f'AND {kept} AND $timeFilter GROUP BY "applicationid"', t.executor_lost_window_s),
            },
            value="$A", fires=Above(0), for_s=0, severity="critical", component="spark",
            panel="Executors alive", url_vars=("applicationid",),
            summary="{{ $values.VALUE.Value }} executor(s) of {{ $labels.applicationid }} lost in the last "
                    f"{_minutes(t.executor_lost_window_s)}",
            description=(
                "Spark removed executors it had not given back: the container's OOM kill (Kubernetes "
                "OOMKilled, YARN \"exceeding physical memory limits\"), a kill signal (exit 137: the kernel's OOM "
                "killer or an external kill), the JVM's own OutOfMemoryError (exit 52), another exit, or a lost "
                "connection (\"Remote RPC client disassociated\": killed, or its host lost). Their tasks run "
                "again elsewhere; shuffle output they held is computed again. Executors released by dynamic "
                "allocation or decommissioned do not count.\n"
                "What to do: the cause and exit code of each loss are in sparkscope_executor (cause, exit_code, "
                "reason) and on the graphs as executor changes; ./sparkscope report <application> says what "
                "filled a container and which setting to change. Heap full before the loss: "
                "spark.executor.memory. Container full with the heap fine: spark.executor.memoryOverhead "
                "(Python workers: spark.executor.pyspark.memory).")),
        AlertRule(
            uid="sparkscope-container-oom-kill", title="OOM kill inside an executor's container",
            queries={
                "A": Query(f'SELECT spread("oom_kills") FROM "{CONTAINER_MEASUREMENT}" WHERE $timeFilter '
                           'GROUP BY "applicationid", "executorid"', t.container_oom_window_s),
            },
            value="$A", fires=Above(0), for_s=0, severity="critical", component="spark",
            panel="OOM kills and limit hits in the container", url_vars=("applicationid", "executorid"),
            summary=f"The kernel killed {{{{ $values.VALUE.Value }}}} process(es) in the container of executor "
                    f"{_EXECUTOR} in the last {_minutes(t.container_oom_window_s)}",
            description=(
                "The container's memory limit was reached and the kernel's OOM killer killed a process in it "
                "while the executor's JVM lived on: usually a Python worker (PySpark UDFs, pandas), whose task "
                "then failed and was retried.\n"
                "What to do: Python workers live outside the heap: raise spark.executor.memoryOverhead or set "
                "spark.executor.pyspark.memory, make each Python task hold less (more partitions, "
                "mapInPandas in batches), or lower spark.executor.cores so fewer workers share the "
                "container. ./sparkscope report <application> says what filled the container.")),
        AlertRule(
            uid="sparkscope-container-near-limit", title="Executor's container near its memory limit",
            queries={
                "A": Query(f'SELECT max("working_set_bytes") / max("limit_bytes") FROM "{CONTAINER_MEASUREMENT}" '
                           'WHERE "limit_bytes" > 0 AND $timeFilter GROUP BY "applicationid", "executorid"',
                           t.container_window_s),
            },
            value="$A", fires=Above(t.container_used_share), for_s=t.container_for_s,
            severity="warning", component="spark",
            panel="Container memory against its limit", url_vars=("applicationid", "executorid"),
            summary=f"Container of executor {_EXECUTOR} at {{{{ humanizePercentage $values.VALUE.Value }}}} of "
                    "its memory limit",
            description=(
                f"The container's working set (memory in use minus inactive file cache: what the OOM killer and "
                f"Kubernetes judge) has been above {_percent(t.container_used_share)} of its limit for "
                f"{_minutes(t.container_for_s)}. The next allocation past the limit gets a process killed: a "
                "Python worker, or the executor itself (exit 137).\n"
                "What to do: see the panel for what holds it (JVM RSS, Python RSS, other). JVM RSS above the "
                "heap: off-heap and direct memory, raise spark.executor.memoryOverhead. Python: "
                "spark.executor.pyspark.memory or smaller Python batches. A limit below heap + overhead: no "
                "Spark setting fixes it, ask for a bigger container.")),
        AlertRule(
            uid="sparkscope-idle-slots", title="Run holds most of its slots idle",
            queries=_on(store, {
                "A": Query(f'SELECT sum("busy") FROM (SELECT mean("value") AS "busy" FROM "{THREADPOOL_ACTIVE_TASKS}" '
                           'WHERE $timeFilter GROUP BY "applicationid", "executorid") GROUP BY "applicationid"',
                           t.idle_window_s),
                "B": Query(f'SELECT count("busy") FROM (SELECT mean("value") AS "busy" FROM '
                           f'"{THREADPOOL_ACTIVE_TASKS}" WHERE $timeFilter GROUP BY "applicationid", "executorid") '
                           'GROUP BY "applicationid"', t.idle_window_s),
                "C": cores,
            }, {
                # Each JVM's mean running tasks over the window, added up and counted per run; the
                # cores stay the annotator's (InfluxDB): Spark's metrics do not carry them.
                "A": PromQuery(f"sum by ({APP_LABEL}) (avg_over_time({_prom(THREADPOOL_ACTIVE_TASKS, False)}[$__range]))",
                               t.idle_window_s),
                "B": PromQuery(f"count by ({APP_LABEL}) (avg_over_time({_prom(THREADPOOL_ACTIVE_TASKS, False)}"
                               "[$__range]))", t.idle_window_s),
                "C": cores,
            }),
            value="1 - $A / ($B * $C)",
            fires=f"$B > 0 && $C > 0 && $A < {t.idle_slots_busy_below} * $B * $C",
            for_s=t.idle_for_s, severity="warning", component="spark",
            panel="Slots busy vs held", url_vars=("applicationid",),
            summary="{{ $labels.applicationid }} left {{ humanizePercentage $values.VALUE.Value }} of the task "
                    f"slots it holds idle over the last {_minutes(t.idle_window_s)}",
            description=(
                f"For {_minutes(t.idle_for_s)} this run's executors ran on average fewer tasks than "
                f"{_percent(t.idle_slots_busy_below)} of the slots they hold (executors x spark.executor.cores): "
                "capacity paid for and unused, which other jobs on the cluster wait for.\n"
                "What to do: a driver that pauses between jobs (waiting, collecting, writing from the driver) "
                "or a streaming query with little to do: enable dynamic allocation "
                "(spark.dynamicAllocation.enabled=true with spark.dynamicAllocation.shuffleTracking.enabled=true) "
                "so idle executors are released after spark.dynamicAllocation.executorIdleTimeout; with it on, "
                "lower that timeout and spark.dynamicAllocation.minExecutors. Fewer tasks than slots all along: "
                "fewer executors (spark.executor.instances) or cores. ./sparkscope report <application> gives the "
                "run's slot-seconds, idle share and idle stretches (Capacity).")),
        AlertRule(
            uid="sparkscope-straggler-stage", title="Straggler stage",
            queries={
                "A": Query('SELECT max("excess") FROM (SELECT "task_max_ms" - "task_p50_ms" AS "excess" FROM '
                           f'"{STAGE_MEASUREMENT}" WHERE "straggler" = \'true\' AND $timeFilter '
                           'GROUP BY "applicationid") GROUP BY "applicationid"', t.straggler_window_s),
            },
            value="$A / 1000", fires=Above(t.straggler_min_excess_s), for_s=0, severity="warning",
            component="spark", panel="Active tasks", url_vars=("applicationid",),
            summary="A stage of {{ $labels.applicationid }} waited {{ humanizeDuration $values.VALUE.Value }} on "
                    "one slow task",
            description=(
                f"A stage that started in the last {_minutes(t.straggler_window_s)} waited on one task: its "
                f"slowest task ran at least {t.straggler_min_excess_s} s longer than the typical one (the "
                "median, or the 95th percentile in big stages) and held the stage up: the annotator's "
                "straggler rule, spark.sparkscope.straggler.*. The stage's text names that task's partition, "
                "executor and host, and its input against the average task.\n"
                "What to do: a slowest task that read several times the average points at data skew (salt "
                "the key, spark.sql.adaptive.skewJoin.enabled); one that read about the average, at its "
                "executor or host (GC, a slow disk: see the disk rows; spark.speculation runs a copy "
                "elsewhere). The application summary lists the stages that waited longest on one task.")),
        AlertRule(
            uid="sparkscope-disk-latency-outliers", title="Slow disk I/O on a device",
            queries={
                "A": Query(f'SELECT count("latency_ms") FROM "{BLOCK_OUTLIER}" WHERE $timeFilter '
                           'GROUP BY "host", "device"', t.block_window_s),
            },
            value="$A", fires=Above(t.block_outliers_over), for_s=0, severity="warning", component="host",
            panel="Block I/O outliers", url_vars=("device",),
            summary="{{ $values.VALUE.Value }} I/Os of at least BLOCKPROBE_THRESHOLD_MS on {{ $labels.device }} "
                    f"({{{{ $labels.host }}}}) in the last {_minutes(t.block_window_s)}",
            description=(
                f"The block I/O probe saw more than {t.block_outliers_over} I/Os on this device each take at "
                "least BLOCKPROBE_THRESHOLD_MS (100 ms by default). Tasks reading or spilling there wait on it: "
                "shuffle files and spills live in spark.local.dir.\n"
                "What to do: the outliers table names the process and size of each slow I/O. A network volume "
                "or a busy shared disk: move spark.local.dir to a local disk, spread it over several "
                "(comma-separated), or spread the load; a failing disk: check the kernel log (dmesg).")),
        AlertRule(
            uid="sparkscope-run-slower-than-baseline", title="Run slower than its baseline",
            queries={
                # The newest finished run of each job (its end point, stamped at its start, holds its duration).
                "A": Query(f'SELECT last("duration_ms") FROM "{APPLICATION_MEASUREMENT}" WHERE "status" = '
                           f'\'{FINISHED}\' AND $timeFilter GROUP BY "{JOB_KEY}"', t.slower_window_s),
                "B": _baseline(t, "median"),
                "C": _baseline(t, "max"),
                "D": _baseline(t, "stddev"),
                "E": _baseline(t, "count"),
            },
            value="$A / $B",
            fires=(f"$E >= {t.baseline_min_runs} && $A > $C + {t.slower_min_excess_s * 1000} "
                   f"&& $A > {1 + t.slower_share:g} * $B && $A > $B + 2 * $D"),
            for_s=0, severity="warning", component="spark",
            summary="The last run of job {{ $labels.job }} took {{ humanize $values.VALUE.Value }} times its "
                    "usual duration",
            description=(
                f"The job's newest finished run (in the last {_minutes(t.slower_window_s)}) took longer than each "
                f"of its last {t.baseline_runs} runs before it (in the last {_minutes(t.baseline_window_s)}, at "
                f"least {t.baseline_min_runs}) by more than {_minutes(t.slower_min_excess_s)}, more than "
                f"{_percent(t.slower_share)} over their median, and beyond their own spread (2 standard "
                "deviations). The job is spark.sparkscope.job, else the application name.\n"
                "What to do: ./sparkscope compare (or the summary dashboard's 'Compared with usual' row) names "
                "the phases (SQL queries, jobs, stages) that took longer and the figures that grew with them: "
                "more input read (the data grew), more shuffle or spill (a join or a skewed key), more GC "
                "(memory), the same work slower (a busy cluster, a slow node or disk). It resolves with the "
                "job's next run of usual length.")),
        AlertRule(
            uid="sparkscope-no-end-seen", title="Application stopped reporting without an end",
            queries={
                "A": Query(f'SELECT count("end_time_ms") FROM "{NO_END_SEEN_MEASUREMENT}" WHERE $timeFilter '
                           'GROUP BY "applicationid"', t.no_end_window_s),
            },
            value="$A", fires=Above(0), for_s=0, severity="critical", component="spark",
            panel="Applications", url_vars=("applicationid",),
            summary="{{ $labels.applicationid }} stopped sending metrics and never ended",
            description=(
                "The driver of this run went silent for SPARKSCOPE_NO_END_GRACE_S (120 s by default) while the "
                "annotator had not written its end: the driver was killed (SIGKILL, the kernel's OOM killer, a "
                "pod evicted) or its host was lost. Telegraf ended the run \"no end seen\".\n"
                "What to do: look for the driver's fate where it ran (its log's last lines, dmesg for the OOM "
                "killer, kubectl describe pod: OOMKilled, Evicted); a driver out of memory needs "
                "spark.driver.memory (and spark.driver.memoryOverhead in a container). The Applications "
                "table shows the run's end as NO_END_SEEN.")),
        AlertRule(
            uid="sparkscope-telegraf-dropped-points", title="Telegraf dropped points",
            queries={
                "A": Query('SELECT sum("non_negative_difference") FROM (SELECT non_negative_difference('
                           f'"metrics_dropped") FROM "{TELEGRAF_WRITE_MEASUREMENT}" WHERE $timeFilter '
                           'GROUP BY "host") GROUP BY "host"', t.stack_window_s),
            },
            value="$A", fires=Above(0), for_s=0, severity="critical", component="stack",
            summary="Telegraf on {{ $labels.host }} dropped {{ $values.VALUE.Value }} points in the last "
                    f"{_minutes(t.stack_window_s)}: they are not in InfluxDB",
            description=(
                "Telegraf's write buffer (TELEGRAF_BUFFER_LIMIT points) filled while InfluxDB could not take "
                "the points, and it dropped the oldest. Dashboards and reports miss that stretch.\n"
                "What to do: ./sparkscope status shows the buffer and InfluxDB's state; see the rule "
                "\"InfluxDB refused or failed Telegraf's writes\" for why writes failed. Raise "
                "TELEGRAF_BUFFER_LIMIT to ride out longer outages, and TELEGRAF_BUFFER_STRATEGY=disk to keep "
                "the buffer through a Telegraf restart.")),
        AlertRule(
            uid="sparkscope-influxdb-write-errors", title="InfluxDB refused or failed Telegraf's writes",
            queries={
                "A": Query('SELECT sum("non_negative_difference") FROM (SELECT non_negative_difference('
                           f'"errors") FROM "{TELEGRAF_WRITE_MEASUREMENT}" WHERE $timeFilter '
                           'GROUP BY "host") GROUP BY "host"',
                           t.stack_window_s),
            },
            value="$A", fires=Above(0), for_s=0, severity="critical", component="stack",
            summary="{{ $values.VALUE.Value }} writes from Telegraf on {{ $labels.host }} to InfluxDB failed in "
                    f"the last {_minutes(t.stack_window_s)}",
            description=(
                "Telegraf could not write to InfluxDB: InfluxDB was down or unreachable, refused the writes "
                "(a full or read-only disk, max-series-per-database reached, a wrong writer password), or "
                "timed out. Telegraf keeps the points in its buffer and retries; past TELEGRAF_BUFFER_LIMIT "
                "it drops them (the rule \"Telegraf dropped points\").\n"
                "What to do: ./sparkscope status says whether InfluxDB answers and whether its disk can store "
                "points; the Telegraf log names the error (native: .state/logs/telegraf.log; compose: docker "
                "compose logs telegraf). This alert reaches you only once the writes work again (it is read "
                "from InfluxDB); Grafana's own DatasourceError alert tells while InfluxDB cannot be read.")),
        AlertRule(
            uid="sparkscope-streaming-behind", title="Streaming query falling behind its trigger",
            queries={
                # Queries with a processing-time trigger only: 0 (as fast as it can) has no pace to keep.
                # A query's first batch (0) also plans it and warms cold JVMs, seconds over any trigger:
                # left out, as the report leaves it out, so a new query is judged on its pace alone.
                "A": Query(f'SELECT mean("batch_ms") / max("trigger_ms") FROM "{STREAMING_MEASUREMENT}" WHERE '
                           '"trigger_ms" > 0 AND "batch_id" > 0 AND $timeFilter GROUP BY "applicationid", '
                           '"query_name"',
                           t.streaming_window_s),
            },
            value="$A", fires=Above(t.streaming_batch_over_trigger), for_s=t.streaming_for_s,
            severity="warning", component="spark",
            panel="Batch duration vs trigger interval", url_vars=("applicationid",),
            summary="Streaming query {{ $labels.query_name }} of {{ $labels.applicationid }}: its batches take "
                    "{{ $values.VALUE.Value }} times its trigger interval",
            description=(
                f"Over the last {_minutes(t.streaming_window_s)} the query's micro-batches took longer on "
                "average than its processing-time trigger, for "
                f"{_minutes(t.streaming_for_s)}: each batch starts late, takes in more rows, and the query falls "
                "further behind its sources (event-time lag grows; Kafka's offsets behind the latest grow).\n"
                "What to do: ./sparkscope report <application> names the part of the slowest batch that took "
                "the time: addBatch (the query's work and its sink: more executors or cores, fewer shuffle "
                "partitions for small batches, a faster sink), latestOffset/getBatch (the source), "
                "walCommit/commitOffsets (the checkpoint's storage). Or set a longer trigger, or cap the "
                "batch (maxOffsetsPerTrigger) so each one fits.")),
        AlertRule(
            uid="sparkscope-streaming-failed", title="Streaming query failed",
            queries={
                # One point per query end, failed 0 or 1: a clean stop is seen as 0, not as no data.
                "A": Query(f'SELECT sum("failed") FROM "{STREAMING_END_MEASUREMENT}" WHERE $timeFilter '
                           'GROUP BY "applicationid", "query_name"', t.streaming_failed_window_s),
            },
            value="$A", fires=Above(0), for_s=0, severity="critical", component="spark",
            panel="Input rate vs processing rate", url_vars=("applicationid",),
            summary="Streaming query {{ $labels.query_name }} of {{ $labels.applicationid }} failed "
                    "({{ $values.VALUE.Value }} time(s) in the last "
                    f"{_minutes(t.streaming_failed_window_s)})",
            description=(
                "A Structured Streaming query stopped with an exception (the annotation on the graphs and "
                f"{STREAMING_END_MEASUREMENT}'s exception field hold it). The application may go on without "
                "it.\n"
                "What to do: read the exception (./sparkscope report <application> names the line that says "
                "it); the query restarts from its checkpoint once started again. A source that lost data "
                "(Kafka offsets out of range) needs failOnDataLoss or a new checkpoint; a sink or state store "
                "error, its storage.")),
    ]
