"""From what a run used to what the next run should ask for: a verdict and
one recommendation per memory setting, each with its reason in one line.

Rules (all from the exact peaks unless said otherwise):
- heap: the unified pool (execution + storage) must fit its peak with 20 %
  to spare: heap >= peak unified x 1.2 / spark.memory.fraction + 300 MiB.
  Execution memory is the larger of the polled peak and one task's own peak
  (TaskPeakExecutionMemory, counted by Spark on every acquire) times the
  executor's task slots: Spark caps each of N running tasks at 1/N of the
  pool, and the polls miss what a task held between them (a hash
  aggregation's map grows until its task ends);
  and the live set (old generation after GC, sampled) must be at most two
  thirds of the heap: heap >= live set x 1.5.
- a run that spilled, spent 10 % or more of task time in GC, or lost an
  executor to memory was short: never advise less than it had, and advise at
  least 1.5 x its heap.
- memoryOverhead covers what the container holds beyond the heap: JVM RSS
  minus heap, or JVM non-heap + direct + mapped pools when larger, plus other
  processes' RSS, with 25 % to spare; Spark's floor is 384 MiB.
- pyspark memory: Python workers' peak RSS with 25 % to spare.
- spark.memory.fraction is lowered only when objects outside Spark's pools
  (live set - storage) outgrow the rest of the heap, and never on a short
  run (its live set is swollen by the pressure).
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from typing import Optional

from sparkscope.report.run_facts import MIB, MIN_BATCHES_TO_JUDGE, ExecutorFacts, RunFacts
from sparkscope.store.reads import MOST_ENTITIES
from sparkscope.store.figures import gc_share_of_task_time, parse_size  # noqa: F401 (parse_size: the report's name)
from sparkscope.store.schema import (
    JVM_HEAP_MEMORY, ON_HEAP_EXECUTION_MEMORY, ON_HEAP_STORAGE_MEMORY, ON_HEAP_UNIFIED_MEMORY,
    PROCESS_TREE_JVM_RSS_MEMORY, PROCESS_TREE_OTHER_RSS_MEMORY, PROCESS_TREE_PYTHON_RSS_MEMORY,
)

RESERVED = 300 * MIB
DEFAULT_FRACTION = 0.6
DEFAULT_HEAP = 1024 * MIB
MIN_OVERHEAD = 384 * MIB
SHORT_GC_SHARE = 0.10
HEADROOM_UNIFIED = 1.2
HEADROOM_LIVE = 1.5
HEADROOM_NATIVE = 1.25
GENEROUS_BELOW = 0.75  # advice under this share of what the run had: give memory back
OOM_MARKERS = ("OutOfMemory", "exit code 137", "Container killed", "GC overhead limit", "exceeding memory limits")
HEAP_MARKERS = ("OutOfMemory", "GC overhead limit")  # the heap's own failures, not a container's kill


@dataclass
class Recommendation:
    key: str
    value: str
    reason: str
    had: Optional[str] = None


@dataclass
class Advice:
    verdict: str  # SHORT, GENEROUS, RIGHT
    summary: str
    recommendations: list[Recommendation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    gc_share: Optional[float] = None
    spilled: float = 0.0
    containers: list[str] = field(default_factory=list)  # what filled each container that was killed in

    def conf_lines(self) -> list[str]:
        return [f"--conf {r.key}={r.value}" for r in self.recommendations]


def spark_size(nbytes: float) -> str:
    """Bytes to a Spark setting, rounded up to 128 MiB: 1536m, 2g."""
    mib = max(128, int(math.ceil(nbytes / MIB / 128.0)) * 128)
    return f"{mib // 1024}g" if mib % 1024 == 0 else f"{mib}m"


def human(nbytes: Optional[float]) -> str:
    if nbytes is None:
        return "n/a"
    if abs(nbytes) >= 1024 ** 3:
        return f"{nbytes / 1024 ** 3:.2f} GiB"
    return f"{nbytes / MIB:.0f} MiB"


def _max(values) -> Optional[float]:
    values = [v for v in values if v is not None]
    return max(values) if values else None


def gc_share(run: RunFacts) -> Optional[float]:
    """The run's GC share of task time (store/figures.py)."""
    workers = run.workers().values()
    return gc_share_of_task_time((e.totals.get("gc_ms", 0) for e in workers),
                                 (e.totals.get("run_ms", 0) for e in workers))


def spilled(run: RunFacts) -> float:
    return sum(e.totals.get("spilled_disk", 0) for e in run.workers().values())


def task_slots(run: RunFacts, executor: ExecutorFacts) -> int:
    """Tasks an executor runs at once: its cores (as registered, else
    spark.executor.cores, else 1) over spark.task.cpus."""
    cores = executor.cores or int(run.settings.get("spark.executor.cores") or 1)
    return max(1, cores // max(1, int(run.settings.get("spark.task.cpus") or 1)))


def execution_need(executor: ExecutorFacts, slots: int) -> float:
    """Execution memory an executor needs: the polled peak, or one task's own
    peak times the tasks it runs at once, whichever is larger."""
    return max(executor.peaks.get(ON_HEAP_EXECUTION_MEMORY) or 0,
               (executor.peaks.get("TaskPeakExecutionMemory") or 0) * slots)


# Why Spark says an executor went away (the annotator's "cause", from the
# reason text: annotator ExecutorLoss): the kernel or the cluster manager
# killed it for memory, or a SIGKILL no one explained (the OOM killer, when
# its container has a limit).
KILLED_FOR_MEMORY = ("container_oom",)
KILLED = ("killed",)


def killed_in_container(run: RunFacts) -> list[tuple[dict, ExecutorFacts]]:
    """Executors lost to a kill their container explains: the cluster manager
    said memory, or a SIGKILL hit one whose container had a limit."""
    out = []
    for row in run.removals:
        executor = run.executors.get(str(row.get("executor_id")))
        cause = row.get("cause")
        limited = executor is not None and executor.container is not None and executor.container.limit
        if cause in KILLED_FOR_MEMORY or (cause in KILLED and limited):
            out.append((row, executor or ExecutorFacts(str(row.get("executor_id")))))
    return out


def _below_request(run: RunFacts, c, had_heap: float, role: str) -> str:
    """A clause when the container's limit is below what Spark was told the
    executor may use (heap + overhead): then something other than Spark set
    it (docker --memory, a LimitRange, a YARN queue), and no Spark setting
    within it can hold a heap that size."""
    if c is None or not c.limit:
        return ""
    overhead = parse_size(run.settings.get(f"spark.{role}.memoryOverhead")) or max(MIN_OVERHEAD, 0.1 * had_heap)
    request = had_heap + overhead
    if c.limit >= request * 0.95:
        return ""
    return (f"; the limit is below what Spark was given for it (heap {human(had_heap)} + overhead "
            f"{human(overhead)} = {human(request)}): raise the container's limit to at least that, or lower "
            f"spark.{role}.memory to fit under {human(c.limit)} with the overhead")


def container_findings(run: RunFacts, had_heap: float) -> tuple[list[str], list[Recommendation]]:
    """What filled each container that had a kill in it, and the setting to
    change: lines for the verdict, and recommendations that win over the
    ones from the peaks (a killed container needs more than its peaks say)."""
    lines: list[str] = []
    overhead_need = 0.0
    pyspark_need = 0.0
    role = "driver" if run.local_mode else "executor"
    k8s = run.settings.get("spark.master", "").startswith("k8s://")
    for row, e in killed_in_container(run):
        c = e.container
        heap = e.peaks.get(JVM_HEAP_MEMORY)
        jvm = e.peaks.get(PROCESS_TREE_JVM_RSS_MEMORY)
        python = e.peaks.get(PROCESS_TREE_PYTHON_RSS_MEMORY) or 0
        other = e.peaks.get(PROCESS_TREE_OTHER_RSS_MEMORY) or 0
        code = row.get("exit_code")
        said = f"exit {code:.0f}" if code is not None else str(row.get("reason") or "")[:80]
        if c is not None and c.limit:
            fill = c.last_working_set or c.working_set
            where = (f"its container's limit is {human(c.limit)}; the working set reached {human(c.working_set)} "
                     f"({c.working_set / c.limit:.0%}), {human(fill)} at the last sample before the kill")
        else:
            where = "no container sample (ContainerMemoryPlugin not attached, or no memory cgroup)"
        parts = ", ".join(f"{name} {human(v)}" for name, v in (("heap used", heap), ("JVM RSS", jvm),
                                                                ("Python RSS", python), ("other RSS", other)) if v)
        before = (f"; the kernel had killed {c.oom_kills} other process{'es' if c.oom_kills > 1 else ''} in it "
                  "before (Python workers, most likely)" if c is not None and c.oom_kills > 0 else "")
        line = (f"executor {e.executor_id} was killed ({said}): {where}; at its highest: {parts or 'no peaks'}"
                + before)
        lines.append(line + _below_request(run, c, had_heap, role))
        beyond_heap = max((jvm or 0) - had_heap, 0) + python + other
        if c is not None and c.limit:
            beyond_heap = max(beyond_heap, c.working_set - had_heap)
        overhead_need = max(overhead_need, beyond_heap * 1.5)
        if python and python >= 0.25 * (c.limit if c is not None and c.limit else had_heap):
            pyspark_need = max(pyspark_need, python * HEADROOM_NATIVE)
    for executor_id, e in sorted(run.executors.items()):
        c = e.container
        lost = any(str(r.get("executor_id")) == executor_id for r, _ in killed_in_container(run))
        if c is not None and c.oom_kills > 0 and not lost:
            python = e.peaks.get(PROCESS_TREE_PYTHON_RSS_MEMORY) or 0
            name = "the driver" if executor_id == "driver" else f"executor {executor_id}"
            lines.append(f"the kernel killed {c.oom_kills} process{'es' if c.oom_kills > 1 else ''} inside "
                         f"{name}'s container (limit {human(c.limit)}, working set up to {human(c.working_set)}) "
                         "and the JVM lived on: the victims were other processes, most likely Python workers, "
                         "whose tasks then fail with \"Python worker exited unexpectedly\"; "
                         "spark.executor.pyspark.memory caps them (a MemoryError instead of a kill) and "
                         "memoryOverhead makes room for them" + _below_request(run, c, had_heap, role))
            if python:
                pyspark_need = max(pyspark_need, python * HEADROOM_NATIVE)
    recs: list[Recommendation] = []
    if overhead_need:
        how = ("raise spark.kubernetes.memoryOverheadFactor, or set the overhead itself" if k8s else
               "the container is heap + overhead (+ pyspark memory)")
        recs.append(Recommendation(f"spark.{role}.memoryOverhead", spark_size(max(MIN_OVERHEAD, overhead_need)),
                                   f"a container was killed: what it held beyond the heap x 1.5 ({how})",
                                   run.settings.get(f"spark.{role}.memoryOverhead")))
    if pyspark_need:
        recs.append(Recommendation("spark.executor.pyspark.memory", spark_size(pyspark_need),
                                   "Python workers filled the container: this caps them (a MemoryError in "
                                   "Python instead of a kill) and adds to the container on YARN and Kubernetes",
                                   run.settings.get("spark.executor.pyspark.memory")))
    return lines, recs


_RAISED = re.compile(r"^\s*([\w.$]+(?:Error|Exception|Exit|Interrupt)\b.*)$")


def exception_summary(text: Optional[str], limit: int = 300) -> str:
    """The line of an exception that names it: a JVM exception's first line, a
    Python traceback's last "SomeError: message" (py4j wraps it in a JVM one),
    whether its newlines are real or written as \\n."""
    if not text:
        return "no exception text"
    lines = [line.strip() for line in re.split(r"\r?\n|\\n", text) if line.strip()]
    raised = [m.group(1) for line in lines for m in [_RAISED.match(line)] if m]
    if "Traceback (most recent call last)" in text and raised:
        return raised[-1][:limit]
    return (raised[0] if raised else lines[0])[:limit]


def _seconds(ms: Optional[float]) -> str:
    return "n/a" if ms is None else f"{ms / 1000:.1f} s"


def streaming_lines(run: RunFacts) -> list[str]:
    """Each streaming query in one line: batches, whether it kept up and by
    what measure, its state, and its slowest batch with why."""
    lines = []
    for q in run.streaming:
        trigger = f"the {_seconds(q.trigger_ms)} trigger" if q.trigger_ms else "no fixed trigger"
        if q.batches < MIN_BATCHES_TO_JUDGE:
            parts = [f"{q.batches} batches, too few to tell whether it kept up"]
        else:
            verdict = "FELL BEHIND" if q.behind else "kept up"
            parts = [f"{q.batches} batches", f"{verdict}: batches took {_seconds(q.median_batch_ms)} (median "
                                             f"after the first) against {trigger}"]
        if q.first_lag_ms is not None and q.last_lag_ms is not None:
            parts.append(f"event time {_seconds(q.last_lag_ms)} behind the clock at the end "
                         f"({_seconds(q.first_lag_ms)} at the first batch)")
        if q.state_rows:
            parts.append(f"state up to {q.state_rows:.0f} rows")
        if q.backlog:
            parts.append(f"up to {q.backlog:.0f} offsets behind the source's latest")
        if q.slowest_batch_ms is not None:
            slowest = f"slowest batch {q.slowest_batch_id if q.slowest_batch_id is not None else '?'} " \
                      f"{_seconds(q.slowest_batch_ms)}"
            parts.append(slowest + (f" ({q.slowest_why})" if q.slowest_why else ""))
        end = {"FAILED": f"; FAILED: {exception_summary(q.exception)}", "RUNNING": "; no end seen"}.get(q.status, "")
        lines.append(f"streaming query {q.name}: " + "; ".join(parts) + end)
    return lines


def memory_failures(run: RunFacts) -> list[str]:
    found = []
    for row in [*run.stages, *run.removals]:
        text = " ".join(str(row.get(k) or "") for k in ("failure_reason", "reason", "text"))
        if any(marker in text for marker in OOM_MARKERS):
            found.append(text.strip().splitlines()[0][:200])
    return found


@dataclass
class _Pools:
    """What the exact peaks say the heap must hold, over every executor."""
    slots: dict[str, int]
    needs: dict[str, float]  # execution per executor: one task's own peak x its task slots
    execution: float
    storage: float
    unified: float
    polled_execution: float
    live: Optional[float]
    heap_peak: float


def _pools(run: RunFacts, workers: dict[str, ExecutorFacts]) -> _Pools:
    slots = {k: task_slots(run, e) for k, e in workers.items()}
    needs = {k: execution_need(e, slots[k]) for k, e in workers.items()}
    return _Pools(
        slots, needs,
        execution=_max(needs.values()) or 0,
        storage=_max(e.peaks.get(ON_HEAP_STORAGE_MEMORY) for e in workers.values()) or 0,
        unified=_max(max(e.peaks.get(ON_HEAP_UNIFIED_MEMORY) or 0, needs[k] + (e.peaks.get(ON_HEAP_STORAGE_MEMORY) or 0))
                     for k, e in workers.items()) or 0,
        polled_execution=_max(e.peaks.get(ON_HEAP_EXECUTION_MEMORY) for e in workers.values()) or 0,
        live=_max(e.live_set for e in workers.values()),
        heap_peak=_max(e.peaks.get(JVM_HEAP_MEMORY) for e in workers.values()) or 0)


def _without_peaks(run: RunFacts, role: str, notes: list[str]) -> Advice:
    if run.no_end_seen:
        when = (time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(run.ended_ms / 1000)) if run.ended_ms
                else "an unknown time")
        return Advice("UNKNOWN", f"no end seen for {run.app_id}: its driver stopped reporting at {when} without "
                      "the application's end (killed by SIGKILL or the kernel's OOM killer, or its host was lost), "
                      "so the annotator never wrote the exact peaks it keeps until the end. The dashboards show "
                      "what was sampled until then.", notes=notes)
    return Advice("UNKNOWN", f"no exact peaks for the {role}s of {run.app_id}: was the annotator attached "
                  "(spark.plugins=...ListenerPlugin, see ./sparkscope conf) and did the application end?", notes=notes)


def _heap_need(pools: _Pools, fraction: float, notes: list[str]) -> tuple[float, str]:
    """The heap the run needed, and how it was reckoned."""
    for_unified = pools.unified * HEADROOM_UNIFIED / fraction + RESERVED
    for_live = (pools.live or 0) * HEADROOM_LIVE
    need = max(for_unified, for_live, 512 * MIB)
    why = (f"peak unified {human(pools.unified)} (execution {human(pools.execution)}, storage "
           f"{human(pools.storage)}) x {HEADROOM_UNIFIED} / fraction {fraction:g} + 300 MiB = {human(for_unified)}")
    if pools.execution > pools.polled_execution:
        most = pools.slots[max(pools.needs, key=pools.needs.get)]
        why += (f" (execution: one task's own peak x {most} task slot{'s' if most > 1 else ''}; "
                f"the polls saw {human(pools.polled_execution)})")
    if pools.live is not None:
        why += f"; live set {human(pools.live)} x {HEADROOM_LIVE} = {human(for_live)}"
    else:
        notes.append("No live-set samples (old generation after GC; Graphite jvm source): the heap advice "
                     "rests on the unified pool alone.")
    return need, why


def _verdict(run: RunFacts, role: str, pools: _Pools, had_heap: float, need: float, why: str,
             short_because: list[str], container_lines: list[str],
             share: Optional[float]) -> tuple[str, str, float, str]:
    """SHORT, GENEROUS or RIGHT, its sentence, and the need and its reason as the verdict changes them."""
    name = run.app_name
    if short_because:
        need = max(need, had_heap * 1.5)
        why = f"the run was short ({'; '.join(short_because)}): at least 1.5 x its {human(had_heap)} heap; " + why
    if container_lines:
        # A kill outranks the rest: the container is named first, whatever the heap did.
        killed = container_lines[0].split(":")[0]
        room = f"Give the {role}s' containers more room (what filled them and what to change: below)"
        if short_because:
            return ("SHORT", f"memory was SHORT for {name}, in the container and in the heap: {killed}. {room}; "
                    f"the heap was short too ({'; '.join(short_because)}): at least {spark_size(need)}, with the "
                    f"container's room to match.", need, why)
        # The heap held; the container did not: more heap would only fill it sooner.
        return ("SHORT", f"memory was SHORT for {name}, in the container rather than the heap: {killed}. "
                f"{room}; the heap needed about {spark_size(need)}.", need, why)
    if short_because:
        return ("SHORT", f"memory was SHORT for {name}: {'; '.join(short_because)}. Give the {role}s more "
                f"heap (execution memory peaked at {human(pools.execution)}).", need, why)
    if need <= had_heap * GENEROUS_BELOW:
        return ("GENEROUS", f"memory was GENEROUS for {name}: the {role}s needed about {spark_size(need)} of "
                f"{human(had_heap)} heap (peak heap used {human(pools.heap_peak)}, garbage included); about "
                f"{human(had_heap - need)} per {role} can be given back.", need, why)
    if need > had_heap:
        # No spill and little GC, yet the live set leaves little headroom: say so,
        # rather than calling it right and advising more in the same breath.
        gc = f", GC {share:.0%} of task time" if share is not None else ""
        return ("RIGHT", f"memory was enough for {name} (no spill{gc}) but with little headroom: the "
                f"advice, {spark_size(need)}, adds some to the {human(had_heap)} heap.", need, why)
    return ("RIGHT", f"memory was about RIGHT for {name}: needed about {spark_size(need)} of "
            f"{human(had_heap)} heap, no spill, GC {share:.0%} of task time." if share is not None else
            f"memory was about RIGHT for {name}: needed about {spark_size(need)} of {human(had_heap)} heap.",
            need, why)


def _beyond_heap(run: RunFacts, role: str, workers: dict[str, ExecutorFacts], had_heap: float,
                 notes: list[str]) -> list[Recommendation]:
    """Off-heap: what the container holds beyond the heap (memoryOverhead), and the Python workers."""
    recs = []
    rss = _max(e.peaks.get(PROCESS_TREE_JVM_RSS_MEMORY) for e in workers.values())
    other = _max(e.peaks.get(PROCESS_TREE_OTHER_RSS_MEMORY) for e in workers.values()) or 0
    native = _max((e.peaks.get("JVMOffHeapMemory") or 0) + (e.peaks.get("DirectPoolMemory") or 0)
                  + (e.peaks.get("MappedPoolMemory") or 0) for e in workers.values()) or 0
    if rss:
        beyond = max(rss - had_heap, native) + other
        overhead = max(MIN_OVERHEAD, beyond * HEADROOM_NATIVE)
        recs.append(Recommendation(f"spark.{role}.memoryOverhead", spark_size(overhead),
                                   f"JVM RSS peaked at {human(rss)} with {human(had_heap)} heap; beyond the heap "
                                   f"{human(beyond)} (non-heap + direct + mapped {human(native)}, other processes "
                                   f"{human(other)}) x {HEADROOM_NATIVE}, at least 384 MiB",
                                   run.settings.get(f"spark.{role}.memoryOverhead")))
    else:
        notes.append("No process-tree RSS (the annotator's ContainerMemoryPlugin, or "
                     "spark.executor.processTreeMetrics.enabled=true; Linux only): "
                     "memoryOverhead cannot be advised from this run.")
    python = _max(e.peaks.get(PROCESS_TREE_PYTHON_RSS_MEMORY) for e in workers.values())
    if python:
        recs.append(Recommendation("spark.executor.pyspark.memory", spark_size(python * HEADROOM_NATIVE),
                                   f"Python workers peaked at {human(python)} RSS together x {HEADROOM_NATIVE}",
                                   run.settings.get("spark.executor.pyspark.memory")))
    return recs


def _fraction(run: RunFacts, pools: _Pools, need: float, fraction: float, verdict: str) -> Recommendation:
    live, storage = pools.live, pools.storage
    user = max(0.0, (live or 0) - storage)
    user_region = (need - RESERVED) * (1 - fraction)
    had = run.settings.get("spark.memory.fraction")
    # A short run's live set is swollen by the pressure itself: judge the
    # split of the heap again on a run that had enough of it.
    if live is not None and user > user_region and verdict != "SHORT":
        new_fraction = max(0.3, min(0.8, 1 - user * 1.3 / (need - RESERVED)))
        return Recommendation("spark.memory.fraction", f"{new_fraction:.2f}",
                              f"objects outside Spark's pools (live set {human(live)} - storage "
                              f"{human(storage)}) exceed the user region (1 - {fraction:g}) of the heap", had)
    return Recommendation("spark.memory.fraction", f"{fraction:g}",
                          "keep: judge the split again on a run with enough heap" if verdict == "SHORT"
                          else "keep: execution and storage fit the unified pool and user objects fit "
                          "the rest" if live is not None else "keep: no live-set samples to judge by", had)


def advise(run: RunFacts) -> Advice:
    workers = run.workers()
    local = run.local_mode
    role = "driver" if local else "executor"
    heap_key = f"spark.{role}.memory"
    had_heap = parse_size(run.settings.get(heap_key)) or _max(e.heap_max for e in workers.values()) or DEFAULT_HEAP
    fraction = float(run.settings.get("spark.memory.fraction") or DEFAULT_FRACTION)
    notes = ["Advice is only as good as the run it saw: a run on more data, or with more tasks per executor "
             "(spark.executor.cores), needs more."]
    for kind, rows in (("stages", run.stages), ("SQL queries", run.queries)):
        if len(rows) >= MOST_ENTITIES:
            notes.append(f"This run has more than {MOST_ENTITIES:,} {kind}: the report read the newest "
                         f"{MOST_ENTITIES:,} of them.")
    if not any(e.peaks for e in workers.values()):
        return _without_peaks(run, role, notes)

    pools = _pools(run, workers)
    share = gc_share(run)
    spill = spilled(run)
    failures = memory_failures(run)
    need, why = _heap_need(pools, fraction, notes)
    short_because = []
    if spill > 0:
        short_because.append(f"spilled {human(spill)} to disk")
    if share is not None and share >= SHORT_GC_SHARE:
        short_because.append(f"GC took {share:.0%} of task time")
    container_lines, container_recs = container_findings(run, had_heap)
    if container_lines:  # a kill the container explains is told there, not as the heap's failure
        failures = [f for f in failures if any(marker in f for marker in HEAP_MARKERS)]
    if failures:
        short_because.append(f"memory failure: {failures[0]}")
    verdict, summary, need, why = _verdict(run, role, pools, had_heap, need, why, short_because, container_lines,
                                           share)
    recs = [Recommendation(heap_key, spark_size(need), why, run.settings.get(heap_key)),
            *_beyond_heap(run, role, workers, had_heap, notes),
            _fraction(run, pools, need, fraction, verdict)]
    driver = run.executors.get("driver")
    if not local and driver and driver.peaks.get(JVM_HEAP_MEMORY):
        driver_heap = driver.peaks[JVM_HEAP_MEMORY]
        recs.append(Recommendation("spark.driver.memory", spark_size(max(driver_heap * 1.5, 1024 * MIB)),
                                   f"the driver's heap peaked at {human(driver_heap)} (garbage included) x 1.5, "
                                   "at least 1g", run.settings.get("spark.driver.memory")))
    for rec in container_recs:  # a kill outranks what the peaks ask for
        recs = [r for r in recs if r.key != rec.key] + [rec]
    return Advice(verdict, summary, recs, notes, share, spill, container_lines)
