"""What one thread looks like in /proc: its state, name, wait channel, CPU
accounting and kernel stack. Every reader returns None (or an empty value)
for a thread or process that exited between listing and reading: threads
come and go all the time in a JVM, and one that vanished is skipped and
counted by the caller, never an error."""

from __future__ import annotations

import os
from typing import Optional

PROC = "/proc"

# One-letter states of /proc/<pid>/stat (fs/proc/array.c) to the words the
# panels use. R is on a CPU or waiting in the run queue for one; D is an
# uninterruptible wait (disk, a FUSE or NFS mount, some page faults); S an
# interruptible sleep (a futex: lock or idle pool; a socket; a timer).
STATES = {"R": "running", "D": "disk", "S": "sleeping", "I": "sleeping"}
OTHER_STATE = "other"  # T/t stopped (a debugger, SIGSTOP), Z/X exiting


def read_text(path: str, size: int = 4096) -> Optional[str]:
    """One read of a small /proc file; None when it (or its process) is gone
    or unreadable."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.read(fd, size).decode("utf-8", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def read_all(path: str) -> Optional[str]:
    """A /proc file of any length: seq_file files (/proc/<pid>/net/tcp) give
    at most a page per read, so a single read of a busy host's socket table
    stops after the first few dozen rows."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    chunks = []
    try:
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace")


def parse_schedstat(text: str) -> Optional[tuple[int, int]]:
    """/proc/.../schedstat: ns on a CPU, ns waiting in the run queue."""
    parts = text.split()
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def parse_stack(text: str) -> tuple[str, ...]:
    """/proc/.../stack ("[<0>] func+0x1/0x2" per line, innermost first) to
    function names, outermost (the syscall entry) first, as a flame graph
    stacks them."""
    frames = []
    for line in text.splitlines():
        name = line.split("] ", 1)[-1].strip()
        name = name.split("+", 1)[0]
        if name:
            frames.append(name)
    return tuple(reversed(frames))


def state_word(letter: Optional[str]) -> str:
    return STATES.get(letter or "", OTHER_STATE)


def task_ids(pid: int, proc: str = PROC) -> Optional[list[int]]:
    try:
        return [int(t) for t in os.listdir(f"{proc}/{pid}/task")]
    except (OSError, ValueError):
        return None


def children(pid: int) -> list[int]:
    """Direct child processes (Linux 3.5+ with CONFIG_PROC_CHILDREN, as on
    every common distribution's kernel); empty when unknown."""
    out: list[int] = []
    for tid in task_ids(pid) or []:
        text = read_all(f"{PROC}/{pid}/task/{tid}/children")
        if text:
            out += [int(c) for c in text.split() if c.isdigit()]
    return out


def cmdline(pid: int, proc: str = PROC) -> Optional[list[str]]:
    text = read_all(f"{proc}/{pid}/cmdline")
    if text is None:
        return None
    return [arg for arg in text.split("\0") if arg]
