"""Every number the alert rules use: the one place to change them.

Each value says what it is, why the default, and what changes if you move
it. Durations are seconds. After a change, write the provisioning file again
and restart Grafana (or reload its provisioning: POST /api/admin/provisioning/
alerting/reload as a Grafana admin):

    .venv/bin/python -m sparkscope.generate

A rule looks at a window of the recent past (its query's relative time range)
once per evaluation, and fires only after its condition held at every
evaluation for its `for` duration; 0 fires at the first evaluation that sees
the problem (events: an executor lost, a straggler stage, a kill).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Thresholds:
    # How often Grafana evaluates every rule (the rule group's interval). Grafana
    # accepts multiples of its base interval, 10 s. A minute keeps the load on
    # InfluxDB to about 20 small queries a minute whatever the number of runs.
    evaluate_every_s: int = 60

    # Executor heap near its max: the LOWEST heap use seen in each window
    # (JVMHeapMemory, sampled every 2 s) above this share of the heap's max
    # (jvm heap.max). The lowest, not the highest: a JVM's heap fills with
    # garbage between collections as a matter of course; when even right after
    # a collection it stays this full, live data fill the heap and an
    # OutOfMemoryError or a GC storm is next. 0.9 of max, for 5 minutes.
    heap_used_share: float = 0.90
    heap_window_s: int = 60
    heap_for_s: int = 300

    # GC share: the share of wall-clock time an executor spent in garbage
    # collection pauses (MinorGCTime + MajorGCTime added in the window, over the
    # window). Above 0.3 the executor spends a third of its time collecting:
    # tasks slow down and heartbeats can time out. Over 5 minutes, for 5
    # minutes (a short full GC after a big shuffle is not worth a message).
    gc_share: float = 0.30
    gc_window_s: int = 300
    gc_for_s: int = 300

    # An executor lost (the annotator's sparkscope_executor removed events with
    # any cause but released and decommissioned: container_oom, killed, jvm_oom,
    # exited, other): fires at the next evaluation and stays firing while the
    # loss is in this window.
    executor_lost_window_s: int = 600

    # The kernel's OOM killer inside an executor's container (sparkscope_container
    # oom_kills grew within the window: a Python worker or another process was
    # killed, the JVM lived on). The JVM's own kill is the rule above.
    container_oom_window_s: int = 600

    # Container working set (usage minus inactive file cache, what the OOM killer
    # and Kubernetes judge) above this share of the container's memory limit, at
    # its highest in each window, for 2 minutes. Above 0.9 the next allocation
    # may be the one the kernel kills for.
    container_used_share: float = 0.90
    container_window_s: int = 60
    container_for_s: int = 120

    # Straggler stages (the annotator's sparkscope_stage with straggler=true; its
    # rule: spark.sparkscope.straggler.*) whose slowest task ran at least this
    # much longer than the typical one (task_max_ms - task_p50_ms). The
    # annotator flags stragglers of a few seconds, which the graphs show well
    # (a cold executor's first tasks make one in many healthy runs); a message
    # is worth a minute lost on one task.
    straggler_min_excess_s: int = 60
    # A stage is written when it ends but stamped at its start, so the window
    # is counted from stage starts: a straggler stage that started within it
    # fires once it has ended, and the alert resolves when its start leaves
    # the window. 3 hours: stages longer than that are not seen; a longer
    # window keeps the alert firing longer.
    straggler_window_s: int = 3 * 3600

    # Disk latency outliers: more than this many I/Os at or above the block I/O
    # probe's BLOCKPROBE_THRESHOLD_MS (100 ms) on one device within the window.
    # One slow I/O is noise; a handful in 5 minutes is a disk (or a network
    # volume) holding tasks up.
    block_outliers_over: int = 3
    block_window_s: int = 300

    # No metrics from a running application: Telegraf ends a run "no end seen"
    # once its driver has been silent for SPARKSCOPE_NO_END_GRACE_S (120 s) with
    # no end from the annotator, and notes the moment (sparkscope_no_end_seen).
    # The alert fires at the next evaluation and resolves after this window.
    no_end_window_s: int = 1800

    # The stack's own health: Telegraf dropped points (its buffer overflowed
    # while InfluxDB could not take them) or failed writes to InfluxDB
    # (unreachable, refusing, or too slow), any within the window.
    stack_window_s: int = 600

    # A streaming query falling behind: its micro-batches took on average more
    # than this many times its processing-time trigger over the window, for the
    # for-duration. 1.0 is the edge (each batch starts late); a single slow
    # batch (the first, which also plans and warms up) is averaged away over
    # 5 minutes.
    streaming_batch_over_trigger: float = 1.0
    streaming_window_s: int = 300
    streaming_for_s: int = 300
    # A failed streaming query: the annotator notes each query's end at the
    # moment it comes (sparkscope_streaming_end, failed 1), however long the
    # query ran before. The alert fires at the next evaluation and resolves
    # once the failure leaves this window; a query restarted and failing again
    # within it counts twice.
    streaming_failed_window_s: int = 1800


    # A run that holds most of its task slots idle: over the window, the mean of
    # its executors' running tasks (threadpool.activeTasks), summed, below this
    # share of the slots they hold (executors reporting x their cores, from the
    # annotator's executor added events of the last idle_cores_window_s), for
    # the for-duration. 0.25 busy is 75 % idle; 15 minutes each, so that the
    # pauses between a job's stages and a driver's short work between jobs do
    # not fire, and a run left holding executors through a long pause does.
    # Lower the share to hear only of runs that sit almost entirely idle.
    idle_slots_busy_below: float = 0.25
    idle_window_s: int = 900
    idle_for_s: int = 900
    idle_cores_window_s: int = 7 * 86400

    # A run slower than its job's baseline (the job: spark.sparkscope.job, else
    # the application name; the baseline: the job's last baseline_runs finished
    # runs before its newest, within baseline_window_s), as ./sparkscope compare
    # judges a whole run: the newest finished run's duration above the
    # baseline's highest by more than slower_min_excess_s, above its median by
    # more than slower_share, and above the median by more than 2 standard
    # deviations of the baseline (a job that varies a lot is allowed more).
    # At least baseline_min_runs runs make a baseline: one earlier run says
    # little about what is usual. The newest run is the last one that started
    # within slower_window_s: a nightly job's slow run keeps firing until its
    # next run (or a day), and a job that stopped running goes quiet. A run is
    # judged once it has ended (its end point carries its duration), so the
    # alert fires at the first evaluation after a slow run ends.
    baseline_runs: int = 5
    baseline_min_runs: int = 3
    baseline_window_s: int = 30 * 86400
    slower_window_s: int = 86400
    slower_share: float = 0.20
    slower_min_excess_s: int = 60


DEFAULTS = Thresholds()
