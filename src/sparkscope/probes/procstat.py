"""/proc/<pid>/stat (and /proc/<pid>/task/<tid>/stat), parsed one way for the
whole project: the process runner's "is it still ours", the thread sampler's
states and parents, the benches' CPU time.

The command name in parentheses may itself hold spaces and ')' ("(Executor
task l)"), so every field is counted from the last ')': the state is field 0
after it, the parent's pid 1, utime 11, stime 12, starttime 19 (proc(5),
numbered from the state). Standard library only: the thread sampler imports it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
STATE, PPID, UTIME, STIME, STARTTIME = 0, 1, 11, 12, 19


def read(pid: int, proc: str = "/proc") -> Optional[str]:
    """The stat line of a process; None once it is gone or unreadable."""
    try:
        with open(f"{proc}/{pid}/stat", encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def fields(stat: str) -> Optional[list[str]]:
    """The fields after the name, the state first; None for a cut line."""
    _, sep, rest = stat.rpartition(")")
    return rest.split() if sep else None


def state(stat: str) -> Optional[str]:
    """The state letter (R, S, D, Z, ...)."""
    after = fields(stat)
    return after[STATE] if after else None


def state_of(stat: bytes) -> Optional[str]:
    """The state letter, read on bytes: the thread sampler does this per
    thread and sample, where a decode and a split would cost."""
    end = stat.rfind(b")")
    return chr(stat[end + 2]) if 0 <= end < len(stat) - 2 else None


def number(stat: str, index: int) -> Optional[int]:
    """A numeric field, counted from the state (0)."""
    after = fields(stat)
    try:
        return int(after[index]) if after else None
    except (IndexError, ValueError):
        return None


def start_ticks(stat: str) -> Optional[int]:
    """starttime (clock ticks since boot): with the pid, it tells a process
    from a later one that got the same pid."""
    return number(stat, STARTTIME)


def ppid(stat: str) -> Optional[int]:
    return number(stat, PPID)


def cpu_seconds(stat: str) -> Optional[float]:
    """User plus system CPU time the process has used."""
    user, system = number(stat, UTIME), number(stat, STIME)
    return None if user is None or system is None else (user + system) / CLOCK_TICKS


def descendants(pid: int, proc: str = "/proc") -> list[int]:
    """pid and its live descendants, from each thread's children file (a
    supervisor's work is done by its child: benches sum a service's tree)."""
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        for task in Path(f"{proc}/{current}/task").glob("*/children"):
            try:
                todo += [int(c) for c in task.read_text().split()]
            except (OSError, ValueError):
                pass
    return out
