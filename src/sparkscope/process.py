"""Processes sparkscope starts: one way to start a process group, to stop it
by pid within a deadline, to show that long work is still going, and to read
the tail of a log.

Everything runs in a session of its own (its own process group), so that a
stop reaches the children too (go's compilers, Spark's executor JVMs) and a
Ctrl-C at the terminal reaches only sparkscope, which then stops them in order.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Callable, Optional

from sparkscope.probes import procstat

Progress = Callable[[str], None]

HEARTBEAT_S = 20.0


def quiet(_line: str) -> None:
    """A Progress that shows nothing (tests, benchmarks)."""


def wait_until(check: Callable[[], bool], deadline_s: float, interval_s: float = 0.25) -> bool:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(interval_s)
    return check()


# --- one process: is it still the one we started? -------------------------------

def start_ticks(pid: int) -> Optional[str]:
    """The process start time from /proc, so a recycled pid is never mistaken for ours."""
    stat = procstat.read(pid)
    ticks = procstat.start_ticks(stat) if stat else None
    return None if ticks is None else str(ticks)


def boot_time() -> Optional[float]:
    """When the machine booted, in seconds since the epoch, to 10 ms: now less
    /proc/uptime (the clock a process's starttime counts on). /proc/stat's
    btime is whole seconds, which put a process's start up to a second early:
    enough to take a log line of the process before a restart for the new one's."""
    try:
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        try:
            return float(next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                              if line.startswith("btime ")))
        except (OSError, StopIteration, ValueError, IndexError):
            return None
    return time.time() - uptime


def process_started_at(pid: int) -> Optional[datetime]:
    """When a process started, in UTC (to the clock tick), from its starttime and the boot time."""
    stat = procstat.read(pid)
    ticks = procstat.start_ticks(stat) if stat else None
    boot = boot_time()
    if ticks is None or boot is None:
        return None
    return datetime.fromtimestamp(boot + ticks / procstat.CLOCK_TICKS, timezone.utc)


def is_zombie(pid: int) -> bool:
    """Exited but not reaped yet (or gone): not running either way."""
    stat = procstat.read(pid)
    return stat is None or procstat.state(stat) in ("Z", None)


def _answers(send: Callable[[int, int], None], target: int) -> bool:
    """Signal 0 reaches it: it exists (another user's process counts too)."""
    try:
        send(target, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def alive(pid: int) -> bool:
    return _answers(os.kill, pid)


def group_alive(pgid: int) -> bool:
    return _answers(os.killpg, pgid)


# --- start, stop -------------------------------------------------------------------

def python_module_argv(module: str, *args: str) -> list[str]:
    """`python -m module args` without the working directory first on sys.path
    (what -P does from Python 3.11): a `sparkscope/` planted there would run as
    whoever starts the module, root for the probes."""
    return [sys.executable, "-c", "import runpy, sys; del sys.path[0]; "
            f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)", *args]


def open_private_log(log_path: Path) -> IO[bytes]:
    """A log to append to: created 0600 (services may log about their users), and
    never through a symlink, which another user could point at a file of root's."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    if os.fstat(fd).st_uid != os.geteuid():
        os.close(fd)
        raise PermissionError(f"{log_path} belongs to another user; remove it and start again")
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "ab")


def start_group(argv: list[str], log_path: Path, env: Optional[dict[str, str]] = None,
                cwd: Optional[Path] = None, stdout: Optional[int] = None) -> subprocess.Popen:
    """Start argv in a session of its own; stderr (and stdout unless given) appended to log_path."""
    with open_private_log(log_path) as log:
        log.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} $ {_shown(argv, cwd)}\n".encode())
        log.flush()
        return subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                                stdout=log if stdout is None else stdout, stderr=log,
                                start_new_session=True, text=stdout is not None)


def stop_group(pid: int, deadline_s: float = 15.0, proc: Optional[subprocess.Popen] = None,
               progress: Progress = quiet) -> None:
    """SIGTERM the process group led by pid, SIGKILL what is left after deadline_s.

    Returns once the whole group is gone. A Ctrl-C while it waits kills at once.
    When we are the parent (proc given, or a service `up` started in this
    process) the leader is reaped, so it does not linger as a zombie.
    """
    def gone() -> bool:
        if proc is not None:
            proc.poll()
        else:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass  # not our child: init reaps it
        return not group_alive(pid)

    for sig, deadline in ((signal.SIGTERM, deadline_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            gone()
            return
        try:
            if wait_until(gone, deadline, 0.1):
                return
        except KeyboardInterrupt:
            progress("stopping at once (SIGKILL)")


# --- long work --------------------------------------------------------------------

@dataclass
class Finished:
    returncode: int
    seconds: float


def run_logged(argv: list[str], log_path: Path, label: str, progress: Progress, *,
               env: Optional[dict[str, str]] = None, cwd: Optional[Path] = None,
               stdout: Optional[IO[str]] = None, heartbeat_s: float = HEARTBEAT_S) -> Finished:
    """Run a long command to its end, its output appended to log_path, a
    "still working" line to progress every heartbeat_s, a "done" line at the end.

    Any interruption (Ctrl-C, SIGTERM turned into KeyboardInterrupt) kills the
    whole process group before it propagates. The caller decides what a
    non-zero exit means (log_tail helps say why).
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(log_path, "a") as log:
        log.write(f"\n$ {_shown(argv, cwd)}\n")
        log.flush()
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                                stdout=stdout or log, stderr=log, start_new_session=True)
    try:
        while True:
            try:
                returncode = proc.wait(timeout=heartbeat_s)
                break
            except subprocess.TimeoutExpired:
                progress(f"  {label}: still working, {_duration(time.monotonic() - started)} (log: {log_path})")
    except BaseException:
        stop_group(proc.pid, deadline_s=0, proc=proc)
        raise
    seconds = time.monotonic() - started
    with open(log_path, "a") as log:
        log.write(f"# exit status {returncode} after {seconds:.1f} s\n")
    if returncode == 0:
        progress(f"  {label}: done in {_duration(seconds)}")
    return Finished(returncode, seconds)


def log_tail(path: Optional[Path], lines: int = 15, indent: str = "    ") -> str:
    """The last lines of a log, indented, for an error message."""
    try:
        text = path.read_text(errors="replace") if path is not None else ""
    except OSError:
        return f"{indent}(no log at {path})"
    return "\n".join(indent + line for line in text.splitlines()[-lines:]) or f"{indent}(the log is empty)"


def _shown(argv: list[str], cwd: Optional[Path]) -> str:
    command = " ".join(shlex.quote(a) for a in argv)
    return f"(cd {shlex.quote(str(cwd))} && {command})" if cwd else command


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{seconds:.0f} s"

