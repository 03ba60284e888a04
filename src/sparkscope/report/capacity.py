"""What a run paid for and did not use: its capacity (store/figures.py's
definitions) from its facts, the advice that follows, and the same as data
for report --json; on a Spark Connect server, who used it: each user's,
session's and operation's task time and share of what the run held
(figures.connect_attribution, from the annotator's job points).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Optional

from sparkscope.report.run_facts import RunFacts
from sparkscope.store.figures import (IDLE_STRETCH_S, Attributed, Capacity, ConnectAttribution, Prices,
                                      connect_attribution, run_capacity)

# The share of held slot time left idle from which the report advises holding less.
IDLE_ADVICE_SHARE = 0.5
# Peak heap under this share of what each executor asked for: a smaller executor would do.
MEMORY_USED_BELOW = 0.5
DEFAULT_IDLE_TIMEOUT = "60s"  # spark.dynamicAllocation.executorIdleTimeout's default


def prices_of(settings) -> Prices:
    """The prices of .env (settings.Settings), or none."""
    return Prices(getattr(settings, "price_per_core_hour", None), getattr(settings, "price_per_gb_hour", None),
                  getattr(settings, "price_currency", "") or "")


def capacity(run: RunFacts, prices: Prices = Prices(), idle_after_s: float = IDLE_STRETCH_S) -> Capacity:
    """The run's capacity: executors' spans from its events, closed at its end
    (or now, while it runs); task time from Spark's counters of its workers."""
    workers = run.workers().values()
    known = [e.totals for e in workers if "run_ms" in e.totals]
    task_ms = sum(t["run_ms"] + t.get("deserialize_ms", 0) for t in known) if known else None
    end = run.ended_ms or max([run.started_ms, *(int(r["time"]) for r in run.executor_events)])
    return run_capacity(run.executor_events, end, task_ms, run.settings,
                        {k: e.peaks for k, e in run.executors.items()}, run.active_tasks, run.stages, prices,
                        run.local_mode, idle_after_s)


def most_tasks_at_once(run: RunFacts) -> Optional[float]:
    """The most tasks running at once over the run, summed over the JVMs' buckets."""
    at: dict[int, float] = {}
    for executor_id, samples in run.active_tasks.items():
        if executor_id == "driver" and not run.local_mode:
            continue
        for t, v in samples:
            at[t] = at.get(t, 0.0) + v
    return max(at.values()) if at else None


def _clock(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%H:%M:%S")


def idle_lines(cap: Capacity, most: int = 10) -> list[str]:
    lines = [f"executor {e} ran no task {_clock(a)}-{_clock(b)} UTC ({(b - a) / 1000:.0f} s)"
             for e, a, b in sorted(cap.idle, key=lambda i: i[1] - i[2])[:most]]
    if len(cap.idle) > most:
        lines.append(f"... and {len(cap.idle) - most} more idle stretches")
    return lines


def capacity_advice(run: RunFacts, cap: Capacity) -> list[str]:
    """What to hold less of: dynamic allocation, fewer executors or cores, a
    smaller executor. Empty for a run that used what it held."""
    out = []
    conf = run.settings
    dynamic = str(conf.get("spark.dynamicAllocation.enabled", "")).lower() == "true"
    idle = cap.idle_share
    if idle is not None and idle >= IDLE_ADVICE_SHARE and not run.local_mode:
        held = f"{idle:.0%} of the {cap.slot_seconds:,.0f} slot-seconds held ran no task"
        if cap.idle and not dynamic:
            out.append(f"{held}, with executors idle for a minute or more: enable dynamic allocation "
                       "(spark.dynamicAllocation.enabled=true with spark.dynamicAllocation.shuffleTracking."
                       "enabled=true, or an external shuffle service) so idle executors are released after "
                       f"spark.dynamicAllocation.executorIdleTimeout ({DEFAULT_IDLE_TIMEOUT} by default)")
        elif cap.idle:
            timeout = conf.get("spark.dynamicAllocation.executorIdleTimeout") or DEFAULT_IDLE_TIMEOUT
            out.append(f"{held}, with executors idle for a minute or more under dynamic allocation: lower "
                       f"spark.dynamicAllocation.executorIdleTimeout (had {timeout}) and "
                       "spark.dynamicAllocation.minExecutors so idle executors go sooner")
        elif not dynamic:
            out.append(f"{held} (no executor sat idle as long as {IDLE_STRETCH_S} s: idle between tasks and "
                       "stages): enable dynamic allocation (spark.dynamicAllocation.enabled=true with "
                       "spark.dynamicAllocation.shuffleTracking.enabled=true) so executors come and go with "
                       "the work, or hold fewer executors or cores")
        most = most_tasks_at_once(run)
        slots = sum(e.cores or 0 for e in run.workers().values())
        if most is not None and slots and most < slots:
            out.append(f"at most {most:.0f} tasks ran at once against {slots} slots held: fewer executors "
                       "(spark.executor.instances) or cores (spark.executor.cores) would have run the same "
                       "tasks side by side")
    if cap.memory_gb_seconds and cap.heap_gb_seconds is not None and \
            cap.heap_gb_seconds < MEMORY_USED_BELOW * cap.memory_gb_seconds:
        out.append(f"executors asked for {cap.memory_gb_seconds / 3600:.2f} GB-hours and their heaps peaked at "
                   f"{cap.heap_gb_seconds / cap.memory_gb_seconds:.0%} of that: a smaller executor "
                   "(spark.executor.memory, as advised above) holds less for the same work")
    return out


def money(value: Optional[float], currency: str) -> str:
    return "n/a" if value is None else f"{value:,.4f} {currency}".strip()


def summary_line(cap: Capacity) -> str:
    """One line: held, used, idle, cost or core-hours."""
    used = "n/a" if cap.task_seconds is None else f"{cap.task_seconds:,.0f}"
    idle = "n/a" if cap.idle_share is None else f"{cap.idle_share:.0%}"
    held = f"{cap.core_hours:.3f} core-hours"
    if cap.gb_hours is not None:
        held += f", {cap.gb_hours:.3f} GB-hours"
    paid = f", cost {money(cap.cost, cap.currency)}" if cap.cost is not None else ""
    return (f"capacity: {cap.slot_seconds:,.0f} slot-seconds held by {cap.executors} executors, "
            f"{used} task-seconds used, {idle} idle ({held}{paid})")


def capacity_document(run: RunFacts, cap: Capacity) -> dict[str, Any]:
    """report --json's capacity member (seconds, GiB-seconds, shares as fractions)."""
    return {
        "slot_seconds": cap.slot_seconds, "task_seconds": cap.task_seconds, "idle_share": cap.idle_share,
        "task_seconds_source": "Spark's runTime.count + deserializeTime.count, per executor",
        "executors": cap.executors, "core_hours": cap.core_hours,
        "memory": {"per_executor_bytes": cap.memory_per_executor, "held_gb_seconds": cap.memory_gb_seconds,
                   "heap_peak_gb_seconds": cap.heap_gb_seconds, "rss_peak_gb_seconds": cap.rss_gb_seconds,
                   "gb_hours": cap.gb_hours},
        "cost": None if cap.cost is None else {"amount": cap.cost, "currency": cap.currency},
        "idle_stretches": [{"executor": e, "from_ms": a, "to_ms": b, "seconds": (b - a) / 1000}
                           for e, a, b in cap.idle],
        "stages": [{"stage": s.stage, "name": s.name, "started_ms": s.started_ms, "ended_ms": s.ended_ms,
                    "slot_seconds": s.slot_seconds, "task_seconds_estimated": s.task_seconds,
                    "memory_gb_seconds": s.memory_gb_seconds, "cost": s.cost} for s in cap.stages],
        "advice": capacity_advice(run, cap),
        "connect": connect_document(connect_users(run, cap)),
    }


def connect_users(run: RunFacts, cap: Capacity) -> Optional[ConnectAttribution]:
    """Who used the capacity of a Spark Connect server's run; None for any other run."""
    return connect_attribution(run.jobs, cap)


def connect_line(who: Optional[ConnectAttribution], most: int = 5) -> str:
    """One line for the terminal: the Connect users with the most task time and their shares."""
    if who is None:
        return ""
    shown = [f"{a.user or '(none)'} {a.share:.0%}" if a.share is not None else f"{a.user or '(none)'} n/a"
             for a in who.users[:most]]
    more = f" and {len(who.users) - most} more" if len(who.users) > most else ""
    return (f"Spark Connect: {len(who.users)} users, {len(who.sessions)} sessions, {who.operations_total} "
            f"operations; share of task time (and of what was held): {', '.join(shown)}{more}")


def _attributed_document(a: Attributed) -> dict[str, Any]:
    return {"user": a.user, "session": a.session or None, "operation": a.operation or None, "jobs": a.jobs,
            "task_seconds": a.task_seconds, "task_share": a.share, "slot_seconds": a.slot_seconds,
            "core_hours": a.core_hours, "memory_gb_seconds": a.memory_gb_seconds, "cost": a.cost,
            "first_ms": a.first_ms, "last_ms": a.last_ms,
            **({"description": a.description} if a.operation else {})}


def connect_document(who: Optional[ConnectAttribution]) -> Optional[dict[str, Any]]:
    """report --json's capacity.connect member: null for a run that is not a Connect server's."""
    if who is None:
        return None
    return {
        "task_seconds": who.task_seconds,
        "split": "task_seconds summed over each one's jobs' tasks (launch to finish); slot_seconds, "
                 "memory_gb_seconds and cost: the run's held capacity times task_share",
        "users": [_attributed_document(a) for a in who.users],
        "sessions": [_attributed_document(a) for a in who.sessions],
        "operations": [_attributed_document(a) for a in who.operations],
        "operations_total": who.operations_total,
        "not_connect": None if who.other is None else _attributed_document(who.other),
    }
