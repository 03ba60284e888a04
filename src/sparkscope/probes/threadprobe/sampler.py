"""The thread sampler: every thread of every Spark JVM on this host, a few
times a second, from /proc (see periods.py for what it writes).

Why a process on the host, like Telegraf's procstat, and not a plugin inside
the executor: it needs no Spark setting and no jar, sees every JVM whatever
started it (drivers included), and its cost is its own process's, measured
from the outside (bench/threadprobe.py); /proc gives the kernel's view (D
state, wait channel, kernel stack), which the JVM does not have. What it
cannot see is the Java stack: that is the profiler plugin's part.

Cost control: per thread and sample one pread of its stat, kept open; its
name is read once per period, its wait channel only for task threads off CPU, its kernel
stack only for those and only where allowed, its schedstat once per period.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import sys
import time
from http.client import HTTPException
import urllib.error
from dataclasses import dataclass, field
from typing import Callable, Optional

from sparkscope.store import http
from sparkscope.probes import procstat
from sparkscope.probes.cli import add_url_argument, host_tagged, switched_on
from sparkscope.store.schema import THREAD_SAMPLER_MEASUREMENT
from sparkscope.probes.threadprobe import procfs
from sparkscope.probes.threadprobe.jvms import Discovery, SparkJvm
from sparkscope.probes.threadprobe.periods import STATE_FRAME, JvmPeriod, lines, thread_class, wait_kind
from sparkscope.probes.threadprobe.python_workers import PythonWorkers
from sparkscope.probes.threadprobe.readiness import why_no_kernel_stacks, why_no_py_spy

DEFAULT_RATE_HZ = 4.0
DEFAULT_PERIOD_S = 10
DISCOVERY_S = 2.0  # new executors are sampled within this
SELF = THREAD_SAMPLER_MEASUREMENT
STARTED = "sampling thread states"


def say(message: str) -> None:
    print(f"threadprobe: {message}", file=sys.stderr, flush=True)


@dataclass
class JvmState:
    jvm: SparkJvm
    period: JvmPeriod = field(default_factory=JvmPeriod)
    classes: dict[int, str] = field(default_factory=dict)  # tid -> thread class, from its name, once per period
    stat_fds: dict[int, int] = field(default_factory=dict)  # tid -> open fd of its stat, re-read with pread
    sched: dict[int, tuple[int, int]] = field(default_factory=dict)  # tid -> schedstat at the last period end


class Sampler:
    def __init__(self, kernel_stacks: bool = False, proc: str = procfs.PROC,
                 discovery: Optional[Discovery] = None):
        self.proc = proc
        self.kernel_stacks = kernel_stacks
        self.discovery = discovery or Discovery(proc)
        self.jvms: dict[tuple[int, int], JvmState] = {}
        self.skipped = 0  # reads of a thread or process that had exited: skipped, counted
        self.sampled = 0
        self.max_open = open_files_budget()
        self.open_files = 0

    def refresh(self) -> None:
        """Pick up new Spark JVMs, forget those that exited. A JVM that exits
        mid-period has its samples written with the period (not lost)."""
        found = {(j.pid, j.start): j for j in self.discovery.scan()}
        for key, jvm in found.items():
            if key not in self.jvms:
                state = JvmState(jvm)
                # Baseline: CPU time spent before we saw it is not this period's.
                for tid in procfs.task_ids(jvm.pid, self.proc) or []:
                    got = self._schedstat(jvm.pid, tid)
                    if got:
                        state.sched[tid] = got
                self.jvms[key] = state
        for message in self.discovery.messages:
            say(message)
        self.discovery.messages.clear()
        for key in [k for k in self.jvms if k not in found and not self.jvms[k].period.samples]:
            self.close_files(self.jvms.pop(key))

    def _schedstat(self, pid: int, tid: int) -> Optional[tuple[int, int]]:
        text = procfs.read_text(f"{self.proc}/{pid}/task/{tid}/schedstat", 128)
        return procfs.parse_schedstat(text) if text else None

    def sample(self) -> None:
        for state in self.jvms.values():
            pid = state.jvm.pid
            tids = procfs.task_ids(pid, self.proc)
            if tids is None:  # exited; forgotten at the next refresh once its period is written
                continue
            period, fds, classes = state.period, state.stat_fds, state.classes
            base = f"{self.proc}/{pid}/task/"
            counted = 0
            for tid in tids:
                letter = self._state_letter(fds, base, tid)
                if letter is None:
                    self.skipped += 1
                    continue
                cls = classes.get(tid)
                if cls is None:
                    cls = classes[tid] = thread_class((procfs.read_text(f"{base}{tid}/comm", 64) or "").rstrip("\n"))
                word = procfs.state_word(letter)
                period.add(cls, word)
                counted += 1
                if cls == "task" and word in ("disk", "sleeping"):
                    self._off_cpu(base, tid, word, period)
            if counted:
                period.samples += 1
                self.sampled += counted

    def _state_letter(self, fds: dict[int, int], base: str, tid: int, retry: bool = True) -> Optional[str]:
        """The thread's state from its stat file, kept open and re-read with
        pread (a read at offset 0 of a /proc file renders it afresh): half the
        system calls of open, read, close. A thread that exited answers with
        an error: its fd is closed and the tid opened afresh once (a new
        thread may have it now). Past the open-files budget (all JVMs
        together) it falls back to open, read, close."""
        fd = fds.get(tid)
        if fd is None:
            try:
                fd = os.open(f"{base}{tid}/stat", os.O_RDONLY)
            except OSError:
                return None
            if self.open_files < self.max_open:
                fds[tid] = fd
                self.open_files += 1
            else:
                try:
                    return procstat.state_of(os.read(fd, 1024))
                except OSError:
                    return None
                finally:
                    os.close(fd)
        try:
            data = os.pread(fd, 1024, 0)
        except OSError:
            data = b""
        if not data:
            os.close(fds.pop(tid))
            self.open_files -= 1
            return self._state_letter(fds, base, tid, retry=False) if retry else None
        return procstat.state_of(data)

    def close_files(self, state: JvmState, keep: Optional[set[int]] = None) -> None:
        for tid in [t for t in state.stat_fds if keep is None or t not in keep]:
            os.close(state.stat_fds.pop(tid))
            self.open_files -= 1

    def _off_cpu(self, base: str, tid: int, word: str, period: JvmPeriod) -> None:
        wchan = (procfs.read_text(f"{base}{tid}/wchan", 128) or "").strip()
        if wchan == "0":  # it woke up since its stat was read (or wchan is not ours to read)
            wchan = ""
        period.kinds[wait_kind(word, wchan)] += 1
        if wchan:
            period.waits[word, wchan] += 1
        if self.kernel_stacks:
            text = procfs.read_text(f"{base}{tid}/stack", 8192)
            frames = procfs.parse_stack(text) if text else ()
            if frames:
                period.stacks[(STATE_FRAME[word], *frames)] += 1

    def close_period(self, end_ns: int, seconds: float, sample_interval_s: float) -> list[str]:
        out: list[str] = []
        for key, state in list(self.jvms.items()):
            self._account_cpu(state)
            out += lines(state.jvm.app_id or "", state.jvm.executor_id, state.period, end_ns, seconds,
                         sample_interval_s)
            state.period = JvmPeriod()
            state.classes = {}  # names re-read once a period: a JVM may rename a thread
            self.close_files(state, keep=set(procfs.task_ids(state.jvm.pid, self.proc) or ()))
        return out

    def _account_cpu(self, state: JvmState) -> None:
        """Add each thread's schedstat increase since the last period end to its
        class. A thread new since then counts from its start; one that exited
        in between loses its last part (schedstat dies with it)."""
        pid = state.jvm.pid
        now: dict[int, tuple[int, int]] = {}
        for tid in procfs.task_ids(pid, self.proc) or []:
            got = self._schedstat(pid, tid)
            if got is None:
                continue
            now[tid] = got
            before = state.sched.get(tid, (0, 0))
            cls = state.classes.get(tid) or thread_class(
                (procfs.read_text(f"{self.proc}/{pid}/task/{tid}/comm", 64) or "").rstrip("\n"))
            state.period.cpu_ns[cls] += max(got[0] - before[0], 0)
            state.period.wait_ns[cls] += max(got[1] - before[1], 0)
        state.sched = now


def open_files_budget(reserve: int = 64) -> int:
    """How many stat files may stay open: the soft limit raised to the hard
    one (a host may run thousands of JVM threads), less a reserve for
    sockets, py-spy and /proc reads."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or hard > soft:
            wanted = 1 << 16 if hard == resource.RLIM_INFINITY else min(hard, 1 << 16)
            resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
            soft = max(soft, wanted)
    except (ValueError, OSError):
        soft = 1024
    return max(soft - reserve, 0)


class Errors:
    """A bug or a /proc surprise in one step must not stop the sampler: the
    step is skipped, counted (field errors) and said once per kind."""

    def __init__(self):
        self.count = 0
        self.said: set[str] = set()

    def guard(self, what: str, step: Callable[[], object]):
        try:
            return step()
        except Exception as err:  # noqa: BLE001
            self.count += 1
            kind = f"{what}: {type(err).__name__}"
            if kind not in self.said:
                self.said.add(kind)
                say(f"{what} failed ({type(err).__name__}: {err}); skipped, sampling goes on")
            return None


def send(url: str, lines_: list[str], timeout_s: float = 5.0) -> bool:
    """POST line protocol to Telegraf's listener; on failure say so and drop
    the period (Telegraf itself buffers through an InfluxDB outage)."""
    if not lines_:
        return True
    try:
        http.post_lines(url, host_tagged(lines_), timeout_s)
        return True
    except (urllib.error.URLError, OSError, HTTPException) as err:  # HTTPException: whatever holds the port speaks no HTTP
        say(f"{len(lines_)} points not sent to {url}: {err}; is Telegraf up?")
        return False


def self_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


# What one period may send at most: a host with thousands of threads in odd
# states and wait channels must not flood Telegraf. Beyond it the period's
# lines are cut and the cut counted (sparkscope_threadprobe dropped_lines).
MAX_LINES_PER_PERIOD = 20_000
RESTART_BACKOFF_S = (1, 2, 4, 8, 16, 32, 60)


def bounded(out: list[str], limit: int = MAX_LINES_PER_PERIOD) -> tuple[list[str], int]:
    return (out, 0) if len(out) <= limit else (out[:limit], len(out) - limit)


def run_with_restarts(start: Callable[[], int], backoff_s: tuple = RESTART_BACKOFF_S,
                      stop: Callable[[], bool] = lambda: False, sleep: Callable[[float], None] = time.sleep) -> int:
    """Run the sampler; if it dies of an error no guard caught, say so and run it
    again after a growing pause, so one bad /proc entry cannot end sampling."""
    failures = 0
    while True:
        try:
            return start()
        except Exception as err:  # noqa: BLE001 - anything: the sampler must come back
            wait = backoff_s[min(failures, len(backoff_s) - 1)]
            failures += 1
            say(f"stopped by an error ({type(err).__name__}: {err}); starting again in {wait} s "
                f"(restart {failures})")
            if stop():
                return 1
            sleep(wait)


def run(url: str, rate_hz: float, period_s: float, kernel_stacks: bool, python: Optional[object] = None,
        stop: Callable[[], bool] = lambda: False, clock: Callable[[], float] = time.monotonic) -> int:
    sampler = Sampler(kernel_stacks=kernel_stacks)
    interval = 1.0 / rate_hz
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    say(f"{STARTED} of Spark JVMs at {rate_hz:g} Hz, period {period_s:g} s, kernel stacks "
        f"{'on' if kernel_stacks else 'off'} -> {url}")
    period_start, next_discovery = clock(), 0.0
    cpu0, skipped0, errors0, sampled0 = self_cpu_s(), 0, 0, 0
    next_sample = clock()
    errors = Errors()
    while True:
        now = clock()
        if now >= next_discovery:
            errors.guard("finding Spark JVMs", sampler.refresh)
            if python is not None:
                errors.guard("starting py-spy", lambda: python.refresh([s.jvm for s in sampler.jvms.values()],
                                                                        period_s))
            next_discovery = now + DISCOVERY_S
        errors.guard("sampling", sampler.sample)
        done = stopping or stop()
        if clock() - period_start >= period_s or done:
            end = clock()
            seconds = max(end - period_start, interval)
            end_ns = time.time_ns()
            out = errors.guard("writing the period", lambda: sampler.close_period(end_ns, seconds, interval)) or []
            if python is not None:
                out += errors.guard("reading py-spy", lambda: python.harvest(end_ns)) or []
            out, cut = bounded(out)
            cpu1 = self_cpu_s()
            # Its own cost, beside what it measured: CPU, and the thread samples that CPU bought.
            out.append(f"{SELF} cpu_pct={100 * (cpu1 - cpu0) / seconds},jvms={len(sampler.jvms)}i,"
                       f"thread_samples={sampler.sampled - sampled0}i,skipped={sampler.skipped - skipped0}i,"
                       f"errors={errors.count - errors0}i,dropped_lines={cut}i {end_ns}")
            send(url, out)
            period_start, cpu0, skipped0, errors0 = end, cpu1, sampler.skipped, errors.count
            sampled0 = sampler.sampled
        if done:
            if python is not None:
                python.stop()
            for state in sampler.jvms.values():
                sampler.close_files(state)
            return 0
        next_sample += interval
        delay = next_sample - clock()
        if delay < 0:  # behind (a slow send, a busy machine): skip, do not burst
            next_sample = clock()
        else:
            time.sleep(delay)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sparkscope.probes.threadprobe",
                                     description="Sample thread states of Spark JVMs from /proc and send them "
                                                 "to Telegraf.")
    add_url_argument(parser, "THREADPROBE_URL")
    parser.add_argument("--rate", type=float, default=float(os.environ.get("THREADPROBE_RATE_HZ", DEFAULT_RATE_HZ)),
                        help="samples per second of every thread (default %(default)s)")
    parser.add_argument("--period", type=float,
                        default=float(os.environ.get("THREADPROBE_PERIOD_S", DEFAULT_PERIOD_S)),
                        help="seconds per written average (default %(default)s)")
    parser.add_argument("--kernel-stacks", action=argparse.BooleanOptionalAction,
                        default=switched_on("THREADPROBE_KERNEL_STACKS"),
                        help="off-CPU kernel stacks of task threads (needs root; default on where allowed)")
    parser.add_argument("--python", action=argparse.BooleanOptionalAction, default=switched_on("THREADPROBE_PYSPY"),
                        help="py-spy profiles of PySpark workers (needs ptrace; default on where allowed)")
    args = parser.parse_args(argv)
    if not switched_on("THREADPROBE_ENABLED"):
        say(f"off (THREADPROBE_ENABLED={os.environ['THREADPROBE_ENABLED']})")
        return 0
    if not os.path.isdir(f"{procfs.PROC}/self/task"):
        say("cannot sample: no Linux /proc here")
        return 2
    if args.rate <= 0 or args.period <= 0:
        say("--rate and --period must be positive")
        return 2
    kernel_stacks = args.kernel_stacks
    if kernel_stacks:
        reason = why_no_kernel_stacks()
        if reason:
            say(f"kernel stacks off: {reason}")
            kernel_stacks = False
    python = None
    if args.python:
        reason = why_no_py_spy()
        if reason:
            say(f"PySpark worker profiles off: {reason}")
        else:
            python = PythonWorkers(say)
    return run_with_restarts(lambda: run(args.url, args.rate, args.period, kernel_stacks, python))
