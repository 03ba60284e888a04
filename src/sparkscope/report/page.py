"""The report as one HTML file that opens offline: plotly.js is inlined once,
every figure and table is in the page."""

from __future__ import annotations

import html
from datetime import datetime, timezone
from typing import Any, Optional

import plotly.graph_objects as go
import plotly.io as pio

from sparkscope.compare.command import figure_text
from sparkscope.compare.comparison import Comparison
from sparkscope.report.advice import Advice, human, streaming_lines
from sparkscope.report.capacity import capacity_advice, connect_users, idle_lines, money, summary_line
from sparkscope.store.figures import Attributed, Capacity, ConnectAttribution, executor_spans
from sparkscope.report.run_facts import MIB, RunFacts
from sparkscope.store.schema import (
    JVM_HEAP_MEMORY, ON_HEAP_EXECUTION_MEMORY, ON_HEAP_STORAGE_MEMORY, ON_HEAP_UNIFIED_MEMORY,
    PROCESS_TREE_JVM_RSS_MEMORY, PROCESS_TREE_OTHER_RSS_MEMORY, PROCESS_TREE_PYTHON_RSS_MEMORY, TOTAL_GC_TIME,
)

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
.verdict { padding: .8em 1em; border-radius: 6px; font-size: 1.1em; }
.SHORT { background: #fde2e1; } .GENEROUS { background: #e1f0fd; } .RIGHT { background: #e3f6e3; }
.UNKNOWN { background: #eee; }
table { border-collapse: collapse; margin: .5em 0; } td, th { padding: .25em .7em; border-bottom: 1px solid #ddd;
text-align: left; vertical-align: top; } pre { background: #f6f6f6; padding: .8em; overflow-x: auto; }
.note { color: #555; }
"""


def _t(ms: float) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


REGIONS_DRAWN = 300
QUERY_LABELS = 30


def _region(start_ms: float, end_ms: float, color: str, opacity: float) -> dict:
    return {"type": "rect", "xref": "x", "yref": "paper", "x0": _t(start_ms), "x1": _t(end_ms), "y0": 0, "y1": 1,
            "fillcolor": color, "opacity": opacity, "line": {"width": 0}, "layer": "below"}


# The query labels' rows along the plot's top edge, and how wide a label is
# taken to be: plotly's default 10 px font is about 6 px a character, and the
# plot area of the page's 460 px-high figure is about 900 px wide at the
# narrowest window the page is laid out for.
LABEL_ROWS = 4
LABEL_ROW_HEIGHT = 0.05  # of the plot's height
LABEL_CHAR_PX = 6
PLOT_PX = 900


def _query_labels(queries: list[dict], started_ms: float, ended_ms: Optional[float]) -> list[dict]:
    """A label per query at its start, each in the highest row where it clears
    the one before it; a query whose label fits in no row keeps its region
    unlabelled rather than print over another (short queries back to back)."""
    starts = [q["time"] for q in queries]
    first = min([started_ms, *starts])
    last = max([ended_ms or 0, *starts, *(q["end_time_ms"] for q in queries)])
    ms_per_px = max(last - first, 1) / PLOT_PX
    free_from = [float("-inf")] * LABEL_ROWS  # per row: where its last label ends
    labels = []
    for q in sorted(queries, key=lambda q: q["time"]):
        text = f"query {q.get('execution_id', '')}"
        row = next((r for r in range(LABEL_ROWS) if free_from[r] <= q["time"]), None)
        if row is None:
            continue
        free_from[row] = q["time"] + (len(text) * LABEL_CHAR_PX + LABEL_CHAR_PX) * ms_per_px
        labels.append({"x": _t(q["time"]), "y": 1 - row * LABEL_ROW_HEIGHT, "xref": "x", "yref": "paper",
                       "showarrow": False, "xanchor": "left", "yanchor": "top", "text": text,
                       "font": {"size": 10}})
    return labels


def memory_over_time(run: RunFacts, settings_heap: Optional[float]) -> go.Figure:
    fig = go.Figure()
    for executor_id, e in sorted(run.executors.items()):
        for name, points in sorted(e.series.items()):
            if points:
                fig.add_trace(go.Scatter(x=[_t(t) for t, _ in points], y=[v / MIB for _, v in points],
                                         mode="lines", name=f"{executor_id} {name}"))
    # Regions go in as one list: plotly's add_vrect re-checks every shape it
    # already has, so a TPC-DS run (118 queries, 1,500 stages) took minutes.
    # Past REGIONS_DRAWN of a kind the regions would only paint the plot over.
    stages = [s for s in run.stages if s.get("end_time_ms")]
    queries = [q for q in run.queries if q.get("end_time_ms")]
    shapes = []
    if len(stages) <= REGIONS_DRAWN:
        shapes += [_region(s["time"], s["end_time_ms"], "#8888ff", 0.08) for s in stages]
    if len(queries) <= REGIONS_DRAWN:
        shapes += [_region(q["time"], q["end_time_ms"], "#44aa44", 0.06) for q in queries]
    labels = _query_labels(queries, run.started_ms, run.ended_ms) if len(queries) <= QUERY_LABELS else []
    fig.update_layout(shapes=shapes, annotations=labels)
    if settings_heap:
        fig.add_hline(y=settings_heap / MIB, line_dash="dash", annotation_text="heap configured")
    fig.update_layout(title="Heap, unified pool and RSS per executor (Graphite samples; blue: stages, "
                      f"green: SQL queries, when at most {REGIONS_DRAWN})", yaxis_title="MiB", height=460)
    return fig


def peaks_per_stage(run: RunFacts) -> go.Figure:
    stages = sorted(run.stage_peaks, key=lambda s: (s.get("stage_id", 0), s.get("attempt", 0)))
    labels = [f"{s.get('stage_id')}.{s.get('attempt')} {str(s.get('name', ''))[:30]}" for s in stages]
    fig = go.Figure()
    for field, name in ((ON_HEAP_EXECUTION_MEMORY, "execution"), (ON_HEAP_STORAGE_MEMORY, "storage"),
                        (JVM_HEAP_MEMORY, "heap"), (PROCESS_TREE_JVM_RSS_MEMORY, "JVM RSS"),
                        (PROCESS_TREE_PYTHON_RSS_MEMORY, "Python RSS")):
        values = [(s.get(field) or 0) / MIB for s in stages]
        if any(values):
            fig.add_trace(go.Bar(x=labels, y=values, name=name))
    fig.update_layout(title="Exact peaks per stage (highest executor)", yaxis_title="MiB", barmode="group",
                      height=420)
    return fig


def task_time(run: RunFacts) -> go.Figure:
    """Executor-core seconds: CPU, GC, shuffle wait, (de)serialization, other
    time in tasks, and idle slots (allocated but running no task)."""
    ids, parts = [], {k: [] for k in ("CPU", "GC", "shuffle fetch wait", "serialization", "other in task",
                                     "idle slots")}
    duration_s = (run.duration_ms or 0) / 1000
    # Slots held as the Capacity section counts them (store/figures.py): from each executor's addition to its
    # removal or the run's end; the whole run for an executor without an added event.
    held = {s.executor_id: s.cores * s.seconds
            for s in executor_spans(run.executor_events, run.ended_ms or run.started_ms, run.local_mode)}
    for executor_id, e in sorted(run.workers().items()):
        t = e.totals
        run_s = t.get("run_ms", 0) / 1000
        cpu = t.get("cpu_ns", 0) / 1e9
        gc = t.get("gc_ms", 0) / 1000
        fetch = t.get("fetch_wait_ms", 0) / 1000
        serial = (t.get("deserialize_ms", 0) + t.get("serialize_ms", 0)) / 1000
        ids.append(executor_id)
        parts["CPU"].append(cpu)
        parts["GC"].append(gc)
        parts["shuffle fetch wait"].append(fetch)
        parts["serialization"].append(serial)
        parts["other in task"].append(max(0.0, run_s - cpu - gc - fetch))
        slots = held.get(executor_id, (e.cores or 1) * duration_s)
        parts["idle slots"].append(max(0.0, slots - run_s - serial))
    fig = go.Figure([go.Bar(x=ids, y=v, name=k) for k, v in parts.items()])
    fig.update_layout(title="Where executor-core time went (seconds)", barmode="stack", xaxis_title="executor",
                      height=380)
    return fig


def stragglers(run: RunFacts) -> go.Figure:
    rows = sorted((s for s in run.stages if s.get("skew_ratio")), key=lambda s: -s["skew_ratio"])[:15]
    fig = go.Figure(go.Bar(x=[f"{s.get('stage_id')}.{s.get('attempt')}" for s in rows],
                           y=[s["skew_ratio"] for s in rows],
                           marker_color=["#d62728" if str(s.get("straggler")) == "true" else "#1f77b4" for s in rows],
                           text=[str(s.get("name", ""))[:30] for s in rows]))
    fig.update_layout(title="Skew per stage: slowest task / median (red: straggler)", xaxis_title="stage",
                      height=360)
    return fig


def comparison(runs: list[dict[str, Any]]) -> go.Figure:
    ids = [r["app_id"] for r in runs]
    fig = go.Figure([go.Bar(x=ids, y=[(r.get("duration_ms") or 0) / 1000 for r in runs], name="duration s"),
                     go.Bar(x=ids, y=[(r.get("peak_heap") or 0) / MIB for r in runs], name="peak heap MiB"),
                     go.Bar(x=ids, y=[(r.get("peak_execution") or 0) / MIB for r in runs], name="peak execution MiB")])
    fig.update_layout(title="This run beside earlier runs of the same application name", barmode="group",
                      height=360)
    return fig


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


STAGES_LISTED = 50  # the stages that held the most slot-seconds


def capacity_section(run: RunFacts, cap: Optional[Capacity]) -> str:
    """What the run held and used: slot-seconds, task-seconds, idle share,
    memory held against the peaks, money when priced; idle stretches; per stage."""
    if cap is None:
        return ""
    gib = lambda v: "n/a" if v is None else f"{v / 3600:.3f} GB-hours"  # noqa: E731
    rows = [["slot-seconds held (cores x seconds, from each executor's addition to its removal or the run's end)",
             f"{cap.slot_seconds:,.0f} ({cap.core_hours:.3f} core-hours, {cap.executors} executors)"],
            ["task-seconds used (Spark's runTime + deserializeTime, summed over tasks)",
             "n/a" if cap.task_seconds is None else f"{cap.task_seconds:,.0f}"],
            ["idle share (1 - used / held)", "n/a" if cap.idle_share is None else f"{cap.idle_share:.1%}"],
            ["memory held (spark.executor.memory + overhead per executor, over its life)",
             f"{gib(cap.memory_gb_seconds)} at {human(cap.memory_per_executor)} each"],
            ["memory used: peak heap / peak JVM RSS over each executor's life",
             f"{gib(cap.heap_gb_seconds)} / {gib(cap.rss_gb_seconds)}"]]
    if cap.cost is not None:
        rows.append(["cost at PRICE_PER_CORE_HOUR and PRICE_PER_GB_HOUR (.env)", money(cap.cost, cap.currency)])
    stages = sorted(cap.stages, key=lambda c: -c.slot_seconds)[:STAGES_LISTED]
    stage_rows = [[c.stage, c.name[:60], f"{(c.ended_ms - c.started_ms) / 1000:.1f} s", f"{c.slot_seconds:,.0f}",
                   "n/a" if c.task_seconds is None else f"{c.task_seconds:,.0f}",
                   "n/a" if c.task_seconds is None or not c.slot_seconds
                   else f"{max(0.0, 1 - c.task_seconds / c.slot_seconds):.0%}",
                   money(c.cost, cap.currency) if c.cost is not None else f"{c.slot_seconds / 3600:.3f} core-h"]
                  for c in stages]
    advice = "".join(f"<li>{html.escape(line)}</li>" for line in capacity_advice(run, cap))
    who = connect_section(connect_users(run, cap), cap)
    idle = "".join(f"<li>{html.escape(line)}</li>" for line in idle_lines(cap))
    return (f"<h2>Capacity</h2><p>{html.escape(summary_line(cap))}</p>"
            + _table(["what", "this run"], rows)
            + (f"<h3>What to hold less of</h3><ul class='capacity-advice'>{advice}</ul>" if advice else "")
            + who
            + (f"<h3>Idle stretches</h3><ul class='idle'>{idle}</ul>" if idle else "")
            + ("<h3>Per stage</h3><p class='note'>Slot-seconds held while the stage ran (stages that ran at "
               "once each count the whole); task-seconds estimated from the stage's task percentiles (the "
               "annotator keeps no per-stage sum).</p>"
               + _table(["stage", "name", "ran", "slot-seconds held", "task-seconds (est.)", "idle",
                         "cost" if cap.cost is not None else "core-hours"], stage_rows) if stage_rows else ""))


def _short_id(value: str) -> str:
    """A session's or operation's UUID by its first 8 characters, as Spark's UI shows them."""
    return value[:8] if len(value) > 8 else value


def _who_row(a: Attributed, cap: Capacity, first: list[str]) -> list[str]:
    return [*first, str(a.jobs), f"{a.task_seconds:,.1f}", "n/a" if a.share is None else f"{a.share:.1%}",
            "n/a" if a.slot_seconds is None else f"{a.slot_seconds:,.0f}",
            money(a.cost, cap.currency) if cap.cost is not None
            else ("n/a" if a.core_hours is None else f"{a.core_hours:.3f} core-h")]


def connect_section(who: Optional[ConnectAttribution], cap: Capacity) -> str:
    """Who used the run's capacity on a Spark Connect server: per user, per session, the top operations."""
    if who is None:
        return ""
    last = "cost" if cap.cost is not None else "core-hours"
    tail = ["jobs", "task-seconds", "share of task time", "slot-seconds (by share)", last]
    users = [_who_row(a, cap, [a.user or "(none)"]) for a in who.users]
    if who.other is not None:
        users.append(_who_row(who.other, cap, ["(not a Connect operation)"]))
    sessions = [_who_row(a, cap, [a.user or "(none)", a.session]) for a in who.sessions]
    operations = [_who_row(a, cap, [a.user or "(none)", _short_id(a.session), a.operation]) for a in who.operations]
    more = who.operations_total - len(who.operations)
    return ("<h3>Who used it: Spark Connect users, sessions and operations</h3>"
            "<p class='note'>Task-seconds: each one's jobs' tasks, from launch to finish, to the task. "
            "Slot-seconds, memory and cost held are the run's, split by share of task time: the server's "
            "executors serve every session at once, and their idle time is paid by who used them.</p>"
            + _table(["user", *tail], users)
            + _table(["user", "session", *tail], sessions)
            + _table(["user", "session", "operation", *tail], operations)
            + (f"<p class='note'>... and {more} more operations (report --json lists the top "
               f"{len(who.operations)} too)</p>" if more > 0 else ""))


ENDINGS = {"NO_END_SEEN": "no end seen (the driver stopped reporting)", "RUNNING": "still running",
           "FAILED": "failed", "CANCELLED": "cancelled"}


def compared_with_usual(usual: Optional[Comparison]) -> str:
    """The "compared with usual" section: what is worse and better than the job's baseline."""
    if usual is None:
        return "<p class='note'>Not compared: the job's earlier runs could not be read.</p>"
    notes = "".join(f"<p class='note'>{html.escape(n)}</p>" for n in usual.notes)
    if not usual.baseline:
        return notes
    head = (f"<p>Job {html.escape(usual.job)}, against {len(usual.baseline)} earlier run(s): "
            f"{html.escape(', '.join(r.app_id for r in usual.baseline))}.</p>")
    rows = [[title, f.kind, f.name + (f" [{f.ident}]" if f.ident and f.kind != "run" else ""), f.metric,
             figure_text(f.metric, f.value), figure_text(f.metric, f.baseline), figure_text(f.metric, f.limit)]
            for title, found in (("worse", usual.regressions), ("better", usual.improvements)) for f in found]
    table = (_table(["", "what", "name", "figure", "this run", "usually (median)", "limit"], rows) if rows
             else "<p>Nothing worse or better than usual.</p>")
    changed = [["new in this run", p.kind, f"{p.name} [{p.ident}]"] for p in usual.new]
    changed += [["in the baseline only", p.kind, f"{p.name} [{p.ident}]"] for p in usual.missing]
    return head + table + (_table(["", "what", "name"], changed) if changed else "") + notes


def render(run: RunFacts, advice: Advice, runs: list[dict[str, Any]], heap: Optional[float],
           cap: Optional[Capacity] = None, usual: Optional[Comparison] = None) -> str:
    figures = [memory_over_time(run, heap), peaks_per_stage(run), task_time(run), stragglers(run)]
    if len(runs) > 1:
        figures.append(comparison(runs))
    plots = [pio.to_html(f, full_html=False, include_plotlyjs=(i == 0), config={"displaylogo": False})
             for i, f in enumerate(figures)]
    recs = _table(["setting", "advice", "this run had", "why"],
                  [[r.key, r.value, r.had or "(Spark's default)", r.reason] for r in advice.recommendations])
    sizing = _table(["executor", "peak heap", "peak unified", "peak execution", "peak storage", "live set",
                     "direct", "JVM RSS", "Python RSS", "other RSS", "GC time"],
                    [[k, human(e.peaks.get(JVM_HEAP_MEMORY)), human(e.peaks.get(ON_HEAP_UNIFIED_MEMORY)),
                      human(e.peaks.get(ON_HEAP_EXECUTION_MEMORY)), human(e.peaks.get(ON_HEAP_STORAGE_MEMORY)),
                      human(e.live_set), human(e.peaks.get("DirectPoolMemory")),
                      human(e.peaks.get(PROCESS_TREE_JVM_RSS_MEMORY)), human(e.peaks.get(PROCESS_TREE_PYTHON_RSS_MEMORY)),
                      human(e.peaks.get(PROCESS_TREE_OTHER_RSS_MEMORY)), f"{(e.peaks.get(TOTAL_GC_TIME) or 0) / 1000:.1f} s"]
                     for k, e in sorted(run.executors.items()) if e.peaks])
    history = _table(["application", "finished", "duration", "peak heap", "peak execution", "GC share", "spilled"],
                     [[r["app_id"] + (" (this run)" if r["app_id"] == run.app_id else ""), r.get("finished", ""),
                       f"{(r.get('duration_ms') or 0) / 1000:.1f} s", human(r.get("peak_heap")),
                       human(r.get("peak_execution")),
                       f"{r['gc_share']:.1%}" if r.get("gc_share") is not None else "n/a", human(r.get("spilled"))]
                      for r in runs])
    notes = "".join(f"<p class='note'>{html.escape(n)}</p>" for n in advice.notes)
    containers = "".join(f"<li>{html.escape(line)}</li>" for line in advice.containers)
    containers = f"<h3>Containers</h3><ul class='containers'>{containers}</ul>" if containers else ""
    streams = "".join(f"<li>{html.escape(line)}</li>" for line in streaming_lines(run))
    containers += f"<h3>Streaming queries</h3><ul class='streaming'>{streams}</ul>" if streams else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>sparkscope report: {html.escape(run.app_name)}</title>
<style>{STYLE}</style></head><body>
<h1>How much memory did {html.escape(run.app_name)} need?</h1>
<p>{html.escape(run.app_id)}, {html.escape(run.settings.get('spark.master', 'master unknown'))},
{(run.duration_ms or 0) / 1000:.1f} s{"" if run.ending == "FINISHED" else ", " + html.escape(ENDINGS.get(run.ending, run.ending))}</p>
<p class="verdict {advice.verdict}">{html.escape(advice.summary)}</p>{containers}
<h2>Advice</h2>{recs}
<pre>{html.escape(" ".join(advice.conf_lines()))}</pre>{notes}
<h2>Compared with usual</h2>{compared_with_usual(usual)}
<h2>Exact peaks per executor</h2>{sizing}
<h2>Over time</h2>{plots[0]}
<h2>Which stage needed it</h2>{plots[1]}
<h2>Task time</h2>{plots[2]}
{capacity_section(run, cap)}
<h2>Straggler stages</h2>{plots[3]}
<h2>Earlier runs of {html.escape(run.app_name)}</h2>{history}{plots[4] if len(plots) > 4 else ""}
</body></html>
"""
