"""The live dashboard: one application while it runs, per executor. One function per row."""

from __future__ import annotations

from sparkscope.dashboards import shared
from sparkscope.dashboards.layout import Panel, Row
from sparkscope.dashboards.queries import (APP, NEEDS_ANNOTATOR, NEEDS_APP_STATUS, NEEDS_EXECUTOR_METRICS,
                                           NEEDS_PROCESS_TREE, NEEDS_SINK, NEEDS_TELEGRAF, NOT_DRIVER, gauge,
                                           peak, rate, raw, summed_rate, target)
from sparkscope.dashboards.uids import LIVE_UID, SUMMARY_UID


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
                "url": f"/d/{LIVE_UID}?var-username=${{username}}"
                       "&var-applicationid=${__data.fields.applicationid}&${__url_time_range}"},
               {"title": "Summary of this application",
                "url": f"/d/{SUMMARY_UID}?var-username=${{username}}"
                       "&var-applicationid=${__data.fields.applicationid}&${__url_time_range}"}])


def summary_row() -> Row:
    return Row("Summary: the selected application", [
        Panel("Active tasks now",
              "Tasks running right now, summed over the executors that still report (a dead executor stops "
              "reporting and drops out). Compare with executors x spark.executor.cores. " + NEEDS_SINK,
              [target('SELECT sum("v") FROM (SELECT last("value") AS "v" FROM "threadpool.activeTasks" WHERE '
                       f'{APP} AND $timeFilter GROUP BY time($interval), "executorid" fill(none)) '
                       'WHERE $timeFilter GROUP BY time($interval) fill(none)', "active tasks")],
              "none", kind="stat", width=3, height=4, decimals=0,
              options={"graphMode": "area"}),
        Panel("Executors alive",
              "Executors (driver excluded) that reported in the latest interval. A drop means executors were "
              "lost or released (dynamic allocation). " + NEEDS_EXECUTOR_METRICS,
              [target('SELECT count("v") FROM (SELECT last("value") AS "v" FROM "JVMHeapMemory" WHERE '
                       f'{NOT_DRIVER} AND $timeFilter GROUP BY time($interval), "executorid" fill(none)) '
                       'WHERE $timeFilter GROUP BY time($interval) fill(none)', "executors")],
              "none", kind="stat", width=3, height=4, decimals=0, options={"graphMode": "area"}),
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


def tasks_row() -> Row:
    return Row("Tasks and CPU, per executor", [
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


def memory_row() -> Row:
    return Row("Memory, per executor", [
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


def gc_row() -> Row:
    return Row("Garbage collection, per executor", [
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


def shuffle_row() -> Row:
    return Row("Shuffle, spill and I/O, per executor", [
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


def host_row() -> Row:
    return Row("Host: the machine running the stack (Telegraf)", [
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


def rows() -> list[Row]:
    return [summary_row(), tasks_row(), memory_row(), gc_row(), shuffle_row(), host_row()]
