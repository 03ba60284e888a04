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

from sparkscope.report.run_facts import MIB, ExecutorFacts, RunFacts

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

    def conf_lines(self) -> list[str]:
        return [f"--conf {r.key}={r.value}" for r in self.recommendations]


def parse_size(text: Optional[str], default_unit: str = "m") -> Optional[int]:
    """Spark's memory strings (512m, 2g, 1024k, a plain number in default_unit) as bytes."""
    if not text:
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)b?\s*", text.lower())
    if not m:
        return None
    unit = m.group(2) or default_unit
    return int(float(m.group(1)) * 1024 ** "bkmgtp".index(unit))


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
    run_ms = sum(e.totals.get("run_ms", 0) for e in run.workers().values())
    gc_ms = sum(e.totals.get("gc_ms", 0) for e in run.workers().values())
    return gc_ms / run_ms if run_ms else None


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
    return max(executor.peaks.get("OnHeapExecutionMemory") or 0,
               (executor.peaks.get("TaskPeakExecutionMemory") or 0) * slots)


def memory_failures(run: RunFacts) -> list[str]:
    found = []
    for row in [*run.stages, *run.removals]:
        text = " ".join(str(row.get(k) or "") for k in ("failure_reason", "reason", "text"))
        if any(marker in text for marker in OOM_MARKERS):
            found.append(text.strip().splitlines()[0][:200])
    return found


def advise(run: RunFacts) -> Advice:
    workers = run.workers()
    local = run.local_mode
    role = "driver" if local else "executor"
    heap_key = f"spark.{role}.memory"
    had_heap = parse_size(run.settings.get(heap_key)) or _max(e.heap_max for e in workers.values()) or DEFAULT_HEAP
    fraction = float(run.settings.get("spark.memory.fraction") or DEFAULT_FRACTION)
    notes = ["Advice is only as good as the run it saw: a run on more data, or with more tasks per executor "
             "(spark.executor.cores), needs more."]
    if not any(e.peaks for e in workers.values()) and run.no_end_seen:
        when = (time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(run.ended_ms / 1000)) if run.ended_ms
                else "an unknown time")
        return Advice("UNKNOWN", f"no end seen for {run.app_id}: its driver stopped reporting at {when} without "
                      "the application's end (killed by SIGKILL or the kernel's OOM killer, or its host was lost), "
                      "so the annotator never wrote the exact peaks it keeps until the end. The dashboards show "
                      "what was sampled until then.", notes=notes)
    if not any(e.peaks for e in workers.values()):
        return Advice("UNKNOWN", f"no exact peaks for the {role}s of {run.app_id}: was the annotator attached "
                      "(spark.extraListeners, see ./sparkscope conf) and did the application end?", notes=notes)

    slots = {k: task_slots(run, e) for k, e in workers.items()}
    needs = {k: execution_need(e, slots[k]) for k, e in workers.items()}
    execution = _max(needs.values()) or 0
    storage = _max(e.peaks.get("OnHeapStorageMemory") for e in workers.values()) or 0
    unified = _max(max(e.peaks.get("OnHeapUnifiedMemory") or 0, needs[k] + (e.peaks.get("OnHeapStorageMemory") or 0))
                   for k, e in workers.items()) or 0
    polled_execution = _max(e.peaks.get("OnHeapExecutionMemory") for e in workers.values()) or 0
    live = _max(e.live_set for e in workers.values())
    heap_peak = _max(e.peaks.get("JVMHeapMemory") for e in workers.values()) or 0
    share = gc_share(run)
    spill = spilled(run)
    failures = memory_failures(run)

    for_unified = unified * HEADROOM_UNIFIED / fraction + RESERVED
    for_live = (live or 0) * HEADROOM_LIVE
    need = max(for_unified, for_live, 512 * MIB)
    why = (f"peak unified {human(unified)} (execution {human(execution)}, storage {human(storage)}) x "
           f"{HEADROOM_UNIFIED} / fraction {fraction:g} + 300 MiB = {human(for_unified)}")
    if execution > polled_execution:
        most = slots[max(needs, key=needs.get)]
        why += (f" (execution: one task's own peak x {most} task slot{'s' if most > 1 else ''}; "
                f"the polls saw {human(polled_execution)})")
    if live is not None:
        why += f"; live set {human(live)} x {HEADROOM_LIVE} = {human(for_live)}"
    else:
        notes.append("No live-set samples (old generation after GC; Graphite jvm source): the heap advice "
                     "rests on the unified pool alone.")

    short_because = []
    if spill > 0:
        short_because.append(f"spilled {human(spill)} to disk")
    if share is not None and share >= SHORT_GC_SHARE:
        short_because.append(f"GC took {share:.0%} of task time")
    if failures:
        short_because.append(f"memory failure: {failures[0]}")
    if short_because:
        need = max(need, had_heap * 1.5)
        why = f"the run was short ({'; '.join(short_because)}): at least 1.5 x its {human(had_heap)} heap; " + why
        verdict = "SHORT"
        summary = (f"memory was SHORT for {run.app_name}: {'; '.join(short_because)}. Give the {role}s more "
                   f"heap (execution memory peaked at {human(execution)}).")
    elif need <= had_heap * GENEROUS_BELOW:
        verdict = "GENEROUS"
        summary = (f"memory was GENEROUS for {run.app_name}: the {role}s needed about {spark_size(need)} of "
                   f"{human(had_heap)} heap (peak heap used {human(heap_peak)}, garbage included); about "
                   f"{human(had_heap - need)} per {role} can be given back.")
    elif need > had_heap:
        # No spill and little GC, yet the live set leaves little headroom: say so,
        # rather than calling it right and advising more in the same breath.
        verdict = "RIGHT"
        gc = f", GC {share:.0%} of task time" if share is not None else ""
        summary = (f"memory was enough for {run.app_name} (no spill{gc}) but with little headroom: the "
                   f"advice, {spark_size(need)}, adds some to the {human(had_heap)} heap.")
    else:
        verdict = "RIGHT"
        summary = (f"memory was about RIGHT for {run.app_name}: needed about {spark_size(need)} of "
                   f"{human(had_heap)} heap, no spill, GC {share:.0%} of task time." if share is not None else
                   f"memory was about RIGHT for {run.app_name}: needed about {spark_size(need)} of {human(had_heap)} heap.")
    recs = [Recommendation(heap_key, spark_size(need), why, run.settings.get(heap_key))]

    # Off-heap: what the container holds beyond the heap.
    rss = _max(e.peaks.get("ProcessTreeJVMRSSMemory") for e in workers.values())
    other = _max(e.peaks.get("ProcessTreeOtherRSSMemory") for e in workers.values()) or 0
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
        notes.append("No process-tree RSS (spark.executor.processTreeMetrics.enabled=true, Linux only): "
                     "memoryOverhead cannot be advised from this run.")

    python = _max(e.peaks.get("ProcessTreePythonRSSMemory") for e in workers.values())
    if python:
        recs.append(Recommendation("spark.executor.pyspark.memory", spark_size(python * HEADROOM_NATIVE),
                                   f"Python workers peaked at {human(python)} RSS together x {HEADROOM_NATIVE}",
                                   run.settings.get("spark.executor.pyspark.memory")))

    user = max(0.0, (live or 0) - storage)
    user_region = (need - RESERVED) * (1 - fraction)
    # A short run's live set is swollen by the pressure itself: judge the
    # split of the heap again on a run that had enough of it.
    if live is not None and user > user_region and verdict != "SHORT":
        new_fraction = max(0.3, min(0.8, 1 - user * 1.3 / (need - RESERVED)))
        recs.append(Recommendation("spark.memory.fraction", f"{new_fraction:.2f}",
                                   f"objects outside Spark's pools (live set {human(live)} - storage "
                                   f"{human(storage)}) exceed the user region (1 - {fraction:g}) of the heap",
                                   run.settings.get("spark.memory.fraction")))
    else:
        recs.append(Recommendation("spark.memory.fraction", f"{fraction:g}",
                                   "keep: judge the split again on a run with enough heap" if verdict == "SHORT"
                                   else "keep: execution and storage fit the unified pool and user objects fit "
                                   "the rest" if live is not None else "keep: no live-set samples to judge by",
                                   run.settings.get("spark.memory.fraction")))

    driver = run.executors.get("driver")
    if not local and driver and driver.peaks.get("JVMHeapMemory"):
        driver_heap = driver.peaks["JVMHeapMemory"]
        recs.append(Recommendation("spark.driver.memory", spark_size(max(driver_heap * 1.5, 1024 * MIB)),
                                   f"the driver's heap peaked at {human(driver_heap)} (garbage included) x 1.5, "
                                   "at least 1g", run.settings.get("spark.driver.memory")))
    return Advice(verdict, summary, recs, notes, share, spill)
