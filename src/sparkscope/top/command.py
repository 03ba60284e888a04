"""`sparkscope top [APP_ID]`: the loop. Reads the store every interval
(data.py, through the read layer: InfluxDB, or Thanos for the metrics),
draws the frame (view.py) full screen, and takes single keys from the
terminal in cbreak mode. A store lost or answering errors shows a banner
over the last data and is asked again next interval; nothing read from it
ends the program."""

from __future__ import annotations

import argparse
import os
import select
import shutil
import signal
import sys
import termios
import time
import tty
from contextlib import contextmanager
from typing import Callable, Iterator, Optional

from sparkscope.command_line import RUNTIME_ERROR, add_run_argument
from sparkscope.store.influx import InfluxError
from sparkscope.store.promql import PromError
from sparkscope.settings import load_settings
from sparkscope.stack import metrics_reads
from sparkscope.top.data import Run, TopReader
from sparkscope.top.view import SORTABLE, Screen, as_text, frame

DEFAULT_INTERVAL_S = 5.0  # Spark's Graphite sink period in spark-conf/metrics.properties
PAGE = 10
ESCAPES = {"\x1b[A": "up", "\x1bOA": "up", "\x1b[B": "down", "\x1bOB": "down", "\x1b[5~": "pgup",
           "\x1b[6~": "pgdn", "\x1b[H": "home", "\x1b[F": "end", "\r": "enter", "\n": "enter"}


def keys_of(data: str) -> list[str]:
    """Bytes typed since the last look, as keys: letters as they are, escape
    sequences by name (up, down, pgup, pgdn, home, end), Enter, Esc."""
    out, i = [], 0
    while i < len(data):
        seq = next((s for s in ESCAPES if data.startswith(s, i)), None)
        if seq:
            out.append(ESCAPES[seq])
            i += len(seq)
        elif data[i] == "\x1b" and data[i + 1:i + 2] in ("[", "O"):
            j = i + 2  # a sequence we do not use (F keys, mouse): skipped whole
            while j < len(data) and not (data[j].isalpha() or data[j] == "~"):
                j += 1
            i = j + 1
        else:
            out.append("esc" if data[i] == "\x1b" else data[i])
            i += 1
    return out


def press(screen: Screen, key: str) -> Optional[str]:
    """What a key does to the screen; returns "quit", "fetch" (the screen needs
    data it has not read yet) or "draw"."""
    if key in ("q", "Q"):
        return "quit"
    if screen.mode == "pick":
        moves = {"up": -1, "k": -1, "down": 1, "j": 1, "pgup": -PAGE, "pgdn": PAGE}
        if key in moves:
            screen.picked = max(0, min(len(screen.runs) - 1, screen.picked + moves[key]))
            return "draw"
        if key == "enter" and screen.runs:
            screen.chosen = screen.runs[screen.picked]
            screen.mode, screen.offset, screen.snapshot, screen.disks = "run", 0, None, None
            return "fetch"
        if key in ("esc", "p"):
            screen.mode = screen.back
            return "draw"
        return None
    moves = {"up": -1, "k": -1, "down": 1, "j": 1, "pgup": -PAGE, "pgdn": PAGE, "home": -10**9, "end": 10**9}
    if key in moves:
        screen.offset = max(0, screen.offset + moves[key])  # the view keeps it inside the rows
        return "fetch" if screen.mode == "run" else "draw"  # only the rows on screen have every column
    if key == "d":
        screen.mode, screen.offset = ("run" if screen.mode == "disks" else "disks"), 0
        return "fetch"
    if key == "p":
        screen.back, screen.mode = screen.mode, "pick"
        return "fetch"
    if key in SORTABLE and screen.mode == "run":
        if key == screen.sort:
            screen.descending = not screen.descending
        else:
            screen.sort, screen.descending = key, key != "e"  # executors by id, numbers highest first
        screen.offset = 0
        return "fetch"
    return None


class Top:
    """One session: which run is shown and the reads behind the screen."""

    def __init__(self, reader: TopReader, app_id: Optional[str], interval_s: float):
        self.reader = reader
        self.app_id = app_id
        self.follow = app_id is None  # no id given: show the newest run, and move on to a newer one
        self.run: Optional[Run] = None
        self.screen = Screen(interval_s=interval_s)
        self.waiting: Optional[str] = None  # what the screen says before the run it waits for exists

    def refresh(self, rows: int = 60) -> None:
        """Read what the screen shows; rows: the most executor rows it has room for."""
        screen = self.screen
        if screen.chosen:
            self.run, self.follow, screen.chosen = screen.chosen, False, None
        try:
            if screen.mode == "pick":
                screen.runs = self.reader.runs()
            else:
                if self.follow and (self.run is None or not self.run.running):
                    self.run = self.reader.default_run() or self.run
                elif self.run is None and self.app_id:
                    self.run = self.reader.run(self.app_id)
                if self.run is None:
                    screen.notice = self.waiting if self.waiting else (f"run {self.app_id} is not in InfluxDB (yet): check the id, or leave it out "
                                     "to watch the newest run" if self.app_id else
                                     "no Spark run with the sparkscope annotator in InfluxDB yet: start one with "
                                     "the flags of ./sparkscope conf; this screen picks it up")
                elif screen.mode == "disks":
                    self.run = self.reader.run(self.run.app_id) or self.run
                    screen.disks = self.reader.disks(self.run)
                else:
                    screen.snapshot = self.reader.snapshot(self.run, screen.sort, screen.descending,
                                                           screen.offset, rows)
                    self.run = screen.snapshot.run
            screen.error = None
            screen.updated_ms = int(time.time() * 1000)
        except (InfluxError, PromError) as err:
            screen.error = str(err)
        except Exception as err:  # a malformed point anyone could have written must not end the view
            screen.error = f"could not read what the store returned ({type(err).__name__}: {err})"


@contextmanager
def single_keys(fd: int) -> Iterator[None]:
    """The terminal in cbreak mode: keys arrive as typed, unechoed; restored on the way out."""
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def read_keys(fd: Optional[int], timeout_s: float) -> list[str]:
    if fd is None:
        time.sleep(max(0.0, timeout_s))
        return []
    ready, _, _ = select.select([fd], [], [], max(0.0, timeout_s))
    if not ready:
        return []
    data = os.read(fd, 1024)
    if not data:  # stdin closed
        return ["q"]
    return keys_of(data.decode(errors="replace"))


def watch(top: Top, interval_s: float, until: Callable[[], bool] = lambda: False) -> str:
    """The view, full screen, until q ("quit") or until() is true ("done")."""
    from rich.console import Console
    from rich.live import Live

    console = Console()
    fd = sys.stdin.fileno() if sys.stdin.isatty() else None
    keys = single_keys(fd) if fd is not None else _nothing()
    with keys, Live(console=console, screen=True, auto_refresh=False, redirect_stdout=False,
                    redirect_stderr=False) as live:
        due, drawn_size, dirty, shown_messages = 0.0, None, True, 0
        while not until():
            if time.monotonic() >= due:
                top.refresh(rows=console.size.height)
                due, dirty = time.monotonic() + interval_s, True
            size = tuple(console.size)
            if dirty or size != drawn_size:
                live.update(frame(top.screen, *size), refresh=True)
                drawn_size, dirty = size, False
            for key in read_keys(fd, min(0.25, due - time.monotonic())):
                action = press(top.screen, key)
                if action == "quit":
                    return "quit"
                if action == "fetch":
                    due = 0.0
                dirty = dirty or action is not None
            if len(top.screen.messages) != shown_messages:
                shown_messages, dirty = len(top.screen.messages), True
    return "done"


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def _interrupted(*_) -> None:
    raise KeyboardInterrupt


def cmd_top(args: argparse.Namespace) -> int:
    settings = load_settings()
    timeout_s = max(2.0, min(10.0, args.interval))
    reader = TopReader(settings.influx_reader, settings.database, args.interval, timeout_s=timeout_s,
                       store=metrics_reads(settings, timeout_s))
    top = Top(reader, args.app_id, args.interval)
    if args.disks:
        top.screen.mode = "disks"
    if args.once or not sys.stdout.isatty():
        width, height = shutil.get_terminal_size((100, 40))
        top.screen.live = False
        top.refresh(rows=height)
        print(as_text(top.screen, width, height), end="")
        return RUNTIME_ERROR if top.screen.error else 0
    # A kill (not Ctrl-C) also leaves through the context managers: the terminal is restored.
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        watch(top, args.interval)
        return 0
    except KeyboardInterrupt:
        return 0


def _interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0.5 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"{text!r}: seconds between 0.5 and 3600")
    return value


def register(sub) -> None:
    top = sub.add_parser("top", help="a live terminal view of one Spark run from the metrics store: executors, memory, "
                                     "GC, shuffle, what runs now, stragglers; d: disks")
    add_run_argument(top, "the newest run still running, else the newest")
    top.add_argument("--interval", type=_interval, default=DEFAULT_INTERVAL_S,
                     help="seconds between refreshes (default: %(default)g, Spark's sink period in "
                          "spark-conf/metrics.properties)")
    top.add_argument("--disks", action="store_true", help="start in the disks view (d switches)")
    top.add_argument("--once", action="store_true",
                     help="print one screen as text and exit (also what happens when the output is not a terminal)")
    top.set_defaults(func=cmd_top)
