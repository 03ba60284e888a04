"""The application summary: one run whole. One function per row."""

from __future__ import annotations

from typing import Any

from sparkscope.dashboards import shared
from sparkscope.dashboards.reads import ALL_EXECUTORS_LISTED, TOP_BY_HEAP, ExecutorPeak, ExecutorsReporting, Total
from sparkscope.dashboards.layout import SORT_ALPHABETICAL, SORT_AS_QUERIED, Panel, Row, variable
from sparkscope.dashboards.uids import PROFILES_UID
from sparkscope.store.schema import (APPLICATION_MEASUREMENT, CONNECT_OPERATION, CONNECT_SESSION, CONNECT_USER,
                                     JOB_KEY, JOB_MEASUREMENT, CPU_TIME_COUNT, DESERIALIZE_TIME_COUNT,
                                     DISK_BYTES_SPILLED_COUNT, EXECUTOR_PEAKS_MEASUREMENT, HEAP_MAX, JVM_GC_TIME_COUNT,
                                     JVM_HEAP_MEMORY, OFF_HEAP_UNIFIED_MEMORY, OLD_GEN_POOLS, ON_HEAP_EXECUTION_MEMORY,
                                     ON_HEAP_STORAGE_MEMORY, ON_HEAP_UNIFIED_MEMORY, PROCESS_TREE_JVM_RSS_MEMORY,
                                     PROCESS_TREE_OTHER_RSS_MEMORY, PROCESS_TREE_PYTHON_RSS_MEMORY, PROCESS_TREE_RSS,
                                     QUERY_MEASUREMENT, RESULT_SERIALIZATION_TIME_COUNT, RUN_TIME_COUNT,
                                     SHUFFLE_BYTES_WRITTEN_COUNT, SHUFFLE_FETCH_WAIT_TIME_COUNT,
                                     SHUFFLE_TOTAL_BYTES_READ_COUNT, SHUFFLE_WRITE_TIME_COUNT, STAGE_MEASUREMENT,
                                     STAGE_PEAKS_MEASUREMENT, SUCCEEDED_TASKS_COUNT, THREADPOOL_ACTIVE_TASKS,
                                     TOTAL_GC_TIME)
from sparkscope.dashboards.queries import (APP, NEEDS_ANNOTATOR, NEEDS_APP_STATUS, NEEDS_EXECUTOR_METRICS,
                                           NEEDS_PEAKS, NEEDS_PROCESS_TREE, NEEDS_SINK, RESERVED_BYTES,
                                           annotator_fields, exact_peaks, math, per_executor_peak, raw,
                                           slot_seconds_held, target, total)


def _peak_table(title: str, description: str, columns: list[tuple[str, str]], unit: str,
                overrides: list[dict[str, Any]] = (), listed: str = ALL_EXECUTORS_LISTED) -> Panel:
    panel = Panel(title, description, [ExecutorPeak(m, name, listed) for m, name in columns], unit,
                  kind="table", width=24, height=7,
                  options={"sortBy": [{"displayName": "executorid", "desc": False}]},
                  overrides=[{"matcher": {"id": "byName", "options": "executorid"},
                              "properties": [{"id": "unit", "value": "string"}]}, *overrides])
    # One row per executor: join the columns, drop the (shared) time.
    # Executor ids stay text ("driver" beside numbers would read NaN).
    panel.transformations = [{"id": "convertFieldType", "options": {"conversions": [
                                 {"targetField": "executorid", "destinationType": "string"}]}},
                             {"id": "merge", "options": {}},
                             {"id": "organize", "options": {"excludeByName": {"Time": True}}}]
    return panel


def _stage_table(title: str, description: str, sort_by: str) -> Panel:
    # The job or SQL query each stage ran for, and the slowest task's own
    # partition, executor, host, bytes read, GC and fetch wait (not stage-wide
    # maxima): bytes far above the average task mean data skew, about average
    # bytes a slow host. "tail" = slowest minus median task: the time the
    # stage spent waiting on its slowest task beyond a typical one.
    query = ('SELECT "stage_id", "attempt", "job_description" AS "job / query", "name", "duration_ms" AS "duration", '
             '"num_tasks" AS "tasks", "task_p50_ms" AS "median task", "task_max_ms" AS "slowest task", '
             '"task_max_ms" - "task_p50_ms" AS "tail", "slowest_partition" AS "slowest partition", '
             '"slowest_executor" AS "slowest on", "slowest_host" AS "host", '
             '"slowest_input_bytes" + "slowest_shuffle_read_bytes" AS "slowest read", '
             '"task_mean_input_bytes" + "task_mean_shuffle_read_bytes" AS "average read", '
             '"slowest_gc_ms" AS "slowest GC", "slowest_fetch_wait_ms" AS "slowest fetch wait", '
             f'"straggler", "status", "end_time_ms" AS "end" FROM "{STAGE_MEASUREMENT}" WHERE {APP} '
             'AND "status"::tag <> \'RUNNING\' AND $timeFilter')
    # The slowest executor links to its profiles over the stage's own time
    # (there are some when a profile was taken then, or continuous profiling is on).
    profiles = {"title": "Profiles of executor ${__data.fields[\"slowest on\"]} during stage "
                         "${__data.fields.stage_id}",
                "url": f"/d/{PROFILES_UID}/spark-profiles?var-applicationid=${{applicationid:percentencode}}"
                       "&var-executorid=${__data.fields[\"slowest on\"]}"
                       "&from=${__data.fields.Time.numeric}&to=${__data.fields.end.numeric}"}
    ms = ["duration", "median task", "slowest task", "tail", "slowest GC", "slowest fetch wait"]
    return Panel(title, description, [raw(query, result_format="table")], "none", kind="table", width=24,
                 height=8, options={"sortBy": [{"displayName": sort_by, "desc": True}]},
                 overrides=[{"matcher": {"id": "byName", "options": name},
                             "properties": [{"id": "unit", "value": "ms"}]} for name in ms]
                 + [{"matcher": {"id": "byName", "options": name}, "properties": [{"id": "unit", "value": "bytes"}]}
                    for name in ("slowest read", "average read")]
                 + [{"matcher": {"id": "byName", "options": name},
                     "properties": [{"id": "custom.hidden", "value": True}]} for name in ("Time", "end")]
                 + [{"matcher": {"id": "byName", "options": "slowest on"},
                     "properties": [{"id": "links", "value": [profiles]}]}])


BYTES_COLUMNS = [
    (JVM_HEAP_MEMORY, "heap used"), (HEAP_MAX, "heap max"),
    (PROCESS_TREE_JVM_RSS_MEMORY, "JVM RSS"), (PROCESS_TREE_PYTHON_RSS_MEMORY, "Python RSS"),
    (PROCESS_TREE_OTHER_RSS_MEMORY, "other RSS"),
    (ON_HEAP_UNIFIED_MEMORY, "unified on-heap"), (ON_HEAP_EXECUTION_MEMORY, "execution on-heap"),
    (ON_HEAP_STORAGE_MEMORY, "storage on-heap"), (OFF_HEAP_UNIFIED_MEMORY, "unified off-heap"),
]



def _held_run_deserialize() -> list:
    """A: slot-seconds held; B, C: the tasks' run and deserialize seconds (used = B + C), the
    queries both capacity stats compute from."""
    return [slot_seconds_held("held"), total(RUN_TIME_COUNT, "run", scale=" / 1000"),
            total(DESERIALIZE_TIME_COUNT, "deserialize", scale=" / 1000")]

def app_row() -> Row:
    return Row("The application", [
        Panel("Run time",
              "Wall-clock time from application start to end (empty while it runs). " + NEEDS_ANNOTATOR,
              [target(f'SELECT max("duration_ms") FROM "{APPLICATION_MEASUREMENT}" WHERE {APP} AND $timeFilter',
                       "run time")], "ms", kind="stat", width=3, height=4),
        Panel("Executors used",
              "Executors that ran tasks during the run (the ones with Spark's executor source: the driver "
              "only in local mode, where it is the one executor). " + NEEDS_SINK,
              [ExecutorsReporting(THREADPOOL_ACTIVE_TASKS, "executors")],
              "none", kind="stat", width=3, height=4, decimals=0),
        shared.task_time(
            "Total task run time and CPU time over all executors. " + NEEDS_SINK,
            width=4),
        shared.gc_share_of_task_time(
            "JVM GC time during tasks over task run time (jvmGCTime / runTime), all executors. "
            + NEEDS_SINK,
            width=3),
        shared.failed_tasks_and_stages(
            "Failed tasks and stages over the run (driver's appStatus source). " + NEEDS_APP_STATUS,
            width=3),
        Panel("Slot-seconds held vs used",
              "Held: each executor's cores times its time from its first to its last report (threadpool."
              "activeTasks samples; spark.executor.cores from the annotator's executor added events). Used: "
              "the time tasks held a slot, summed over tasks (Spark's runTime + deserializeTime). The report "
              "counts held from the executors' added and removed events to the second (./sparkscope report: "
              "Capacity). " + NEEDS_SINK + " " + NEEDS_ANNOTATOR,
              [*_held_run_deserialize(), math("$B + $C")],
              "s", kind="stat", width=5, height=4, hidden_refs=("B", "C"),
              overrides=[{"matcher": {"id": "byFrameRefID", "options": "D"},
                          "properties": [{"id": "displayName", "value": "used"}]}]),
        Panel("Idle share of slots held",
              "1 - used / held of 'Slot-seconds held vs used': the share of the capacity the run held in "
              "which no task ran. High: executors waited between jobs, or more slots than tasks; the "
              "report's Capacity section says which and what to change (dynamic allocation, fewer "
              "executors or cores). " + NEEDS_SINK + " " + NEEDS_ANNOTATOR,
              [*_held_run_deserialize(), math("1 - ($B + $C) / $A")],
              "percentunit", kind="stat", width=3, height=4, hidden_refs=("A", "B", "C"), decimals=0,
              display_name="idle share"),
        Panel("Peak memory",
              "Highest heap used and highest JVM RSS of any executor, and of the driver, over the run: the "
              "exact peaks (Spark's own maxima between polls), the same numbers as the sizing table below. "
              "A run without the annotator has none: its sampled peaks (Graphite samples, which miss short "
              "peaks) are in 'Peak memory per executor, sampled'. In local mode the driver is the only "
              "executor. " + NEEDS_PEAKS,
              exact_peaks(JVM_HEAP_MEMORY, "heap") + exact_peaks(PROCESS_TREE_JVM_RSS_MEMORY, "RSS"), "bytes",
              kind="stat", width=8, height=4,
              no_value="no exact peaks (annotator not attached): see the sampled table below"),
    ])


SIZING_EXACT = [
    ('"executor_id"', "executorid"),
    (f'"{JVM_HEAP_MEMORY}"', "peak heap"),
    (f'"{ON_HEAP_UNIFIED_MEMORY}"', "peak unified"),
    (f'"{ON_HEAP_EXECUTION_MEMORY}"', "peak execution"),
    (f'"{ON_HEAP_STORAGE_MEMORY}"', "peak storage"),
    (f'"{OFF_HEAP_UNIFIED_MEMORY}"', "off-heap unified"),
    ('"DirectPoolMemory"', "direct"),
    ('"MappedPoolMemory"', "mapped"),
    (f'"{PROCESS_TREE_JVM_RSS_MEMORY}"', "JVM RSS"),
    (f'"{PROCESS_TREE_PYTHON_RSS_MEMORY}"', "Python RSS"),
    (f'"{PROCESS_TREE_OTHER_RSS_MEMORY}"', "other RSS"),
    (" + ".join(f'"{name}"' for name in PROCESS_TREE_RSS), "container RSS"),
    (f'"{TOTAL_GC_TIME}"', "GC time"),
]


def _sizing_table() -> Panel:
    """Exact peaks (annotator) joined by executor with two sampled columns
    (Graphite): the configured heap and the live set."""
    targets = [
        annotator_fields(EXECUTOR_PEAKS_MEASUREMENT, SIZING_EXACT),
        per_executor_peak(HEAP_MAX, "heap (sampled)",
                          derived=((f'(sum("v") - {RESERVED_BYTES}) * 0.6', "unified capacity at fraction 0.6"),)),
        # One per collector; only the run's own has series.
        *(per_executor_peak(pool, "live set (sampled)") for pool in OLD_GEN_POOLS),
    ]
    panel = Panel(
        "Sizing: what each executor needed, exact peaks",
        "One row per executor (in local mode the driver is the one executor). Exact columns are Spark's own "
        "peaks between heartbeats (" + NEEDS_PEAKS + "); '(sampled)' columns are Graphite samples. How to "
        "read it: peak unified (execution + storage) against unified capacity = (heap - 300 MiB) x "
        "spark.memory.fraction (0.6 unless you set it; ./sparkscope report uses your setting); live set = "
        "old generation used after the last GC, what the heap must hold (0 until a collection of the old "
        "generation ran: G1's young collections do not update it); container RSS = JVM + Python + other "
        "RSS, what YARN or Kubernetes compares with spark.executor.memory + spark.executor.memoryOverhead "
        "(+ spark.executor.pyspark.memory); container RSS minus heap is what memoryOverhead must cover. "
        "GC time is the JVM's total. For advice with --conf lines run ./sparkscope report.",
        targets, "bytes", kind="table", width=24, height=7,
        options={"sortBy": [{"displayName": "executorid", "desc": False}]},
        overrides=[{"matcher": {"id": "byName", "options": "executorid"},
                    "properties": [{"id": "unit", "value": "string"}]},
                   {"matcher": {"id": "byName", "options": "GC time"},
                    "properties": [{"id": "unit", "value": "ms"}]}])
    # Each frame loses its own time first (the exact points and the samples
    # are stamped differently), then rows are joined by executor id.
    panel.transformations = [{"id": "organize", "options": {"excludeByName": {"Time": True}}},
                             {"id": "convertFieldType", "options": {"conversions": [
                                 {"targetField": "executorid", "destinationType": "string"}]}},
                             {"id": "merge", "options": {}}]
    return panel


def _memory_by_stage() -> Panel:
    columns = [('"stage_id"', "stage"), ('"attempt"', "attempt"), ('"name"', "name"),
               ('"execution_id"', "SQL query"), ('"executors"', "executors"),
               (f'"{ON_HEAP_EXECUTION_MEMORY}"', "peak execution"),
               ('"TaskPeakExecutionMemory"', "one task's execution"), (f'"{ON_HEAP_STORAGE_MEMORY}"', "peak storage"),
               (f'"{JVM_HEAP_MEMORY}"', "peak heap"), (f'"{PROCESS_TREE_JVM_RSS_MEMORY}"', "peak JVM RSS"),
               (f'"{PROCESS_TREE_PYTHON_RSS_MEMORY}"', "peak Python RSS"),
               ('"heap_peak_executor"', "heap peak on"), ('"status"', "status")]
    return Panel(
        "Memory by stage: which stage needed it",
        "Each stage's highest execution memory, storage, heap and RSS on any one executor while it ran, "
        "largest execution memory first; 'SQL query' is the execution id of the SQL queries table. "
        "'one task's execution' is the most execution memory one task of the stage held (Spark counts it "
        "on every acquire; the polled 'peak execution' can miss it): an executor running N tasks at once "
        "needs N times it in its unified pool, or the stage spills. "
        "Heap and RSS belong to the whole JVM: stages that ran at the same time show the same peak. "
        + NEEDS_PEAKS,
        [annotator_fields(STAGE_PEAKS_MEASUREMENT, columns)], "bytes", kind="table", width=24, height=8,
        options={"sortBy": [{"displayName": "peak execution", "desc": True}]},
        overrides=[{"matcher": {"id": "byName", "options": name}, "properties": [{"id": "unit", "value": "none"}]}
                   for name in ("stage", "attempt", "SQL query", "executors")]
        + [{"matcher": {"id": "byName", "options": "Time"},
            "properties": [{"id": "custom.hidden", "value": True}]}])


def memory_row() -> Row:
    return Row("Memory: what each executor really needed", [
        _sizing_table(),
        _memory_by_stage(),
        _peak_table(
            "Peak memory per executor, sampled",
            "The highest Graphite sample of each memory metric on each executor over the run (every sink "
            "period; short peaks between samples are missed: the exact table above has them), for the "
            "Executors shown with the highest heap peaks (20 by default; 'all' lists every one). For runs "
            "without the annotator. " + NEEDS_EXECUTOR_METRICS + " RSS: " + NEEDS_PROCESS_TREE,
            BYTES_COLUMNS, "bytes", listed=TOP_BY_HEAP),
    ])


def work_row() -> Row:
    return Row("Work: task time per executor and in all", [
        Panel("Task time by component, all executors",
              "Where task time went over the run, summed over executors: run time, and within it CPU, GC, "
              "deserialization, shuffle fetch wait, shuffle write, result serialization. " + NEEDS_SINK,
              [Total(RUN_TIME_COUNT, "run time"), Total(CPU_TIME_COUNT, "CPU", divisor=1_000_000),
               Total(JVM_GC_TIME_COUNT, "GC"), Total(DESERIALIZE_TIME_COUNT, "deserialize"),
               Total(SHUFFLE_FETCH_WAIT_TIME_COUNT, "shuffle fetch wait"),
               Total(SHUFFLE_WRITE_TIME_COUNT, "shuffle write", divisor=1_000_000),
               Total(RESULT_SERIALIZATION_TIME_COUNT, "result serialization")],
              "ms", kind="bargauge", width=24, height=7,
              options={"displayMode": "basic", "orientation": "horizontal", "showUnfilled": True,
                       "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}}),
        _peak_table(
            "Work per executor",
            "Totals per executor over the run: task run time and GC time (ms), succeeded tasks, shuffle "
            "read and written, spilled to disk. An executor far above the others did more work: skewed "
            "partitions or a slow node. " + NEEDS_SINK,
            [(RUN_TIME_COUNT, "run time"), (JVM_GC_TIME_COUNT, "GC time"),
             (SUCCEEDED_TASKS_COUNT, "tasks"), (SHUFFLE_TOTAL_BYTES_READ_COUNT, "shuffle read"),
             (SHUFFLE_BYTES_WRITTEN_COUNT, "shuffle written"), (DISK_BYTES_SPILLED_COUNT, "spilled to disk")],
            "none",
            overrides=[{"matcher": {"id": "byName", "options": name}, "properties": [{"id": "unit", "value": unit}]}
                       for name, unit in [("run time", "ms"), ("GC time", "ms"), ("shuffle read", "bytes"),
                                          ("shuffle written", "bytes"), ("spilled to disk", "bytes")]]),
    ])


def stages_row() -> Row:
    return Row("Stages and queries", [
        _stage_table("Slowest stages",
                     "Completed and failed stages, slowest first, with the job or SQL query each ran for: "
                     "duration, tasks, median and slowest task, and where the slowest ran. " + NEEDS_ANNOTATOR,
                     "duration"),
        _stage_table("Stages that waited on their slowest task",
                     "Stages by tail (slowest task minus median task): the time a stage spent waiting on one "
                     "task beyond a typical one, largest first, so a short stage with two uneven tasks does not "
                     "outrank a long one. straggler = true when that task delayed the stage "
                     "(spark.sparkscope.straggler.* settings). Slowest read far above average read: data "
                     "skew in that partition; about equal: look at the executor and host named. "
                     + NEEDS_ANNOTATOR, "tail"),
        Panel("SQL queries",
              "SQL queries (executions) of the run with status and duration; the description is the query "
              "text or the job description set by the application. " + NEEDS_ANNOTATOR,
              [raw('SELECT "execution_id", "duration_ms" AS "duration", "status", "description" '
                   f'FROM "{QUERY_MEASUREMENT}" WHERE {APP} AND "status"::tag <> \'RUNNING\' AND $timeFilter',
                   result_format="table")],
              "none", kind="table", width=24, height=8,
              options={"sortBy": [{"displayName": "duration", "desc": True}]},
              overrides=[{"matcher": {"id": "byName", "options": "duration"},
                          "properties": [{"id": "unit", "value": "ms"}]}]),
    ])


# "Compared with usual": the run among its job's last runs (the job: the annotator's
# job tag, spark.sparkscope.job or the application name), as ./sparkscope compare
# takes them: finished, newest first, this run and the BASELINE_RUNS before it.
BASELINE_RUNS = 5
# How far back a job's earlier runs are looked for, from the end of the time range.
BASELINE_DAYS = 30
_RUNS = '"applicationid" =~ /^${runs:regex}$/'
_UP_TO_RANGE_END = f"time <= ${{__to}}ms AND time >= ${{__to}}ms - {BASELINE_DAYS}d"
_FINISHED = "\"status\"::tag = 'FINISHED'"


def variables() -> list[dict[str, Any]]:
    """The summary's own hidden variables: the run's job and the job's last runs."""
    return [
        variable("job", "Job", f'SHOW TAG VALUES FROM "{APPLICATION_MEASUREMENT}" WITH KEY = "{JOB_KEY}" '
                               'WHERE "applicationid" =~ /^${applicationid:regex}$/',
                 hide=2, sort=SORT_ALPHABETICAL,
                 description="The recurring job of the run picked: spark.sparkscope.job, else its application "
                             "name (the annotator's job tag)."),
        # Newest first by their end (top() turns the tag into a field a SELECT may name alone).
        variable("runs", "Runs of the job",
                 f'SELECT "applicationid" FROM (SELECT top("end_time_ms", "applicationid", {BASELINE_RUNS + 1}) '
                 f'FROM "{APPLICATION_MEASUREMENT}" WHERE "{JOB_KEY}" =~ /^${{job:regex}}$/ AND {_FINISHED} '
                 f'AND {_UP_TO_RANGE_END}) ORDER BY time DESC',
                 hide=2, sort=SORT_AS_QUERIED, multi=True, includeAll=True,
                 current={"selected": True, "text": ["All"], "value": ["$__all"]},
                 description=f"The job's last {BASELINE_RUNS + 1} finished runs up to the end of the time range "
                             f"(within {BASELINE_DAYS} days): the run picked and the {BASELINE_RUNS} before it "
                             "when the range ends with it."),
    ]


def compared_row() -> Row:
    usual = ("The job's usual is its last finished runs before this one (the hidden variable runs: up to "
             f"{BASELINE_RUNS} before, within {BASELINE_DAYS} days of the range's end), as ./sparkscope "
             "compare takes them; compare also matches SQL queries and jobs, judges every figure against the "
             "baseline's spread and names what is worse. The job is spark.sparkscope.job, else the "
             "application name. ")
    return Row("Compared with usual: this run against its job's last runs", [
        Panel("Run time: this run and its job's usual",
              "This run's wall-clock time, and the median of its job's last runs before it. " + usual
              + NEEDS_ANNOTATOR,
              [target(f'SELECT last("duration_ms") FROM "{APPLICATION_MEASUREMENT}" WHERE {APP} AND {_FINISHED} '
                      'AND $timeFilter', "this run"),
               target(f'SELECT median("duration_ms") FROM "{APPLICATION_MEASUREMENT}" WHERE {_RUNS} AND '
                      f'"applicationid" !~ /^${{applicationid:regex}}$/ AND {_FINISHED} AND {_UP_TO_RANGE_END}',
                      "usual (median)")],
              "ms", kind="stat", width=6, height=8),
        Panel("Runs of this job",
              "The job's last finished runs up to the end of the time range, newest first, with their "
              "wall-clock time and application name. " + usual + NEEDS_ANNOTATOR,
              [raw(f'SELECT "applicationid" AS "run", "duration_ms" AS "duration", "app_name" AS "name" '
                   f'FROM "{APPLICATION_MEASUREMENT}" WHERE {_RUNS} AND {_FINISHED} AND {_UP_TO_RANGE_END} '
                   'ORDER BY time DESC', result_format="table")],
              "none", kind="table", width=18, height=8,
              overrides=[{"matcher": {"id": "byName", "options": "duration"},
                          "properties": [{"id": "unit", "value": "ms"}]}]),
        Panel("Stage by stage: this run and its job's last runs",
              "Each stage's duration (ms) in this run and in each of the job's last runs, a row per stage "
              "id: a stage's id is its position in its run, so the same stage of a job that did not change "
              "has the same id in every run, and a column far above the others in one row is the phase that "
              "got slower. A job whose code changed shifts the ids: ./sparkscope compare lists its new and "
              "gone phases instead of pairing them. A retried stage has a row per attempt. " + usual
              + NEEDS_ANNOTATOR,
              [raw(f'SELECT "stage_id", "duration_ms" FROM "{STAGE_MEASUREMENT}" WHERE {_RUNS} AND '
                   f'"status"::tag <> \'RUNNING\' AND {_UP_TO_RANGE_END} GROUP BY "applicationid"',
                   result_format="table")],
              "ms", kind="table", width=24, height=8,
              options={"sortBy": [{"displayName": "stage_id", "desc": False}]},
              overrides=[{"matcher": {"id": "byName", "options": "stage_id"},
                          "properties": [{"id": "unit", "value": "none"}]}],
              transformations=[{"id": "joinByField", "options": {"byField": "stage_id", "mode": "outer"}},
                               {"id": "organize", "options": {"excludeByName": {"Time": True}}}]),
    ])


CONNECT_NOTE = ("Task time: each job's tasks from launch to finish, summed (the annotator's job points). The report's Capacity section adds each one's share of the slots and money the run "
                "held (./sparkscope report). " + NEEDS_ANNOTATOR)


def connect_row() -> Row:
    """Who used a Spark Connect server: its jobs' task time per user (a tag: grouped
    in InfluxDB) and per session (a field, unbounded: grouped in Grafana)."""
    ended = f'FROM "{JOB_MEASUREMENT}" WHERE {APP} AND "status"::tag <> \'RUNNING\''
    per_user = (f'SELECT sum("task_ms") AS "task time", count("task_ms") AS "jobs" {ended} AND $timeFilter '
                f'GROUP BY "{CONNECT_USER}"')
    per_job = (f'SELECT "{CONNECT_SESSION}" AS "session", "{CONNECT_USER}"::tag AS "user", '
               f'"{CONNECT_OPERATION}" AS "operation", "task_ms" AS "task time" {ended} '
               f'AND "{CONNECT_SESSION}" <> \'\' AND $timeFilter')
    ms = [{"matcher": {"id": "byName", "options": "task time"}, "properties": [{"id": "unit", "value": "ms"}]},
          {"matcher": {"id": "byName", "options": "task time (sum)"},
           "properties": [{"id": "unit", "value": "ms"}, {"id": "displayName", "value": "task time"}]}]
    by_session = Panel(
        "Task time by Spark Connect session",
        "On a Spark Connect server: each client session's task time, jobs and operations (statements), "
        "most first, with its user. Empty for a run that is not a Connect server's. " + CONNECT_NOTE,
        [raw(per_job, result_format="table")], "none", kind="table", width=14, height=7,
        options={"sortBy": [{"displayName": "task time", "desc": True}]}, overrides=ms)
    # One row per session: the job rows grouped in the browser (a session id is a field, not a tag).
    by_session.transformations = [{"id": "groupBy", "options": {"fields": {
        "session": {"operation": "groupby", "aggregations": []},
        "user": {"operation": "groupby", "aggregations": []},
        "operation": {"operation": "aggregate", "aggregations": ["distinctCount"]},
        "task time": {"operation": "aggregate", "aggregations": ["sum", "count"]}}}}]
    return Row("Who used it: Spark Connect users and sessions", [
        Panel("Task time by Spark Connect user",
              "On a Spark Connect server: each user's task time and jobs over the run, most first. A run that "
              "is not a Connect server's shows one row without a user: all of its jobs. " + CONNECT_NOTE,
              [raw(per_user, result_format="table")], "none", kind="table", width=10, height=7,
              options={"sortBy": [{"displayName": "task time", "desc": True}]}, overrides=ms),
        by_session,
    ])


def rows() -> list[Row]:
    return [app_row(), compared_row(), memory_row(), work_row(), stages_row(), connect_row()]
