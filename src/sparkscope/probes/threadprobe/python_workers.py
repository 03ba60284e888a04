"""py-spy on the PySpark workers of each Spark JVM, so a stage whose time
goes into Python UDFs shows where, stored as flame profiles of kind
"python" per executor and period.

The Python workers are child processes of the executor JVM (pyspark.daemon,
which forks one worker per task; or pyspark.worker with
spark.python.use.daemon=false). One `py-spy record --subprocesses` per
such child runs for a period at PY_SPY_RATE_HZ, --nonblocking (the worker
is never paused), and its raw output (collapsed stacks) is read when it
ends. py-spy needs ptrace; when it cannot attach it is said once and the
thread states go on."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from typing import Callable

from sparkscope.store import nested_set, profiles as store
from sparkscope.probes.threadprobe import procfs
from sparkscope.probes.threadprobe.jvms import SparkJvm
from sparkscope.probes.threadprobe.readiness import py_spy_path

PY_SPY_RATE_HZ = 20

# py-spy runs as root and attaches to what it is given: any local user can start
# a process that looks like an executor with thousands of "workers". A real
# executor has one pyspark.daemon (its forks are covered by --subprocesses), or
# one pyspark.worker per task slot; the bounds leave room for that and no more.
MAX_PER_EXECUTOR = int(os.environ.get("THREADPROBE_PYSPY_PER_EXECUTOR", "4"))
MAX_TOTAL = int(os.environ.get("THREADPROBE_PYSPY_MAX", "32"))


def is_python_worker(argv: list[str]) -> bool:
    return bool(argv) and os.path.basename(argv[0]).startswith("python") and any(
        a in ("pyspark.daemon", "pyspark.worker") for a in argv)


def _exe(pid: int) -> str:
    try:
        return os.path.basename(os.readlink(f"{procfs.PROC}/{pid}/exe"))
    except OSError:
        return ""


def _uid(pid: int) -> int:
    try:
        return os.stat(f"{procfs.PROC}/{pid}").st_uid
    except OSError:
        return -1


def why_not_a_jvm(pid: int) -> str | None:
    """None when the process really is a JVM: its program is java and libjvm is
    mapped (argv[0] is whatever the starter chose, `exec -a java` included)."""
    if not _exe(pid).startswith("java"):
        return f"its program is {_exe(pid) or 'unknown'}, not a JVM"
    maps = procfs.read_all(f"{procfs.PROC}/{pid}/maps") or ""
    return None if "/libjvm.so" in maps else "no libjvm.so mapped, not a JVM"


def is_real_worker(jvm_pid: int, child: int) -> bool:
    """A PySpark worker: a Python interpreter (not renamed), run by the executor's own user."""
    return (is_python_worker(procfs.cmdline(child) or []) and _exe(child).startswith("python")
            and _uid(child) == _uid(jvm_pid))


@dataclass
class Recording:
    jvm: SparkJvm
    child: int
    proc: subprocess.Popen
    output: str
    started_ms: int
    seconds: float


class PythonWorkers:
    def __init__(self, say: Callable[[str], None], rate_hz: int = PY_SPY_RATE_HZ):
        self.say = say
        self.rate_hz = rate_hz
        self.binary = py_spy_path()
        self.running: dict[tuple[int, int], Recording] = {}  # (jvm pid, child pid) -> recording
        self.finished: list[Recording] = []
        self.failed_said = False
        self.verified: dict[tuple[int, int], bool] = {}  # (pid, start ticks) -> a real JVM
        self.skipped = 0  # workers not profiled because of the bounds, since the start
        self.skipped_said: set[tuple[int, int]] = set()
        self.tmp = tempfile.mkdtemp(prefix="sparkscope-pyspy-")

    def refresh(self, jvms: list[SparkJvm], period_s: float) -> None:
        """Start a period's recording of every Python worker tree not being recorded."""
        for key, rec in list(self.running.items()):
            if rec.proc.poll() is not None:
                self.finished.append(self.running.pop(key))
        if self.binary is None:
            return
        for jvm in jvms:
            if not self._verified(jvm):
                continue
            workers = [child for child in procfs.children(jvm.pid) if is_real_worker(jvm.pid, child)]
            mine = sum(1 for pid, _ in self.running if pid == jvm.pid)
            waiting = [child for child in workers if (jvm.pid, child) not in self.running]
            room = max(0, min(MAX_PER_EXECUTOR - mine, MAX_TOTAL - len(self.running)))
            if len(waiting) > room:
                self._say_skipped(jvm, len(waiting) - room)
            for child in waiting[:room]:
                output = os.path.join(self.tmp, f"{jvm.pid}-{child}-{time.monotonic_ns()}.txt")
                proc = subprocess.Popen([self.binary, "record", "--pid", str(child), "--subprocesses",
                                         "--nonblocking", "--format", "raw", "--rate", str(self.rate_hz),
                                         "--duration", str(max(int(period_s), 1)), "--output", output],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True)
                self.running[jvm.pid, child] = Recording(jvm, child, proc, output, int(time.time() * 1000),
                                                         period_s)

    def _verified(self, jvm: SparkJvm) -> bool:
        key = (jvm.pid, jvm.start)
        if key not in self.verified:
            reason = why_not_a_jvm(jvm.pid)
            self.verified[key] = reason is None
            if reason:
                self.say(f"py-spy: pid {jvm.pid} says it is executor {jvm.executor_id} of {jvm.app_id}, but "
                         f"{reason}; its Python workers are not profiled")
            if len(self.verified) > 4096:  # pids come and go on a long-lived host
                self.verified = {key: self.verified[key]}
        return self.verified[key]

    def _say_skipped(self, jvm: SparkJvm, count: int) -> None:
        self.skipped += count
        if len(self.skipped_said) > 4096:
            self.skipped_said.clear()
        if (jvm.pid, jvm.start) not in self.skipped_said:  # once per executor; the total counts on
            self.skipped_said.add((jvm.pid, jvm.start))
            self.say(f"py-spy: executor {jvm.executor_id} of {jvm.app_id} (pid {jvm.pid}) has {count} more "
                     f"Python workers than the bound ({MAX_PER_EXECUTOR} per executor, {MAX_TOTAL} in all: "
                     f"THREADPROBE_PYSPY_PER_EXECUTOR, THREADPROBE_PYSPY_MAX); they are not profiled "
                     f"({self.skipped} so far)")

    def harvest(self, end_ns: int) -> list[str]:
        """Line protocol for the recordings that ended, one profile per JVM."""
        for key, rec in list(self.running.items()):
            if rec.proc.poll() is not None:
                self.finished.append(self.running.pop(key))
        merged: dict[tuple[int, str], tuple[Recording, Counter]] = {}
        for rec in self.finished:
            stderr = rec.proc.stderr.read() if rec.proc.stderr else ""
            if rec.proc.stderr:
                rec.proc.stderr.close()
            try:
                with open(rec.output) as f:
                    stacks = nested_set.parse_collapsed(f)
            except OSError:
                stacks = {}
            finally:
                try:
                    os.unlink(rec.output)
                except OSError:
                    pass
            if rec.proc.returncode not in (0, None) and not stacks and not self.failed_said:
                self.failed_said = True  # once: a worker that exits mid-record also ends here
                self.say(f"py-spy on PySpark worker pid {rec.child} failed ({rec.proc.returncode}): "
                         f"{stderr.strip()[-300:] or 'no message'}; thread states go on")
            slot = merged.setdefault((rec.jvm.pid, rec.jvm.app_id or ""), (rec, Counter()))
            slot[1].update(stacks)
        self.finished = []
        out: list[str] = []
        for rec, stacks in merged.values():
            if not stacks:
                continue
            profile = store.Profile(rec.jvm.app_id or "", rec.jvm.executor_id, "python", rec.started_ms,
                                    rec.seconds)
            rows = nested_set.rows(stacks, f"exec {rec.jvm.executor_id} Python workers",
                                   scale=1_000_000_000 // self.rate_hz)
            out += store.lines(profile, rows, sum(stacks.values()))
        return out

    def stop(self) -> None:
        for rec in self.running.values():
            rec.proc.terminate()
        for rec in self.running.values():
            try:
                rec.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                rec.proc.kill()
        self.running = {}
        try:
            for name in os.listdir(self.tmp):
                os.unlink(os.path.join(self.tmp, name))
            os.rmdir(self.tmp)
        except OSError:
            pass
