"""The live dashboard: one application while it runs, per executor. One function per row."""

from __future__ import annotations

from typing import Any

from sparkscope.dashboards import shared
from sparkscope.dashboards.layout import Panel, Row
from sparkscope.dashboards.reads import (DEVICE_TAG, DiskAwait, ExecutorGauge, ExecutorRate, HostGauge, HostRate, Recent,
                                        SummedRate,
                                        peaks_executors_and_driver)
from sparkscope.dashboards.queries import (NEEDS_ANNOTATOR, NEEDS_APP_STATUS, NEEDS_EXECUTOR_METRICS,
                                           NEEDS_BLOCKPROBE, NEEDS_PROCESS_TREE, NEEDS_SINK, NEEDS_TELEGRAF,
                                           NEEDS_THREADPROBE, APP, DRAWN, EXECUTORS, PROBE_DEVICE,
                                           raw, slots_held, summed_gauge, target, task_threads)
from sparkscope.dashboards.uids import LIVE_UID, SUMMARY_UID
from sparkscope.store.schema import (DISKIO_MEASUREMENT, PRESSURE_MEASUREMENT, APPLICATION_MEASUREMENT, BLOCK_LATENCY, BLOCK_LATENCY_HIST, BLOCK_OUTLIER,
                                     BYTES_READ_COUNT, BYTES_WRITTEN_COUNT, CONTAINER_MEASUREMENT, CPU_MEASUREMENT,
                                     CPU_TAG, CPU_TIME_COUNT, DESERIALIZE_TIME_COUNT, DISK_BYTES_SPILLED_COUNT,
                                     HEAP_MAX, JVM_CPU_TIME, JVM_GC_TIME_COUNT, JVM_HEAP_MEMORY, MAJOR_GC_COUNT,
                                     MAJOR_GC_TIME, MEMORY_BYTES_SPILLED_COUNT, MEM_MEASUREMENT, MINOR_GC_COUNT,
                                     MINOR_GC_TIME, NET_MEASUREMENT, OFF_HEAP_EXECUTION_MEMORY,
                                     OFF_HEAP_STORAGE_MEMORY, ON_HEAP_EXECUTION_MEMORY, ON_HEAP_STORAGE_MEMORY,
                                     PROCESS_TREE_JVM_RSS_MEMORY, PROCESS_TREE_OTHER_RSS_MEMORY,
                                     PROCESS_TREE_PYTHON_RSS_MEMORY, RUN_TIME_COUNT, SHUFFLE_BYTES_WRITTEN_COUNT,
                                     SHUFFLE_FETCH_WAIT_TIME_COUNT, SHUFFLE_LOCAL_BYTES_READ_COUNT,
                                     SHUFFLE_REMOTE_BYTES_READ_COUNT, SHUFFLE_WRITE_TIME_COUNT, STREAMING_MEASUREMENT,
                                     STREAMING_STATE_MEASUREMENT, THREADPOOL_ACTIVE_TASKS, THREAD_WAITS_MEASUREMENT)


def _applications_table() -> Panel:
    # The annotator writes an application's RUNNING point at its start and,
    # when it ends, a FINISHED point at the same time with the same name, user
    # and version plus its end and run time. Two raw selects (one per status,
    # each reading only its own series) and a merge on the columns they share
    # make one row per run, with the start as its time. Aggregates per
    # application (GROUP BY) cost one pass over every run's series per column:
    # at 10,000 stored runs five of them took 2.3 s over a day.
    shared_columns = '"app_name" AS "name", "spark_user" AS "user", "spark_version" AS "Spark"'

    def select(status: str, extra: str = "") -> dict[str, Any]:
        return raw(f'SELECT {shared_columns}{extra}, "applicationid" FROM "{APPLICATION_MEASUREMENT}" '
                   f"WHERE \"status\"::tag = '{status}' AND $timeFilter", result_format="table")

    return Panel(
        "Applications",
        "Applications started in the time range, newest first: start time, id, name, user, Spark version, "
        "run time (empty while it runs) and how it ended: FINISHED, or NO_END_SEEN when its driver stopped "
        "reporting without an end (killed by SIGKILL or the OOM killer, its host lost; written by Telegraf "
        "after SPARKSCOPE_NO_END_GRACE_S of silence). A click on a row opens that run here or in the summary, "
        "over its own time range. " + NEEDS_ANNOTATOR,
        [select("RUNNING")] + [select(end, ', "duration_ms" AS "run time", "end_time_ms" AS "ended", '
                                          '"status"::tag AS "ending"') for end in ("FINISHED", "NO_END_SEEN")],
        "none", kind="table", width=24, height=5,
        options={"sortBy": [{"displayName": "started", "desc": True}]},
        transformations=[{"id": "merge", "options": {}},
                         {"id": "organize", "options": {
                             "renameByName": {"Time": "started"},
                             "indexByName": {name: n for n, name in enumerate(
                                 ("Time", "applicationid", "name", "user", "Spark", "run time", "ending",
                                  "ended"))}}}],
        # "ended" stays in the data for the links, hidden from the table.
        overrides=[{"matcher": {"id": "byName", "options": "ended"},
                    "properties": [{"id": "custom.hidden", "value": True}]},
                   {"matcher": {"id": "byName", "options": "run time"},
                    "properties": [{"id": "unit", "value": "ms"}]},
                   {"matcher": {"id": "byName", "options": "started"},
                    "properties": [{"id": "unit", "value": "dateTimeAsLocal"}]}],
        links=[{"title": "Live view of this application",
                "url": f"/d/{LIVE_UID}?var-applicationid=${{__data.fields.applicationid:percentencode}}"
                       "&from=${__data.fields.started.numeric}&to=${__data.fields.ended.numeric}"},
               {"title": "Summary of this application",
                "url": f"/d/{SUMMARY_UID}?var-applicationid=${{__data.fields.applicationid:percentencode}}"
                       "&from=${__data.fields.started.numeric}&to=${__data.fields.ended.numeric}"}])


# The Hadoop file system schemes drawn: Spark's defaults (file, hdfs) and the
# cloud ones users add to spark.executor.metrics.fileSystemSchemes. One
# plain query each, not a measurement regex, which can crash InfluxDB 1.8
# (queries.task_time); a scheme the run does not report returns nothing.
FS_SCHEMES = ("file", "hdfs", "s3a", "gs", "abfs")

ENDS_AT_TASK_END = (" Counted when a task ends: a long task shows as one spike at its end, not as a level "
                    "while it runs (Active tasks shows slots in use as it happens). ")


def summary_row() -> Row:
    return Row("Summary: the selected application", [
        Panel("Active tasks now",
              "Tasks running at the end of the time range (now, when it ends now): each executor's latest "
              "report of the last 20 s, summed; an executor that stopped reporting drops out, and 0 means "
              "nothing runs. Compare with executors x spark.executor.cores. " + NEEDS_SINK,
              [Recent(THREADPOOL_ACTIVE_TASKS, "sum", "active tasks")],
              "none", kind="stat", width=3, height=4, decimals=0, no_value="0"),
        Panel("Executors alive",
              "Executors that reported in the last 20 s of the time range (the ones running tasks: the "
              "driver counts only in local mode, where it runs them). A drop means executors were lost or "
              "released (dynamic allocation). " + NEEDS_SINK,
              [Recent(THREADPOOL_ACTIVE_TASKS, "count", "executors")],
              "none", kind="stat", width=3, height=4, decimals=0, no_value="0"),
        shared.task_time(
            "Total time tasks ran and, of it, CPU time, summed over all executors since they started "
            "(executor source: runTime, cpuTime). Task time well above CPU time means tasks wait: on "
            "I/O, shuffle fetch, GC or locks. " + NEEDS_SINK,
            width=4),
        shared.gc_share_of_task_time(
            "JVM GC time during tasks over task run time, all executors (jvmGCTime / runTime). Above 10% "
            "the executors are short of heap: raise spark.executor.memory or cut cached data. " + NEEDS_SINK,
            width=3),
        shared.failed_tasks_and_stages(
            "Failed tasks and failed stages of the application so far (driver's appStatus source). "
            + NEEDS_APP_STATUS,
            width=3),
        Panel("Peak heap",
              "Highest JVM heap used by any executor, and by the driver, in the time range (ExecutorMetrics "
              "JVMHeapMemory); compare with spark.executor.memory and spark.driver.memory. In local mode "
              "the driver is the only executor. " + NEEDS_EXECUTOR_METRICS,
              peaks_executors_and_driver(JVM_HEAP_MEMORY, "heap"), "bytes", kind="stat", width=4, height=4),
        Panel("Peak RSS",
              "Highest resident memory of any executor's JVM process, and of the driver's, in the time range "
              "(process tree). On YARN and Kubernetes the container is killed when RSS plus Python exceeds "
              "spark.executor.memory + spark.executor.memoryOverhead. " + NEEDS_PROCESS_TREE,
              peaks_executors_and_driver(PROCESS_TREE_JVM_RSS_MEMORY, "RSS"), "bytes", kind="stat", width=4,
              height=4),
        _applications_table(),
    ])


def tasks_row() -> Row:
    return Row("Tasks and CPU, per executor", [
        Panel("Active tasks",
              "Tasks running on each executor (mean of the interval). A flat line below the executor's "
              "cores means idle slots; one executor busy while the others idle is skew. SQL query regions "
              "are drawn here, on Task time by component and on the heap graph only, so that a run of a "
              "hundred queries leaves the other graphs readable. " + NEEDS_SINK,
              [ExecutorGauge(THREADPOOL_ACTIVE_TASKS)], "none", decimals=1, annotated=True,
              height=TASK_ROW_HEIGHT),
        Panel("Slots busy vs held",
              "Task slots in use against task slots held, summed over the picked executors: busy is the "
              "mean of each executor's running tasks (threadpool.activeTasks) in the interval; held is the "
              "executors that reported in it times their cores (spark.executor.cores, from the annotator's "
              "executor added events). The gap is capacity paid for and idle: a wide gap for minutes asks for "
              "dynamic allocation (spark.dynamicAllocation.enabled) or fewer executors or cores; "
              "./sparkscope report gives the run's slot-seconds and idle share. Held is empty without the "
              "annotator. " + NEEDS_SINK,
              [summed_gauge(THREADPOOL_ACTIVE_TASKS, "slots busy", agg="mean"), slots_held("slots held")],
              "none", decimals=1, height=TASK_ROW_HEIGHT),
        _task_thread_states(),
        Panel("Executor CPU",
              "CPU used by each executor JVM, in cores (rate of JVMCPU jvmCpuTime): all threads, tasks, "
              "GC and JIT included. Near spark.executor.cores = CPU-bound. " + NEEDS_SINK,
              [ExecutorRate(JVM_CPU_TIME, divisor=1_000_000_000)], "suffix: cores"),
        _task_thread_waits(),
        Panel("Task time by component",
              "Where task time goes, summed over the selected executors, in seconds per second (2 = two "
              "task slots busy). CPU well below run time points at the other lines: GC, deserialization, "
              "shuffle fetch wait (slow or remote shuffle reads), shuffle write." + ENDS_AT_TASK_END
              + "With Executor = All and the annotator on, read from its per-application totals of the same "
              "counters (successful tasks, as the executors count them): one series per line instead of one "
              "per executor, which keeps this graph fast at hundreds of executors. " + NEEDS_SINK,
              [SummedRate(RUN_TIME_COUNT, "run time", divisor=1000),
               SummedRate(CPU_TIME_COUNT, "CPU", divisor=1_000_000_000),
               SummedRate(JVM_GC_TIME_COUNT, "GC", divisor=1000),
               SummedRate(DESERIALIZE_TIME_COUNT, "deserialize", divisor=1000),
               SummedRate(SHUFFLE_FETCH_WAIT_TIME_COUNT, "shuffle fetch wait", divisor=1000),
               SummedRate(SHUFFLE_WRITE_TIME_COUNT, "shuffle write", divisor=1_000_000_000)],
              "suffix: s/s", width=24, annotated=True),
    ])


# Active tasks and the task thread states side by side, tall enough for the
# states' six-line legend.
TASK_ROW_HEIGHT = 10


def _task_thread_states() -> Panel:
    return Panel(
        "Task threads: on CPU vs waiting",
        "What the executors' task threads ('Executor task launch worker') were doing, summed over the selected "
        "executors (pick one in Executor to see it alone), sampled from /proc a few times a second. On CPU "
        "and waiting for a CPU (run queue: more runnable threads than cores) are the kernel's own accounting. "
        "Off CPU, by the kernel function the thread waits in (table beside): I/O = D state (a local disk, "
        "NFS, a page fault on a mapped file) or a file system's wait, e.g. a FUSE mount (s3fs, gcsfuse) whose "
        "requests wait interruptibly; network = a socket (shuffle fetch, a PySpark worker's answer, remote "
        "storage); lock or idle = a futex: a Java lock, or a task thread the pool keeps idle for a minute "
        "after its task; other = timers and the rest. Compare with Active tasks beside: tasks running but "
        "few threads on CPU means they wait, and this says on what. JVM service threads (GC, JIT, RPC, "
        "shuffle server) are not counted. " + NEEDS_THREADPROBE,
        [task_threads("on_cpu", "on CPU"), task_threads("cpu_wait", "waiting for a CPU"),
         task_threads("io", "I/O: disk, FUSE, NFS"), task_threads("network", "network"),
         task_threads("lock", "lock or idle"), task_threads("other_wait", "other wait")],
        "none", decimals=1, stacked=True, annotated=True, height=TASK_ROW_HEIGHT)


def _task_thread_waits() -> Panel:
    return Panel(
        "Task threads: top wait channels",
        "Where the selected executors' task threads waited off CPU, longest first: the kernel function "
        "they slept in (wchan), their state (disk = D, uninterruptible; sleeping = S) and thread-seconds "
        "waited there in the time "
        "range (2 threads for 10 s = 20). Common ones: futex_wait_queue / futex_do_wait = a Java lock "
        "or an idle pool; request_wait_answer = a FUSE file system (s3fs, gcsfuse, a slow mount); "
        "folio_wait_bit / io_schedule / blk_mq_get_tag = a local disk; nfs_* / rpc_wait_bit_killable = NFS; "
        "wait_woken / sk_wait_data / ep_poll = a socket (shuffle fetch, Python worker, remote storage). "
        "Counted from each 10 s period's five most frequent. " + NEEDS_THREADPROBE,
        [raw(f'SELECT sum("seconds") AS "waited" FROM "{THREAD_WAITS_MEASUREMENT}" WHERE {EXECUTORS} AND $timeFilter '
             'GROUP BY "state", "wchan"', result_format="table")],
        "s", kind="table", width=12, no_value="no task thread waited off CPU",
        options={"sortBy": [{"displayName": "waited", "desc": True}]},
        transformations=[{"id": "merge", "options": {}},
                         # Grafana names a grouped table query's value column "value"; the header says what it is.
                         {"id": "organize", "options": {"excludeByName": {"Time": True},
                                                        "renameByName": {"value": "waited"},
                                                        "indexByName": {"wchan": 0, "state": 1, "value": 2}}}])


def memory_row() -> Row:
    return Row("Memory, per executor", [
        Panel("JVM heap used vs max",
              "Heap in use, the highest sample of each interval (ExecutorMetrics JVMHeapMemory, polled every "
              "spark.executor.metrics.pollingInterval) and the heap limit (jvm heap.max, about "
              "spark.executor.memory). Used touching max with rising GC time means the executor is short "
              "of memory. " + NEEDS_EXECUTOR_METRICS,
              [ExecutorGauge(JVM_HEAP_MEMORY, "$tag_executorid used", agg="max"),
               ExecutorGauge(HEAP_MAX, "$tag_executorid max", agg="max")], "bytes", annotated=True),
        Panel("Process RSS: JVM, Python, other",
              "Resident memory of each executor's process tree, the highest sample of each interval: the "
              "JVM, its Python workers (PySpark UDFs) "
              "and any other children. This is what YARN and Kubernetes count against "
              "spark.executor.memory + memoryOverhead. " + NEEDS_PROCESS_TREE,
              [ExecutorGauge(PROCESS_TREE_JVM_RSS_MEMORY, "$tag_executorid JVM", agg="max"),
               ExecutorGauge(PROCESS_TREE_PYTHON_RSS_MEMORY, "$tag_executorid Python", agg="max"),
               ExecutorGauge(PROCESS_TREE_OTHER_RSS_MEMORY, "$tag_executorid other", agg="max")], "bytes"),
        Panel("Unified memory, on-heap: execution + storage",
              "Spark's unified memory region on the heap, the highest sample of each interval: execution "
              "(joins, sorts, aggregations) and storage "
              "(cached blocks, broadcasts). Its size is (heap - 300 MB) x spark.memory.fraction; execution "
              "can evict storage down to spark.memory.storageFraction. " + NEEDS_EXECUTOR_METRICS,
              [ExecutorGauge(ON_HEAP_EXECUTION_MEMORY, "$tag_executorid execution", agg="max"),
               ExecutorGauge(ON_HEAP_STORAGE_MEMORY, "$tag_executorid storage", agg="max")], "bytes"),
        Panel("Unified memory, off-heap: execution + storage",
              "The same region off the heap; zero unless spark.memory.offHeap.enabled=true with "
              "spark.memory.offHeap.size. " + NEEDS_EXECUTOR_METRICS,
              [ExecutorGauge(OFF_HEAP_EXECUTION_MEMORY, "$tag_executorid execution", agg="max"),
               ExecutorGauge(OFF_HEAP_STORAGE_MEMORY, "$tag_executorid storage", agg="max")], "bytes"),
    ])


def gc_row() -> Row:
    return Row("Garbage collection, per executor", [
        Panel("GC time share",
              "Share of wall-clock time each JVM spent in minor (young) and major (old) collections "
              "(rate of ExecutorMetrics MinorGCTime, MajorGCTime). Major GC above a few percent, or minor "
              "above 10%, slows every task on the executor. " + NEEDS_EXECUTOR_METRICS,
              [ExecutorRate(MINOR_GC_TIME, "$tag_executorid minor", divisor=1000),
               ExecutorRate(MAJOR_GC_TIME, "$tag_executorid major", divisor=1000)], "percentunit"),
        Panel("GC count",
              "Collections per minute, minor and major, per executor (rate of MinorGCCount, MajorGCCount). "
              + NEEDS_EXECUTOR_METRICS,
              [ExecutorRate(MINOR_GC_COUNT, "$tag_executorid minor", per="1m"),
               ExecutorRate(MAJOR_GC_COUNT, "$tag_executorid major", per="1m")], "cpm"),
    ])


def shuffle_row() -> Row:
    return Row("Shuffle, spill and I/O, per executor", [
        Panel("Shuffle read: local vs remote",
              "Shuffle bytes read per second by each executor's tasks, from its own host (local) and from "
              "other executors over the network (remote). High remote reads with high fetch wait above "
              "point at the network or at spark.reducer.maxSizeInFlight." + ENDS_AT_TASK_END + NEEDS_SINK,
              [ExecutorRate(SHUFFLE_LOCAL_BYTES_READ_COUNT, "$tag_executorid local"),
               ExecutorRate(SHUFFLE_REMOTE_BYTES_READ_COUNT, "$tag_executorid remote")], "Bps"),
        Panel("Shuffle write",
              "Shuffle bytes written per second by each executor's map tasks." + ENDS_AT_TASK_END + NEEDS_SINK,
              [ExecutorRate(SHUFFLE_BYTES_WRITTEN_COUNT)], "Bps"),
        Panel("Spill",
              "Bytes spilled per second: memory = size of the spilled data in memory, disk = what reached "
              "disk. Any spill means execution memory ran short: more partitions "
              "(spark.sql.shuffle.partitions) or more memory per task." + ENDS_AT_TASK_END + NEEDS_SINK,
              [ExecutorRate(MEMORY_BYTES_SPILLED_COUNT, "$tag_executorid memory"),
               ExecutorRate(DISK_BYTES_SPILLED_COUNT, "$tag_executorid disk")], "Bps"),
        Panel("File system read",
              "Bytes read per second by each executor's tasks from any storage (executor bytesRead, counted "
              "at task end) and, while they run, per Hadoop file system scheme (file, hdfs, s3a, gs, abfs). "
              "Spark reports schemes only for those in spark.executor.metrics.fileSystemSchemes (default "
              "file,hdfs): add s3a, gs or abfs there to see cloud storage by scheme." + ENDS_AT_TASK_END
              + NEEDS_SINK,
              [ExecutorRate(BYTES_READ_COUNT, "$tag_executorid all storage"),
               *(ExecutorRate(f"filesystem.{scheme}.read_bytes", f"$tag_executorid {scheme}")
                 for scheme in FS_SCHEMES)],
              "Bps"),
        Panel("File system write",
              "Bytes written per second by each executor's tasks to any storage (executor bytesWritten, "
              "counted at task end) and per Hadoop file system scheme in "
              "spark.executor.metrics.fileSystemSchemes (default file,hdfs; add s3a, gs or abfs for cloud "
              "storage)." + ENDS_AT_TASK_END + NEEDS_SINK,
              [ExecutorRate(BYTES_WRITTEN_COUNT, "$tag_executorid all storage"),
               *(ExecutorRate(f"filesystem.{scheme}.write_bytes", f"$tag_executorid {scheme}")
                 for scheme in FS_SCHEMES)],
              "Bps"),
    ])


def host_row() -> Row:
    return Row("Host: the machine running the stack (Telegraf)",
               [*_machine_panels(), *_disk_panels(), *_block_probe_panels()])


def _machine_panels() -> list[Panel]:
    return [
        Panel("CPU busy",
              "CPU time of the host by state, percent of all cores: user, system, iowait (waiting on disk), "
              "steal (taken by the hypervisor). " + NEEDS_TELEGRAF,
              [HostGauge(CPU_MEASUREMENT, f"usage_{state}", f"$tag_host {state}", where=((CPU_TAG, "cpu-total"),))
               for state in ("user", "system", "iowait", "steal")],
              "percent", width=6, stacked=True),
        Panel("Memory",
              "Host memory used and available (mem used, available). " + NEEDS_TELEGRAF,
              [HostGauge(MEM_MEASUREMENT, "used", "$tag_host used"),
               HostGauge(MEM_MEASUREMENT, "available", "$tag_host available")], "bytes", width=6),
        Panel("Network",
              "Bytes per second received and sent per interface. " + NEEDS_TELEGRAF,
              [HostRate(NET_MEASUREMENT, "bytes_recv", "$tag_interface in", by=("interface",)),
               HostRate(NET_MEASUREMENT, "bytes_sent", "$tag_interface out", by=("interface",))],
              "Bps", width=6),
        Panel("Pressure stall: CPU, memory, I/O",
              "Share of time some task (some) or every non-idle task at once (full) waited for CPU, "
              "memory or I/O (Linux PSI, /proc/pressure). io some at 30% = for 30% of the time at least "
              "one task waited on storage; full means nothing ran. Executors waiting on spill or shuffle "
              "files show here before anything else. " + NEEDS_TELEGRAF,
              [HostRate(PRESSURE_MEASUREMENT, "total", "$tag_resource $tag_type", by=("resource", "type"),
                        divisor=10000)], "percent", width=6),
    ]


def _disk(field_name: str, alias: str, divisor: int = 1) -> HostRate:
    """A diskio counter of the picked devices ($device) per second, divided by `divisor`."""
    return HostRate(DISKIO_MEASUREMENT, field_name, alias, by=(DEVICE_TAG,), divisor=divisor, device=True)


def _disk_panels() -> list[Panel]:
    """Telegraf's /proc/diskstats per device, as iostat reads it."""
    return [
        Panel("Disk busy",
              "Share of time each device had I/O in flight (io_time from /proc/diskstats, the %util of "
              "iostat). 100% saturates a single disk; SSDs and NVMe serve many I/Os at once and can do more "
              "at 100%: read it with the queue size and await. Shuffle and spill land on spark.local.dir. "
              "Pick devices with the Device variable. " + NEEDS_TELEGRAF,
              [_disk("io_time", "$tag_name", divisor=10)], "percent", width=6, io_outliers=True),
        Panel("Disk IOPS: read and write",
              "Completed I/Os per second per device and direction (reads, writes). " + NEEDS_TELEGRAF,
              [_disk("reads", "$tag_name read"), _disk("writes", "$tag_name write")], "iops", width=6,
              io_outliers=True),
        Panel("Disk throughput: read and write",
              "Bytes per second read and written per device (read_bytes, write_bytes). " + NEEDS_TELEGRAF,
              [_disk("read_bytes", "$tag_name read"), _disk("write_bytes", "$tag_name write")], "Bps",
              width=6, io_outliers=True),
        Panel("Disk queue size",
              "Average number of I/Os in flight or queued per device (weighted_io_time: ms of I/O time "
              "weighted by the queue length, per ms). Well above 1 on a busy disk means I/Os wait for "
              "each other: the await grows with it. " + NEEDS_TELEGRAF,
              [_disk("weighted_io_time", "$tag_name", divisor=1000)], "short", decimals=2, width=6,
              io_outliers=True),
        Panel("Disk await: read and write",
              "Average time per completed read and per completed write, queueing included (the r_await "
              "and w_await of iostat): increase of read_time over increase of reads, per interval. An "
              "interval without reads has no read point, rather than 0 ms. An average hides a few slow "
              "I/Os among many fast ones: the latency heatmap and outliers below show them. "
              + NEEDS_TELEGRAF,
              [DiskAwait("read_time", "reads", "$tag_name read"),
               DiskAwait("write_time", "writes", "$tag_name write")], "ms", width=6, io_outliers=True),
    ]


def _block_probe_panels() -> list[Panel]:
    """The eBPF probe's panels: percentiles and heatmap beside the await they explain."""
    return [
        Panel("Block I/O latency: p50, p99, max",
              "Per device and direction, from the eBPF probe: time from issue to the device to completion "
              "(scheduler queueing excluded). max is exact; p50 and p99 are read off log2 buckets, right "
              "within a factor of two, and the highest of the interval is shown. A p99 far above p50 on one "
              "device is a disk serving some I/Os slowly. " + NEEDS_BLOCKPROBE,
              [raw(f'SELECT max("{field}_ms") FROM "{BLOCK_LATENCY}" WHERE {PROBE_DEVICE} AND $timeFilter '
                   'GROUP BY time($bucket), "host", "device", "direction" fill(none)',
                   f"$tag_device $tag_direction {field}") for field in ("p50", "p99", "max")],
              "ms", width=9, io_outliers=True),
        Panel("Block I/O latency heatmap",
              "How many I/Os completed in each latency bucket (log2, microseconds on the axis), per "
              "interval, over the selected devices: a second band far above the main one is a slow disk or "
              "a slow class of I/O that the averages hide. Pick one device to see it alone. "
              + NEEDS_BLOCKPROBE,
              [raw(f'SELECT sum("count") FROM "{BLOCK_LATENCY_HIST}" WHERE {PROBE_DEVICE} AND $timeFilter '
                   'GROUP BY time($bucket), "le_us" fill(none)', "$tag_le_us")],
              "short", kind="heatmap", width=9,
              options={"calculate": False, "yAxis": {"axisPlacement": "left", "unit": "µs"},
                       "rowsFrame": {"layout": "le"}, "cellGap": 1,
                       "color": {"mode": "scheme", "scheme": "Oranges", "scale": "exponential",
                                 "exponent": 0.5, "fill": "dark-orange", "steps": 64, "reverse": False},
                       "legend": {"show": True}, "tooltip": {"mode": "single", "yHistogram": False},
                       "cellValues": {"unit": "short"}, "filterValues": {"le": 1e-9}}),
        Panel("Block I/O outliers",
              "Every I/O at or above the probe's threshold (BLOCKPROBE_THRESHOLD_MS, default 100 ms), newest "
              "first: device, direction, latency, size and the process that submitted it (a kworker for "
              "buffered writeback). The same I/Os are marked on the disk graphs (annotation 'Slow block "
              "I/O'). " + NEEDS_BLOCKPROBE,
              [raw(f'SELECT "device", "direction", "latency_ms", "bytes", "pid", "comm" FROM "{BLOCK_OUTLIER}" '
                   f'WHERE {PROBE_DEVICE} AND $timeFilter ORDER BY time DESC LIMIT 200', result_format="table")],
              "none", kind="table", width=24, height=7, no_value="no I/O above the threshold",
              overrides=[{"matcher": {"id": "byName", "options": "latency_ms"},
                          "properties": [{"id": "unit", "value": "ms"}, {"id": "displayName", "value": "latency"}]},
                         {"matcher": {"id": "byName", "options": "bytes"},
                          "properties": [{"id": "unit", "value": "bytes"}, {"id": "displayName", "value": "size"}]},
                         {"matcher": {"id": "byName", "options": "Time"},
                          "properties": [{"id": "unit", "value": "dateTimeAsLocal"}]}]),
    ]


NEEDS_CONTAINER_PLUGIN = ("Needs the sparkscope annotator jar with "
                          "spark.plugins=...,dev.sparkscope.annotator.ContainerMemoryPlugin (./sparkscope conf "
                          "adds it): each JVM reads its own memory cgroup, v1 or v2, every 5 s.")


def _container(field: str, alias: str, agg: str = "max") -> dict[str, Any]:
    return target(f'SELECT {agg}("{field}") FROM "{CONTAINER_MEASUREMENT}" WHERE {DRAWN} AND $timeFilter '
                  'GROUP BY time($bucket), "executorid" fill(none)', alias)


def _container_summed(field: str, alias: str, agg: str = "max") -> dict[str, Any]:
    """A container field summed over the picked executors (as summed_gauge: the RSS split stacked under it)."""
    inner = (f'SELECT {agg}("{field}") AS "v" FROM "{CONTAINER_MEASUREMENT}" WHERE {EXECUTORS} AND $timeFilter '
             'GROUP BY time($bucket), "executorid" fill(none)')
    return target(f'SELECT sum("v") FROM ({inner}) WHERE $timeFilter GROUP BY time($bucket) fill(none)', alias)


# The split of the container's memory, stacked bottom up, as Spark's process-tree
# metrics name it; the limit and the working set are drawn as lines over it.
RSS_SPLIT = ((PROCESS_TREE_JVM_RSS_MEMORY, "JVM RSS"), (PROCESS_TREE_PYTHON_RSS_MEMORY, "Python RSS"),
             (PROCESS_TREE_OTHER_RSS_MEMORY, "other RSS"))
CONTAINER_LINES = ("limit", "working set")


def _line_over_stack(name: str) -> dict[str, Any]:
    """An override that draws the series `name` as a line over the stacked ones, not in the stack."""
    return {"matcher": {"id": "byName", "options": name},
            "properties": [{"id": "custom.stacking", "value": {"mode": "none", "group": "A"}},
                           {"id": "custom.fillOpacity", "value": 0},
                           {"id": "custom.lineWidth", "value": 2}]}


def containers_row() -> Row:
    return Row("Containers: memory against the limit", [
        Panel("Container memory against its limit",
              "Per executor and the driver, its container's memory limit (cgroup memory.max or "
              "memory.limit_in_bytes; no line where there is none) and its working set (usage minus inactive "
              "file cache: what the kernel's OOM killer and Kubernetes judge, the highest of each interval). "
              "The gap between the two is all that is left before the kernel kills; the panel beside it "
              "shows what fills one container. Executors lost are marked with Spark's reason. "
              + NEEDS_CONTAINER_PLUGIN,
              [_container("limit_bytes", "$tag_executorid limit", agg="min"),
               _container("working_set_bytes", "$tag_executorid working set")],
              "bytes", annotated=True),
        Panel("What fills the container: JVM, Python, other",
              "The container's limit and working set as lines, and under them, stacked, what Spark sees of "
              "its process tree: the JVM's RSS (heap in use, off-heap, direct buffers, metaspace, threads), "
              "its Python workers' RSS, and other processes' (what the executor started besides). Pick one "
              "executor (Executor) to see its own container; with several, each line and layer is their "
              "sum. A stack close to the limit while the heap (Memory row) is far below it is memory outside "
              "the heap: spark.executor.memoryOverhead (spark.kubernetes.memoryOverheadFactor on Kubernetes) "
              "or, for the Python layer, spark.executor.pyspark.memory. The gap between the stack and the "
              "working set is page cache and memory of the container that Spark does not count. "
              + NEEDS_PROCESS_TREE + " " + NEEDS_CONTAINER_PLUGIN,
              [_container_summed("limit_bytes", "limit", agg="min"),
               _container_summed("working_set_bytes", "working set"),
               *[summed_gauge(measurement, alias) for measurement, alias in RSS_SPLIT]],
              "bytes", stacked=True, annotated=True,
              overrides=[_line_over_stack(name) for name in CONTAINER_LINES]),
        Panel("OOM kills and limit hits in the container",
              "Counted since each container started, so every step up is an event: processes the "
              "kernel's OOM killer killed inside it (a Python worker killed leaves its executor alive and "
              "fails its task with 'Python worker exited unexpectedly'; the JVM killed is an executor lost "
              "with exit 137, which its own count no longer shows), and how often usage hit the limit "
              "(v1 failcnt, v2 memory.events max: reclaim under pressure, a warning before a kill). "
              + NEEDS_CONTAINER_PLUGIN,
              [_container("oom_kills", "$tag_executorid OOM kills"),
               _container("limit_hits", "$tag_executorid limit hits")],
              "short"),
    ], collapsed=True)


NEEDS_STREAMING = ("Needs the sparkscope annotator (spark.plugins=dev.sparkscope.annotator.ListenerPlugin): "
                   "it reads Structured Streaming's progress events from Spark's listener bus; nothing else to set.")


def _stream(select: str, alias: str, measurement: str = STREAMING_MEASUREMENT, group: str = '"query_name"') -> dict:
    return target(f'SELECT {select} FROM "{measurement}" WHERE {APP} AND $timeFilter '
                  f'GROUP BY time($bucket), {group} fill(none)', alias)


def streaming_row() -> Row:
    return Row("Streaming queries", [
        Panel("Input rate vs processing rate",
              "Per streaming query, rows per second arriving from its sources and rows per second it "
              "processed, as each micro-batch's progress reports them. Processing below input for many "
              "batches is a query falling behind; the two are equal when every batch takes what has "
              "arrived, so read them with the batch duration beside. " + NEEDS_STREAMING,
              [_stream('mean("input_rate")', "$tag_query_name input"),
               _stream('mean("processing_rate")', "$tag_query_name processed")], "rowsps", annotated=True),
        Panel("Batch duration vs trigger interval",
              "Per query, each interval's longest micro-batch (triggerExecution) and the query's "
              "processing-time trigger. Batches longer than the trigger start late, one after another: "
              "the query cannot keep its trigger. The duration's largest part is in the summary and in "
              "./sparkscope report (addBatch: the work and the sink; latestOffset/getBatch: the source; "
              "walCommit/commitOffsets: the checkpoint). " + NEEDS_STREAMING,
              [_stream('max("batch_ms")', "$tag_query_name batch"),
               _stream('max("trigger_ms")', "$tag_query_name trigger")], "ms"),
        Panel("Event-time lag and source backlog",
              "Per query with a watermark: how far the newest event time of each batch is behind the "
              "batch's start on the clock (growing: the query falls further behind its data), and the "
              "watermark's own delay; with a source that reports it (Kafka), the offsets behind the "
              "latest. " + NEEDS_STREAMING,
              [_stream('max("event_time_lag_ms")', "$tag_query_name event-time lag"),
               _stream('max("backlog")', "$tag_query_name offsets behind")], "ms"),
        Panel("State rows and memory per stateful operator",
              "Per query and stateful operator (aggregation, join, dedup), the rows kept in its state "
              "store and their memory, from each batch's progress; rows that only grow mean a watermark "
              "that does not let state go. " + NEEDS_STREAMING,
              [_stream('last("rows_total")', "$tag_query_name $tag_operator rows", STREAMING_STATE_MEASUREMENT,
                       '"query_name", "operator"'),
               _stream('last("memory_bytes")', "$tag_query_name $tag_operator bytes",
                       STREAMING_STATE_MEASUREMENT, '"query_name", "operator"')], "short"),
    ], collapsed=True)


def rows() -> list[Row]:
    return [summary_row(), tasks_row(), memory_row(), containers_row(), streaming_row(), gc_row(), shuffle_row(),
            host_row()]
