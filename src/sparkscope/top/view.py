"""What `sparkscope top` draws: a pure function of what was read (data.py),
the screen's state (sort, scroll, mode) and the terminal's size, so that a
test renders it at 80x24 or 200x50 without a terminal.

Everything read from InfluxDB goes on screen as rich Text (never parsed as
markup), with control characters taken out: a run name or an executor id
cannot move the cursor or restyle the screen."""

from __future__ import annotations

import io
import re
import textwrap
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from sparkscope.dashboards.queries import WHOLE_DISKS
from sparkscope.text import clean  # noqa: F401 (top's names for it)
from sparkscope.store.figures import idle_share
from sparkscope.top.data import HISTORY_POINTS, DiskNow, DisksSnapshot, ExecutorNow, Histogram, Run, Snapshot, ordered

NEAR_LIMIT = 0.9  # heap or RSS at this share of its limit is flagged
SPARK = "▁▂▃▄▅▆▇█"
_WHOLE_DISK = re.compile(f"^{WHOLE_DISKS}$")


@dataclass
class Screen:
    """What the screen shows besides the data: the keys change it (command.py)."""
    mode: str = "run"  # run | disks | pick
    sort: str = "h"  # a key of SORTABLE
    descending: bool = True
    offset: int = 0  # first row shown, for scrolling
    picked: int = 0  # the highlighted run in the picker
    snapshot: Optional[Snapshot] = None
    disks: Optional[DisksSnapshot] = None
    runs: list[Run] = field(default_factory=list)
    error: Optional[str] = None  # InfluxDB's error of the last refresh: a banner, data kept
    notice: Optional[str] = None  # no run yet, and the like
    updated_ms: int = 0  # the last refresh that worked
    interval_s: float = 5.0
    back: str = "run"  # the mode the picker returns to
    chosen: Optional[Run] = None  # picked in the picker, not opened yet
    live: bool = True  # refreshed until quit (False: one screen, --once)
    messages: list[str] = field(default_factory=list)  # a caller's progress lines (the demo's), newest last
    message_rows: int = 2  # how many of them the banner shows


# --- numbers ---------------------------------------------------------------------------

def size(value: Optional[float]) -> str:
    """Bytes in at most 5 characters: 980K, 412M, 1.5G."""
    if value is None:
        return "-"
    for unit, scale in (("T", 2**40), ("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if value >= scale:
            n = value / scale
            return f"{n:.1f}{unit}" if n < 10 else f"{n:.0f}{unit}"
    return f"{value:.0f}B"


def rate(value: Optional[float]) -> str:
    return "-" if value is None else size(value) if value >= 1 else "0"


def share(value: Optional[float]) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def count(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.0f}"


def duration(ms: Optional[float]) -> str:
    if ms is None or ms < 0:
        return "-"
    s = int(ms // 1000)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def seconds(ms: Optional[float]) -> str:
    """A task's time: 850ms, 7.2s, 1m05s."""
    if ms is None:
        return "-"
    return f"{ms:.0f}ms" if ms < 1000 else f"{ms / 1000:.1f}s" if ms < 60_000 else duration(ms)


def clock(ms: Optional[int]) -> str:
    return "-" if not ms else time.strftime("%H:%M:%S", time.localtime(ms / 1000))


def bar(used: Optional[float], limit: Optional[float], width: int) -> Text:
    if used is None or not limit:
        return Text(" " * width)
    part = max(0.0, min(1.0, used / limit))
    filled = round(part * width)
    style = "red" if part >= NEAR_LIMIT else "yellow" if part >= 0.7 else "green"
    return Text("█" * filled, style=style) + Text("░" * (width - filled), style="dim")


def sparkline(values: list[float], top: Optional[float]) -> str:
    if not values:
        return ""
    high = top or max(values) or 1
    return "".join(SPARK[min(len(SPARK) - 1, max(0, int(v / high * len(SPARK))))] for v in values)


# --- the run view -----------------------------------------------------------------------

@dataclass(frozen=True)
class Column:
    key: str  # its sort key on the keyboard ("" = not sortable)
    title: str
    width: int
    cell: Callable[[ExecutorNow], Text]


def _right(text: str) -> Text:
    return Text(text, justify="right")


def _tasks(e: ExecutorNow) -> Text:
    if e.active_tasks is None:
        return _right("-")
    return _right(f"{e.active_tasks:.0f}/{e.cores}" if e.cores else f"{e.active_tasks:.0f}")


def _heap(e: ExecutorNow) -> Text:
    return bar(e.heap_used, e.heap_max, 8) + Text(f" {size(e.heap_used):>4}/{size(e.heap_max):<4}")


def _held(e: ExecutorNow) -> Optional[float]:
    """What counts against the container's limit: the working set where it was
    measured, else the process tree's RSS."""
    return e.working_set if e.working_set is not None else e.rss


def _near_limit(e: ExecutorNow) -> bool:
    held = _held(e)
    return bool(e.limit and held and held >= NEAR_LIMIT * e.limit)


def _rss(e: ExecutorNow) -> Text:
    return Text(size(e.rss), style="red" if _near_limit(e) and e.working_set is None else "", justify="right")


EXECUTOR = Column("e", "executor", 9, lambda e: Text(clean(e.executor_id), overflow="ellipsis", no_wrap=True))
TASKS = Column("t", "tasks", 5, _tasks)
HEAP = Column("h", "heap used/max", 18, _heap)
RSS = Column("m", "RSS", 5, _rss)
RSS_SPLIT = (Column("", "JVM", 5, lambda e: _right(size(e.rss_jvm))),
             Column("", "Python", 6, lambda e: _right(size(e.rss_python))),
             Column("", "other", 5, lambda e: _right(size(e.rss_other))))
UNIFIED = (Column("", "exec", 5, lambda e: _right(size(e.execution))),
           Column("", "store", 5, lambda e: _right(size(e.storage))))
GC = Column("g", "GC", 4, lambda e: _right(share(e.gc_share)))
SHUFFLE = (Column("r", "shufR/s", 7, lambda e: _right(rate(e.shuffle_read))),
           Column("w", "shufW/s", 7, lambda e: _right(rate(e.shuffle_write))))
LIMIT = Column("", "limit", 5, lambda e: _right(size(e.limit)))
WORKING_SET = Column("", "wset", 5, lambda e: Text(size(e.working_set), style="red" if _near_limit(e) else "",
                                                   justify="right"))
SORTABLE = {c.key: c for c in (EXECUTOR, TASKS, HEAP, RSS, GC, *SHUFFLE)}
SORT_KEYS = "thmgrwe"  # the footer's order


def columns_for(width: int, snapshot: Snapshot) -> list[Column]:
    """The columns that fit: at 80 the essentials, wider RSS split by process,
    the container limit where one is known, and the heap history."""
    def total(cols: list[Column]) -> int:
        return sum(c.width + 1 for c in cols)

    cols = [EXECUTOR, TASKS, HEAP, RSS, *UNIFIED, GC, *SHUFFLE]
    wide = [EXECUTOR, TASKS, HEAP, RSS, *RSS_SPLIT, *UNIFIED, GC, *SHUFFLE]
    if total(wide) <= width:
        cols = wide
    if any(e.working_set is not None for e in snapshot.executors) and total(cols + [WORKING_SET, LIMIT]) <= width:
        cols += [WORKING_SET, LIMIT]
    elif any(e.limit for e in snapshot.executors) and total(cols + [LIMIT]) <= width:
        cols.append(LIMIT)
    history = width - total(cols) - 1
    if history >= 8:
        cols.append(Column("", "heap history", min(history, HISTORY_POINTS),
                           lambda e: Text(sparkline(e.heap_history, e.heap_max), style="cyan")))
    return cols


def flags(snapshot: Snapshot) -> list[Text]:
    """What needs a look: straggler stages, executors removed, memory near a limit."""
    out = []
    for stage in snapshot.stragglers:
        r = stage.row
        out.append(Text("STRAGGLER ", style="bold magenta") + Text(clean(
            f"stage {stage.key} {r.get('name') or ''}: slowest task {seconds(r.get('task_max_ms'))} vs median "
            f"{seconds(r.get('task_p50_ms'))}, on executor {r.get('slowest_executor')}")))
    for row in snapshot.removed:
        if snapshot.run.ended_ms and row["time"] >= snapshot.run.ended_ms:
            continue  # stopped with the application
        reason = str(row.get("reason") or "no reason given")
        # Dynamic allocation gives idle executors back ("Executor killed by driver."): not a loss.
        released = "killed by driver" in reason.lower() or "decommission" in reason.lower()
        out.append(Text("RELEASED " if released else "LOST ", style="bold" if released else "bold red") + Text(
            clean(f"executor {row.get('executor_id')} at {clock(row['time'])}: {reason}")))
    for e in snapshot.executors:
        if e.heap_used and e.heap_max and e.heap_used >= NEAR_LIMIT * e.heap_max:
            out.append(Text("MEMORY ", style="bold red") + Text(clean(
                f"executor {e.executor_id}: heap {size(e.heap_used)} of {size(e.heap_max)} "
                f"({share(e.heap_used / e.heap_max)})")))
        if _near_limit(e):
            what = "working set" if e.working_set is not None else "RSS"
            out.append(Text("MEMORY ", style="bold red") + Text(clean(
                f"executor {e.executor_id}: {what} {size(_held(e))} of a {size(e.limit)} container "
                f"({share(_held(e) / e.limit)})")))
    return out


def _line(width: int, *parts: Text) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    for part in parts:
        text.append_text(part)
    text.truncate(width, overflow="ellipsis")
    return text


def run_header(snapshot: Snapshot, width: int) -> list[Text]:
    run = snapshot.run
    if run.running:
        state = Text(f"running {duration(snapshot.at_ms - run.started_ms)}", style="bold green")
    elif run.ending == "NO_END_SEEN":
        state = Text(f"no end seen: driver silent since {clock(run.ended_ms)}, "
                     f"{duration((run.ended_ms or 0) - run.started_ms)} after its start", style="bold red")
    else:
        state = Text(f"ended {clock(run.ended_ms)} after {duration((run.ended_ms or 0) - run.started_ms)}",
                     style="bold")
    alive = len(snapshot.executors)
    tasks = sum(e.active_tasks or 0 for e in snapshot.executors)
    slots = snapshot.task_slots
    idle = idle_share(tasks, slots or 0) or 0.0  # store/figures.py: the report's idle share, at this moment
    newest = max((e.last_ms for e in snapshot.executors), default=0)
    lines = [
        _line(width, Text(clean(run.app_id), style="bold cyan"), Text("  "), Text(clean(run.name), style="bold"),
              Text("  "), state),
        _line(width, Text(f"executors {alive}  tasks {tasks:.0f}" + (f" of {slots} slots held busy ({idle:.0%} idle "
                                                                     "now)" if slots else "")),
              _last_report(snapshot, newest)),
    ]
    for kind in ("query", "job", "stage"):
        now = snapshot.running.get(kind) or []
        if now:
            more = f"  (+{len(now) - 1} more)" if len(now) > 1 else ""
            lines.append(_line(width, Text(f"{kind:<6}", style="bold"), Text(clean(now[0].text)), Text(more)))
        elif snapshot.last.get(kind):
            last = snapshot.last[kind]
            lines.append(_line(width, Text(f"{kind:<6}", style="bold"), Text("last: ", style="dim"),
                               Text(clean(last.text), style="dim")))
    return lines


def _last_report(snapshot: Snapshot, newest_ms: int) -> Text:
    if not newest_ms:
        return Text("  no report in the last interval", style="bold red" if snapshot.run.running else "dim")
    silent_ms = snapshot.at_ms - newest_ms
    if snapshot.run.running and silent_ms > 3 * snapshot.interval_s * 1000:
        # A driver killed outright never writes its end: its run looks running, with no report.
        return Text(f"  no report for {duration(silent_ms)}", style="bold red")
    return Text(f"  last report {clock(newest_ms)}", style="dim")


def run_view(screen: Screen, width: int, height: int) -> list[RenderableType]:
    snapshot = screen.snapshot
    header = run_header(snapshot, width)
    flagged = [_line(width, flag) for flag in flags(snapshot)]
    room_for_flags = max(1, height // 6)
    shown_flags = flagged[:room_for_flags]
    if len(flagged) > room_for_flags:
        shown_flags[-1] = Text(f"... {len(flagged) - room_for_flags + 1} more flags", style="dim")
    used = len(header) + len(shown_flags) + 2 + len(banner(screen, width)) + 1  # + table header, footer
    capacity = max(1, height - used)
    rows = ordered(snapshot.executors, screen.sort, screen.descending)
    screen.offset = max(0, min(screen.offset, len(rows) - capacity))
    visible = rows[screen.offset:screen.offset + capacity]
    cols = columns_for(width, snapshot)
    table = Table(box=None, padding=(0, 1, 0, 0), show_edge=False, pad_edge=False, expand=False,
                  header_style="bold reverse")
    for c in cols:
        marker = ("▼" if screen.descending else "▲") if c.key and c.key == screen.sort else ""
        table.add_column(Text(c.title + marker), width=c.width, no_wrap=True, overflow="ellipsis",
                         justify="left" if c in (EXECUTOR, HEAP) or c.title == "heap history" else "right")
    for e in visible:
        table.add_row(*(c.cell(e) for c in cols))
    scroll = (f"executors {screen.offset + 1}-{screen.offset + len(visible)} of {len(rows)}  "
              if len(rows) > len(visible) else "")
    out: list[RenderableType] = [*header, table]
    if not rows:
        out.append(Text("no executor reported in the last interval", style="dim"))
    out += shown_flags
    sorts = " ".join(f"{k} {SORTABLE[k].title.split()[0]}" for k in SORT_KEYS) if width >= 120 else \
        " ".join(SORT_KEYS)
    out.append(footer(width, f"{scroll}q quit  d disks  p runs  sort: {sorts}  ↑↓ scroll"))
    return out


def footer(width: int, text: str) -> Text:
    return _line(width, Text(text, style="dim"))


# --- the run picker -----------------------------------------------------------------------

def pick_view(screen: Screen, width: int, height: int) -> list[RenderableType]:
    out: list[RenderableType] = [Text("Pick a run (newest first): ↑↓ move, Enter open, Esc back", style="bold")]
    capacity = max(1, height - 3 - len(banner(screen, width)))
    screen.picked = max(0, min(screen.picked, len(screen.runs) - 1))
    first = max(0, screen.picked - capacity + 1)
    for n, run in enumerate(screen.runs[first:first + capacity], first):
        state = ("running" if run.running else "no end seen" if run.ending == "NO_END_SEEN"
                 else f"ran {duration((run.ended_ms or 0) - run.started_ms)}")
        line = _line(width, Text(f"{clock(run.started_ms)}  {state:<12} "), Text(clean(run.app_id), style="cyan"),
                     Text("  "), Text(clean(run.name)))
        if n == screen.picked:
            line.stylize("reverse")
        out.append(line)
    if not screen.runs:
        out.append(Text("no run with the sparkscope annotator in InfluxDB yet", style="dim"))
    return out


# --- the disks view ------------------------------------------------------------------------

def histogram_lines(hist: Histogram, width: int) -> list[Text]:
    """The buckets as bpftrace prints a log2 histogram: [lower, upper) count |@@@@|,
    every bucket between the lowest and the highest one present."""
    if not hist.buckets:
        return []
    bounds = sorted(hist.buckets)
    highest = max(hist.buckets.values()) or 1
    bar_width = max(10, min(52, width - 32))
    lines = []
    upper = bounds[0]
    while upper <= bounds[-1]:
        n = hist.buckets.get(upper, 0)
        lower = upper // 2
        label = f"[{_unit(lower)}, {_unit(upper)})"
        ats = round(n / highest * bar_width)
        lines.append(Text(f"{label:<16}{n:>9} |{'@' * ats:<{bar_width}}|"))
        upper *= 2
    return lines


def _unit(us: int) -> str:
    for suffix, scale in (("M", 1 << 20), ("K", 1 << 10)):
        if us >= scale and us % scale == 0:
            return f"{us // scale}{suffix}"
    return str(us)


def shown_disks(disks: list[DiskNow]) -> list[DiskNow]:
    """Whole disks and any other device (partition, loop) that did I/O; busiest first."""
    keep = [d for d in disks if _WHOLE_DISK.match(d.device) or d.reads + d.writes > 0]
    return sorted(keep, key=lambda d: (-d.busy, -(d.reads + d.writes), d.device))


def disks_view(screen: Screen, width: int, height: int) -> list[RenderableType]:
    snap = screen.disks
    hosts = {d.host for d in snap.disks} | {h.host for h in snap.histograms}
    ended = snap.run is not None and not snap.run.running
    title = ("Disks at the run's end, " if ended else "Disks now, ") + clock(snap.at_ms)
    body: list[Text] = [Text(f"{'device':<14}{'r/s':>8}{'w/s':>8}{'read/s':>8}{'write/s':>8}{'busy':>6}{'await':>9}",
                             style="bold reverse")]
    for d in shown_disks(snap.disks):
        name = clean(d.device if len(hosts) < 2 else f"{d.host}:{d.device}")
        await_ms = "-" if d.await_ms is None else f"{d.await_ms:.1f}ms"
        body.append(Text(f"{name[:13]:<14}{d.reads:>8.0f}{d.writes:>8.0f}{rate(d.read_bytes):>8}"
                         f"{rate(d.write_bytes):>8}{share(d.busy):>6}{await_ms:>9}"))
    if not snap.disks:
        body.append(Text("no disk counters (Telegraf's diskio) in this window", style="dim"))
    body.append(Text(""))
    if snap.histograms:
        for hist in snap.histograms:
            n = sum(hist.buckets.values())
            where = clean(hist.device if len(hosts) < 2 else f"{hist.host}:{hist.device}")
            body.append(Text(f"{where} {clean(hist.direction)}: {n} I/Os, latency in µs over the "
                             f"{snap.period_s:.0f} s period ending {clock(hist.at_ms)}", style="bold"))
            body += histogram_lines(hist, width)
        body.append(Text(f"Outliers of that period ({len(snap.outliers)}), slowest first:" if snap.outliers else
                         "No outlier in that period (I/Os at or above the probe's threshold)", style="bold"))
        for o in snap.outliers:
            body.append(Text(clean(f"  {o.get('device')} {o.get('direction')} {o.get('latency_ms') or 0:.1f} ms "
                                   f"{size(o.get('bytes'))} pid {o.get('pid')} {o.get('comm') or ''}")))
    else:
        body.append(Text("No block I/O latency from the probe in this window: ./sparkscope up starts it as root "
                         "(BLOCKPROBE_ENABLED)", style="dim"))
    capacity = max(1, height - 3 - len(banner(screen, width)))
    screen.offset = max(0, min(screen.offset, len(body) - capacity))
    visible = body[:1] + body[1 + screen.offset:screen.offset + capacity]
    for line in visible:
        line.no_wrap, line.overflow = True, "ellipsis"
    heading = _line(width, Text(title, style="bold"), *((Text("  "), Text(clean(snap.run.app_id), style="cyan"),
                                                        Text("  "), Text(clean(snap.run.name))) if snap.run else ()))
    return [heading, *visible,
            footer(width, "q quit  d executors  p runs  ↑↓ scroll")]


# --- the frame -----------------------------------------------------------------------------

def banner(screen: Screen, width: int) -> list[Text]:
    """The last refresh's error, on at most two lines, over the data it left on
    screen; then the newest of a caller's progress lines."""
    progress = [Text(clean(m.strip()).ljust(width), style="bold", no_wrap=True, overflow="ellipsis")
                for m in [m for m in screen.messages if m.strip()][-screen.message_rows:]]
    if not screen.error:
        return progress
    since = f" (showing data of {clock(screen.updated_ms)})" if screen.updated_ms else ""
    said = (f"retrying every {screen.interval_s:g} s{since}: " if screen.live else "") + clean(screen.error)
    return [Text(line.ljust(width), style="bold white on red", no_wrap=True)
            for line in textwrap.wrap(said, width, max_lines=2, placeholder="…")] + progress


def frame(screen: Screen, width: int, height: int) -> RenderableType:
    """The whole screen for a terminal of width x height."""
    parts: list[RenderableType] = banner(screen, width)
    if screen.mode == "pick":
        parts += pick_view(screen, width, height)
    elif screen.mode == "disks" and screen.disks is not None:
        parts += disks_view(screen, width, height)
    elif screen.snapshot is not None:
        parts += run_view(screen, width, height)
    else:
        parts.append(Text(clean(screen.notice or "reading InfluxDB ..."), style="bold"))
        parts.append(footer(width, "q quit  p runs"))
    return Group(*parts)


def as_text(screen: Screen, width: int = 80, height: int = 24) -> str:
    """The frame as plain text, as a terminal of that size shows it (tests, --once)."""
    console = Console(file=io.StringIO(), width=width, height=height, color_system=None, force_terminal=False,
                      legacy_windows=False, soft_wrap=False)
    console.print(frame(screen, width, height), crop=True)
    return console.file.getvalue()
