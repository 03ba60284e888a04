#!/usr/bin/env python3
"""What sparkscope costs a Spark job, part by part, with the method's own
resolution.

Arms (--arms, the first is the baseline the others are compared with):
  plain     Spark without sparkscope
  sink      + the Graphite sink, JVM source, executor metrics, app status
  tree      + Spark's own process-tree RSS (spark.executor.processTreeMetrics.enabled=true,
            shipped until 2026-11; shipped now: off, the annotator's plugin measures it)
  listener  + the annotator jar and listener (peaks, totals, annotations)
  shipped   + the profiler plugin, idle (everything ./sparkscope conf prints)
  profiling + a CPU profile of every executor running through the run
An arm may appear twice (--arms shipped,shipped: an A/A run, whose ratio
shows the noise the method cannot tell from a cost).

Workloads (--workload): the demo's TPC-DS queries (data generated once per
scale and cached) in local-cluster[2,1,1024], or a task-heavy job of many
tiny tasks (bench/jobs/many_tasks.py), where a per-task cost shows. Every
round runs each arm once, in an order rotated and reversed from round to
round (ABBA for two arms), so a drift in the machine's load falls on all
arms alike.

Each run is one Spark application: a warm-up pass over the queries (JIT,
class loading, file caches), then --passes measured passes. A run's figure is
the sum of its measured query times, timed in the driver around each
query's collect(); JVM start-up and stop, which vary by seconds on a busy
2-core machine, stay out of it and are shown apart (the whole spark-submit
time). Printed as it goes: every pass of every run; at the end the median of
each arm, the ratio of the medians, the per-round ratio (with / without,
each round's two runs side by side) with its spread, per-query medians, and
the CPU time of all Spark processes per run (user + system of the reaped
spark-submit tree: driver, executors, Python workers), which the machine's
noise disturbs less than wall time.

For each arm against the baseline: the ratio of medians of query time and of
Spark CPU, with a 95 % bootstrap interval (runs resampled within each arm,
2,000 times).

Where the CPU goes (the cost without the noise of the rest of the job): every
second the bench reads the CPU time of each thread of each Spark JVM from
/proc (the JVM names its threads after Java's thread names, cut to 15
characters) and of their reaped children (pgrep, which Spark starts for the
process-tree RSS), and sums the last reading by the part the thread belongs
to: the annotator's and profiler's own threads, the listener bus, the metrics
sink's reporter, executor-metrics polling, the tasks, GC, JIT, other. Each
arm's median per part, and its difference from the baseline's as a share of
the baseline's Spark CPU, follow the table. The processor's hardware counters
(instructions) would be quieter still, but this machine's kernel offers none
(perf_event_open answers ENOENT for them in its virtual machine).

    .venv/bin/python bench/overhead.py --queries q3,q7,q42,q52,q55 --rounds 6
    .venv/bin/python bench/overhead.py --arms shipped,shipped --rounds 6        # A/A
    .venv/bin/python bench/overhead.py --arms plain,sink,tree,listener,shipped
    .venv/bin/python bench/overhead.py --workload tasks --tasks 20000
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Optional
from pathlib import Path

from sparkscope.probes import procstat
from sparkscope.provision.annotator_jar import ensure_annotator_jar
from sparkscope.demo import command, tpcds
from sparkscope.demo import run as demo_run
from sparkscope.demo.options import DemoOptions
from sparkscope.spark.conf import LISTENER_PLUGIN_CLASS, annotator_properties, sparkscope_properties
from sparkscope.spark.submit import spark_env, submit_argv
from sparkscope.stack.native import PidFile
from sparkscope.settings import load_settings
from sparkscope_testkit.sandbox import settings_environ, throwaway_stack

ROOT = Path(__file__).resolve().parents[1]

MASTER = "local-cluster[2,1,1024]"
# Ten quick queries at sf=0.1 (0.6 to 3 s each here, warm): star joins and
# aggregations over the sales tables, one with a window function (q98).
DEFAULT_QUERIES = "q3,q7,q19,q42,q43,q52,q55,q68,q96,q98"
ARM_NAMES = ("plain", "sink", "tree", "listener", "shipped", "profiling")
SINK_ONLY = {"spark.executor.processTreeMetrics.enabled": "false"}
SPARK_PROCESS_TREE = {"spark.executor.processTreeMetrics.enabled": "true"}


@dataclass
class Run:
    arm: str  # the arm's label: its name, with "#2" for a second arm of the same name
    round: int
    app_id: str = ""
    query_s: dict[str, list[float]] = field(default_factory=dict)  # measured passes only
    wall_s: float = 0.0
    cpu_s: float = 0.0  # all Spark processes (driver, executors, Python workers)
    stack_cpu_s: float = 0.0  # Telegraf and InfluxDB
    other_cores: float = 0.0  # everything else on the machine, mean cores busy during the run
    forks: int = 0  # processes started on the machine during the run (Spark's own, mostly); see TaskCounter
    threads: Optional[int] = None  # threads started, when TaskCounter tells them apart (else in forks)
    programs: dict[str, int] = field(default_factory=dict)  # programs Spark's processes ran (exec), by path
    part_s: dict[str, float] = field(default_factory=dict)  # CPU seconds by THREAD_PARTS (ThreadCpu)

    @property
    def disturbed(self) -> bool:
        return self.other_cores > QUIET_CORES

    @property
    def total_s(self) -> float:
        return sum(sum(times) for times in self.query_s.values())


def conf_for(arm: str, settings, jar: Path, with_conf: dict[str, str]) -> dict[str, str]:
    """The demo's Spark settings for an arm (ARM_NAMES); --with-conf changes every
    arm but the baseline. An empty value removes the key."""
    name = arm.split("#")[0]
    options = DemoOptions(executors=2, executor_memory_mb=1024)
    conf = demo_run.spark_conf(settings, options, jar)
    conf["spark.app.name"] = f"sparkscope-bench-overhead-{name}"
    sink = set(sparkscope_properties(settings))
    annotator = set(annotator_properties(settings, jar))
    if name == "plain":
        conf = {k: v for k, v in conf.items() if k not in sink | annotator}
    elif name in ("sink", "tree"):
        conf = {k: v for k, v in conf.items() if k not in annotator}
        conf.update(SINK_ONLY if name == "sink" else SPARK_PROCESS_TREE)
    elif name == "listener":
        conf["spark.plugins"] = LISTENER_PLUGIN_CLASS  # the listener alone, none of the executors' plugins
    conf.update(with_conf)
    return {k: v for k, v in conf.items() if v != ""}


def labelled(arms: list[str]) -> list[str]:
    """Arm labels, a repeated name numbered: shipped, shipped#2."""
    out = []
    for arm in arms:
        if arm not in ARM_NAMES:
            raise SystemExit(f"unknown arm {arm!r}: use {', '.join(ARM_NAMES)}")
        n = sum(1 for a in out if a.split("#")[0] == arm)
        out.append(arm if n == 0 else f"{arm}#{n + 1}")
    return out


def round_order(arms: list[str], n: int) -> list[str]:
    """Round n's order: rotated by n, reversed every other round (ABBA for two)."""
    k = (n - 1) // 2 % len(arms)
    order = arms[k:] + arms[:k]
    return order if n % 2 == 1 else list(reversed(order))


def bootstrap_ratio(base: list[float], other: list[float], resamples: int = 2000,
                    seed: int = 1) -> tuple[float, float, float]:
    """Ratio of medians other/base and its 95 % interval, resampling each arm's runs."""
    rng = random.Random(seed)
    ratios = sorted(statistics.median(rng.choices(other, k=len(other))) /
                    statistics.median(rng.choices(base, k=len(base))) for _ in range(resamples))
    point = statistics.median(other) / statistics.median(base)
    return point, ratios[int(0.025 * resamples)], ratios[int(0.975 * resamples) - 1]


def key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
QUIET_CORES = 0.2  # other work on the machine above this (in cores) marks a run as disturbed


def busy_seconds() -> float:
    """CPU time the whole machine spent busy since boot (all cores), from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / CLOCK_TICKS


def processes_started() -> int:
    """Tasks the kernel made on the machine since boot (/proc/stat's "processes"):
    every fork and every thread, e.g. Spark's pgrep calls and the JVMs' new threads."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("processes "):
            return int(line.split()[1])
    return 0


def parse_task_counts(line: str, counts: dict[str, int]) -> bool:
    """One line of bench/forks.bt's output into counts ("processes", "threads");
    True when it was a count."""
    for key in ("processes", "threads"):
        if line.startswith(f"@{key}:"):
            try:
                counts[key] = int(line.split(":", 1)[1])
            except ValueError:
                return False
            return True
    return False


def parse_task_event(line: str) -> Optional[tuple[str, int, str]]:
    """One event line of bench/forks.bt ("P 10 11", "T 10 12", "E 11 /usr/bin/chmod"), or None."""
    parts = line.split(" ", 2)
    if len(parts) == 3 and parts[0] in ("P", "T", "E") and parts[1].isdigit() and \
            (parts[0] == "E" or parts[2].isdigit()):
        return parts[0], int(parts[1]), parts[2]
    return None


class TaskCounter:
    """Processes and threads started on the machine, apart: bench/forks.bt under
    bpftrace (root), whose cumulative counts come every second. /proc/stat counts
    both together, so a JVM's new threads would read as processes started;
    without bpftrace that is what is counted, and said."""

    def __init__(self) -> None:
        self.proc: Optional[subprocess.Popen] = None
        self.counts = {"processes": 0, "threads": 0}
        self.seen = 0  # counts lines read: a reading is fresh once it grew
        self.lock = threading.Condition()
        self.events: list[tuple[str, int, str]] = []  # (P|T|E, pid, child pid or program), as bpftrace prints them

    def start(self) -> Optional[str]:
        """Starts counting; None, or why it counts processes and threads together."""
        if os.geteuid() != 0:
            return "not root"
        try:
            self.proc = subprocess.Popen(["bpftrace", "-B", "line", str(ROOT / "bench" / "forks.bt")],
                                         stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, text=True, start_new_session=True)
        except OSError as err:
            return f"no bpftrace ({err.strerror})"
        threading.Thread(target=self._read, daemon=True).start()
        if not self._fresh(15):
            self.stop()
            return "bpftrace gave no count within 15 s"
        return None

    def _read(self) -> None:
        for line in self.proc.stdout:
            with self.lock:
                event = parse_task_event(line.strip())
                if event is not None:
                    self.events.append(event)
                elif parse_task_counts(line.strip(), self.counts):
                    self.seen += 1
                    self.lock.notify_all()

    def mark(self) -> int:
        """Where the events are now (after a fresh count: what came before is in)."""
        self._fresh(5)
        with self.lock:
            return len(self.events)

    def tree(self, root: int, since: int) -> Optional[tuple[int, int, dict[str, int]]]:
        """(processes, threads, programs run) of root's descendants (root's own
        threads included), from the events after mark `since`; None without
        bpftrace. The tree is built from every event first: bpftrace reads its
        per-CPU buffers in turn, so a child's line may come before its parent's."""
        if self.proc is None:
            return None
        self._fresh(5)
        with self.lock:
            events = self.events[since:]
        children: dict[int, list[int]] = {}
        for kind, pid, other in events:
            if kind == "P":
                children.setdefault(pid, []).append(int(other))
        members, todo = {root}, [root]
        while todo:
            for child in children.get(todo.pop(), []):
                if child not in members:
                    members.add(child)
                    todo.append(child)
        processes = len(members) - 1
        threads = sum(1 for kind, pid, _ in events if kind == "T" and pid in members)
        programs: dict[str, int] = {}
        for kind, pid, program in events:
            if kind == "E" and pid in members and pid != root:
                programs[program] = programs.get(program, 0) + 1
        return processes, threads, programs

    def _fresh(self, timeout: float) -> bool:
        """Waits for the counts printed after this moment (both of them)."""
        with self.lock:
            target = self.seen + 2
            return self.lock.wait_for(lambda: self.seen >= target, timeout)

    def now(self) -> tuple[int, Optional[int]]:
        """(processes, threads) started so far; (both together, None) when not counting apart."""
        if self.proc is None or not self._fresh(5):
            return processes_started(), None
        with self.lock:
            return self.counts["processes"], self.counts["threads"]

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None


TASKS = TaskCounter()


def started_text(runs: list[Run]) -> str:
    """What the runs started (medians): processes and threads apart where counted apart."""
    forks = statistics.median(r.forks for r in runs)
    if all(r.threads is not None for r in runs):
        return f"{forks:.0f} processes and {statistics.median(r.threads for r in runs):.0f} threads started"
    return f"{forks:.0f} processes and threads started"


def process_cpu_seconds(pids: list[int]) -> float:
    """User + system CPU of these processes and their descendants (those gone count
    nothing): a service's pid file names its supervisor, whose child does the work."""
    stats = (procstat.read(member) for pid in pids for member in procstat.descendants(pid))
    return sum(procstat.cpu_seconds(stat) or 0.0 for stat in stats if stat)


def own_cpu_seconds() -> tuple[float, float]:
    """(reaped children: the Spark processes, this process)."""
    children, me = resource.getrusage(resource.RUSAGE_CHILDREN), resource.getrusage(resource.RUSAGE_SELF)
    return children.ru_utime + children.ru_stime, me.ru_utime + me.ru_stime


def wait_for_quiet(max_wait_s: float, window_s: float = 3.0) -> float:
    """Wait (up to max_wait_s) until the machine is idle for one window: on a shared
    machine another job starting mid-run would swamp a 2 % effect. Returns the wait."""
    started = time.monotonic()
    told = False
    while True:
        before = busy_seconds()
        time.sleep(window_s)
        load = (busy_seconds() - before) / window_s
        waited = time.monotonic() - started
        if load < QUIET_CORES or waited >= max_wait_s:
            if told:
                print(f"      machine {'quiet' if load < QUIET_CORES else 'still busy'} after {waited:.0f} s "
                      f"({load:.2f} cores busy)", flush=True)
            return waited
        if not told:
            print(f"      waiting for other work to finish ({load:.2f} cores busy, up to {max_wait_s:.0f} s)",
                  flush=True)
            told = True


# What a JVM thread does, by the start of its name as Linux keeps it (15
# characters): Spark's and sparkscope's thread names, first match wins.
THREAD_PARTS = (
    ("sparkscope threads", ("sparkscope-",)),  # annotator writer, profiler, container memory
    ("listener bus", ("spark-listener-",)),  # Spark's listeners and the annotator (shared queue)
    ("metrics sink", ("metrics-graphit", "metrics-console")),  # the sink's reporter threads
    ("metrics polling", ("executor-metri", "executor-heart", "driver-heartbea")),  # incl. process tree
    ("tasks", ("Executor task l",)),
    ("scheduling, RPC", ("rpc-", "dispatcher-", "task-result-get", "dag-scheduler-e", "netty-rpc-", "shuffle-",
                         "map-output-disp", "heartbeat-rece", "Thread-")),  # Thread-N: py4j's calls into Spark
    ("JVM main thread", ("java",)),  # start-up: class loading, SparkContext, the executor's main
    ("GC", ("GC Thread", "G1 ", "VM Periodic Tas", "VM Thread")),
    ("JIT", ("C1 CompilerThre", "C2 CompilerThre")),
)
CHILDREN = "children (pgrep)"  # reaped children of the JVMs: process-tree RSS's pgrep calls
PART_NAMES = tuple(name for name, _ in THREAD_PARTS) + (CHILDREN, "other JVM threads", "Python")
# The work sparkscope's settings add themselves, as against what they may change
# in the rest of the job (more code for the JIT, caches): its threads, the
# annotator on the listener bus, the sink, the polling and pgrep.
OWN_WORK = ("sparkscope threads", "listener bus", "metrics sink", "metrics polling", CHILDREN)


def cpu_ticks(stat: str) -> int:
    return (procstat.number(stat, procstat.UTIME) or 0) + (procstat.number(stat, procstat.STIME) or 0)


def thread_part(name: str) -> str:
    return next((part for part, starts in THREAD_PARTS if name.startswith(starts)), "other JVM threads")


class ThreadCpu:
    """Reads, every --thread-sample seconds, the CPU time of every thread of the
    processes below one pid (Spark's JVMs and Python), keeping each thread's
    last reading; a thread that ends between readings loses at most one period.

    A JVM's reaped children (cutime + cstime) are pgrep's, except the processes
    tracked here (local-cluster's executors are the driver's children): so a
    JVM's children are read only while every tracked child it had is alive."""

    def __init__(self, root_pid: int, period_s: float = 1.0, proc: str = "/proc"):
        self.root_pid, self.period_s, self.proc = root_pid, period_s, proc
        self.threads: dict[tuple[int, int], tuple[str, int]] = {}  # (pid, tid) -> (part, ticks)
        self.reaped: dict[int, int] = {}  # JVM pid -> cutime + cstime ticks
        self.kids: dict[int, set[int]] = {}  # pid -> tracked children seen
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="thread-cpu", daemon=True)

    def __enter__(self) -> "ThreadCpu":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.period_s)

    def descendants(self) -> list[int]:
        """The root and every process below it (a child is listed under the thread that started it)."""
        return procstat.descendants(self.root_pid, self.proc)

    def per_thread(self, pid: int, name: str):
        """(tid, text of /proc/PID/task/TID/NAME) for each thread of a process still there."""
        try:
            tids = os.listdir(f"{self.proc}/{pid}/task")
        except OSError:
            return
        for tid in tids:
            try:
                with open(f"{self.proc}/{pid}/task/{tid}/{name}", encoding="utf-8", errors="replace") as f:
                    yield int(tid), f.read()
            except OSError:
                continue

    def sample(self) -> None:
        stats = {pid: stat for pid in self.descendants() if (stat := procstat.read(pid, self.proc))}
        for pid, stat in stats.items():
            parent = procstat.ppid(stat)
            if parent in stats and pid != self.root_pid:
                self.kids.setdefault(parent, set()).add(pid)
        for pid, stat in stats.items():
            comm = stat[stat.find("(") + 1:stat.rfind(")")]
            if comm != "java":
                if comm.startswith("python"):
                    self.threads[(pid, pid)] = ("Python", cpu_ticks(stat))
                continue
            if self.kids.get(pid, set()) <= stats.keys():
                self.reaped[pid] = (procstat.number(stat, 13) or 0) + (procstat.number(stat, 14) or 0)
            for tid, line in self.per_thread(pid, "stat"):
                self.threads[(pid, tid)] = (thread_part(line[line.find("(") + 1:line.rfind(")")]), cpu_ticks(line))

    def seconds_by_part(self) -> dict[str, float]:
        out = dict.fromkeys(PART_NAMES, 0.0)
        for part, ticks in self.threads.values():
            out[part] += ticks / procstat.CLOCK_TICKS
        out[CHILDREN] = sum(self.reaped.values()) / procstat.CLOCK_TICKS
        return out


def run_once(run: Run, conf: dict[str, str], workload: tuple[Path, list[str]], last_name: str, passes: int,
             log: Path, stack_pids: list[int], settings=None, thread_sample_s: float = 1.0) -> None:
    script, script_args = workload
    argv = submit_argv(script, MASTER, conf, script_args)
    spark_before, self_before = own_cpu_seconds()
    stack_before, busy_before = process_cpu_seconds(stack_pids), busy_seconds()
    forks_before, threads_before = TASKS.now()
    mark = TASKS.mark() if TASKS.proc is not None else 0
    started = time.monotonic()
    pass_s: dict[int, float] = {}
    profiler = None
    with open(log, "w") as err:
        proc = subprocess.Popen(argv, env=spark_env(log), stdout=subprocess.PIPE, stderr=err,
                                stdin=subprocess.DEVNULL, text=True, cwd=log.parent)
        with ThreadCpu(proc.pid, thread_sample_s) as threads:
            for line in proc.stdout:
                if line.startswith("APP_ID "):  # the task-heavy job
                    run.app_id = line.split()[1]
                elif line.startswith("JOB_SECONDS "):
                    run.query_s["job"] = [float(line.split()[1])]
                    print(f"      job {float(line.split()[1]):6.2f} s", flush=True)
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if event.get("event") == "app":
                    run.app_id = event["app_id"]
                elif event.get("event") == "query":
                    if event.get("status") != "ok":
                        proc.kill()
                        raise SystemExit(f"{event['name']} failed in the {run.arm} arm: {event.get('error')}; "
                                         f"see {log}")
                    rep = event["repetition"]
                    pass_s[rep] = pass_s.get(rep, 0.0) + event["seconds"]
                    if rep > 1:
                        run.query_s.setdefault(event["name"], []).append(event["seconds"])
                    if event["name"] == last_name:  # a pass ends with the plan's last query
                        label = "warm-up" if rep == 1 else f"pass {rep - 1}/{passes}"
                        print(f"      {label:9} {pass_s[rep]:6.2f} s", flush=True)
                        if rep == 1 and run.arm.split("#")[0] == "profiling" and profiler is None:
                            # CPU profiles of every executor through the measured passes.
                            profiler = subprocess.Popen(
                                [sys.executable, "-m", "sparkscope", "profile", "--app", run.app_id, "--executor",
                                 "all", "--seconds", "600", "--mode", "cpu", "--out", str(log.parent / "profiles")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                                env={**os.environ, **(settings_environ(settings) if settings else {})})
            code = proc.wait()
        run.part_s = threads.seconds_by_part()
    if profiler is not None:
        profiler.kill()
        profiler.wait()
    run.wall_s = time.monotonic() - started
    forks_after, threads_after = TASKS.now()
    run.forks = forks_after - forks_before
    if threads_before is not None and threads_after is not None:
        run.threads = threads_after - threads_before
    tree = TASKS.tree(proc.pid, mark)
    if tree is not None:  # what spark-submit's own tree made, the rest of the machine left out
        run.forks, run.threads, run.programs = tree
    spark_after, self_after = own_cpu_seconds()
    run.cpu_s = spark_after - spark_before
    run.stack_cpu_s = process_cpu_seconds(stack_pids) - stack_before
    busy = busy_seconds() - busy_before
    run.other_cores = max(0.0, busy - run.cpu_s - run.stack_cpu_s - (self_after - self_before)) / run.wall_s
    if code != 0:
        raise SystemExit(f"spark-submit exited {code} in the {run.arm} arm; see {log}")


def quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


def compare(runs: list[Run], arms: list[str], label: str) -> None:
    """Each arm against the first: ratio of medians, 95 % bootstrap interval."""
    by_arm = {arm: [r for r in runs if r.arm == arm] for arm in arms}
    if not all(len(rs) >= 2 for rs in by_arm.values()):
        print(f"  {label}: too few runs to compare")
        return
    base = arms[0]
    print(f"  {label} (against {base}; 95 % bootstrap interval):")
    for arm in arms[1:]:
        cells = []
        for what, attr in (("query time", "total_s"), ("Spark CPU", "cpu_s")):
            point, low, high = bootstrap_ratio([getattr(r, attr) for r in by_arm[base]],
                                               [getattr(r, attr) for r in by_arm[arm]])
            cells.append(f"{what} {(point - 1) * 100:+5.1f} % [{(low - 1) * 100:+.1f}, {(high - 1) * 100:+.1f}]")
        forks = statistics.median(r.forks for r in by_arm[arm]) - statistics.median(r.forks for r in by_arm[base])
        split = all(r.threads is not None for r in by_arm[arm] + by_arm[base])
        print(f"    {arm:10} " + "   ".join(cells) + f"   {'processes' if split else 'processes and threads'} "
              f"{forks:+.0f}")


def bootstrap_difference(base: list[float], other: list[float], resamples: int = 2000,
                         seed: int = 1) -> tuple[float, float, float]:
    """Difference of medians other - base and its 95 % interval, resampling each arm's runs."""
    rng = random.Random(seed)
    diffs = sorted(statistics.median(rng.choices(other, k=len(other))) -
                   statistics.median(rng.choices(base, k=len(base))) for _ in range(resamples))
    return (statistics.median(other) - statistics.median(base), diffs[int(0.025 * resamples)],
            diffs[int(0.975 * resamples) - 1])


def parts(by_arm: dict[str, list[Run]], arms: list[str]) -> None:
    """Median CPU seconds per run by part of Spark's processes, and each arm's
    difference from the first as a share of the first's Spark CPU, with a 95 %
    bootstrap interval."""
    base = arms[0]
    base_cpu = statistics.median(r.cpu_s for r in by_arm[base])
    print(f"Where Spark's CPU went, median seconds per run by thread; for each arm its difference from "
          f"{base} as a share of {base}'s {base_cpu:.1f} s of Spark CPU [95 % interval]:")
    print(f"  {'part':18}{base:>8}" + "".join(f"{arm:>30}" for arm in arms[1:]))

    def value(r: Run, part: str) -> float:
        if part == "all threads":
            return sum(r.part_s.values())
        if part == "sparkscope's own":
            return sum(r.part_s.get(p, 0.0) for p in OWN_WORK)
        return r.part_s.get(part, 0.0)

    for part in PART_NAMES + ("sparkscope's own", "all threads"):
        cells = [f"{statistics.median(value(r, part) for r in by_arm[base]):8.2f}"]
        for arm in arms[1:]:
            point, low, high = bootstrap_difference([value(r, part) for r in by_arm[base]],
                                                    [value(r, part) for r in by_arm[arm]])
            med = statistics.median(value(r, part) for r in by_arm[arm])
            cells.append(f"{med:8.2f} {point / base_cpu * 100:+5.1f} [{low / base_cpu * 100:+.1f},"
                         f"{high / base_cpu * 100:+.1f}]".rjust(30))
        print(f"  {part:18}" + "".join(cells))


def report(runs: list[Run], arms: list[str], queries: list[str], args: argparse.Namespace) -> None:
    what = (f"TPC-DS sf={tpcds.scale_label(args.scale)}, {len(queries)} queries x {args.passes} measured "
            f"pass(es) per run after a warm-up pass" if args.workload == "tpcds"
            else f"one job of {args.tasks:,} tiny tasks per run")
    print(f"\n{what}, {MASTER}, {args.rounds} rounds, arms {', '.join(arms)} in rotated order.")
    if args.with_conf:
        print("every arm but the first changed by: " + ", ".join(f"{k}={v}" for k, v in args.with_conf))
    print("Query time per run, s (other: cores used by other work during the run; * above "
          f"{QUIET_CORES}):")
    print("  round  " + "  ".join(f"{arm:>22}" for arm in arms))
    for n in range(1, args.rounds + 1):
        cells = []
        for arm in arms:
            run = next((r for r in runs if r.round == n and r.arm == arm), None)
            cells.append(f"{run.total_s:8.2f} ({run.other_cores:4.2f}){'*' if run.disturbed else ' '}"
                         if run else "-")
        print(f"  {n:5}  " + "  ".join(f"{c:>22}" for c in cells))
    by_arm = {arm: [r for r in runs if r.arm == arm] for arm in arms}
    for arm, rs in by_arm.items():
        print(f"  {arm:10} median query time {statistics.median(r.total_s for r in rs):7.2f} s, Spark CPU "
              f"{statistics.median(r.cpu_s for r in rs):6.1f} s, spark-submit {statistics.median(r.wall_s for r in rs):5.1f} s, "
              f"{started_text(rs)}, "
              f"Telegraf + InfluxDB {statistics.median(r.stack_cpu_s for r in rs):.1f} s CPU")
    if all(r.programs or r.forks == 0 for r in runs) and any(r.programs for r in runs):
        print("Programs Spark's processes ran per run (median; spark-submit's tree, bench/forks.bt):")
        for arm, rs in by_arm.items():
            names = sorted({name for r in rs for name in r.programs})
            print(f"  {arm:10} " + ", ".join(
                f"{Path(name).name} {statistics.median(r.programs.get(name, 0) for r in rs):g}" for name in names))
    compare(runs, arms, "all rounds")
    parts(by_arm, arms)
    quiet = {r.round for r in runs} - {r.round for r in runs if r.disturbed}
    if len(quiet) < args.rounds:
        compare([r for r in runs if r.round in quiet], arms, f"undisturbed rounds only ({len(quiet)})")
    if args.workload == "tpcds":
        print("Per query, median seconds over every measured pass: " + ", ".join(arms))
        for name in queries:
            meds = [statistics.median(t for r in by_arm[arm] for t in r.query_s.get(name, [])) for arm in arms]
            print(f"  {name:5} " + " ".join(f"{m:7.3f}" for m in meds))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=command._scale_arg, default=0.1,
                        help="TPC-DS scale factor (default %(default)s; data cached per scale)")
    parser.add_argument("--queries", default=DEFAULT_QUERIES, metavar="LIST",
                        help="comma list of TPC-DS queries (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=6,
                        help="rounds; each runs every arm once, in rotated order (default %(default)s)")
    parser.add_argument("--arms", default="plain,shipped",
                        help=f"comma list of arms, the first the baseline: {', '.join(ARM_NAMES)}; a name twice "
                             "is an A/A comparison (default %(default)s)")
    parser.add_argument("--workload", choices=("tpcds", "tasks"), default="tpcds",
                        help="the demo's TPC-DS queries, or one job of --tasks tiny tasks (default %(default)s)")
    parser.add_argument("--tasks", type=int, default=20_000, help="tasks of the task-heavy job (default %(default)s)")
    parser.add_argument("--passes", type=int, default=2,
                        help="measured passes over the queries per run, after one warm-up pass "
                             "(default %(default)s)")
    parser.add_argument("--quiet-wait", type=float, default=120, metavar="SECONDS",
                        help="before each run, wait up to this long for other work on the machine "
                             "to stop (default %(default)s; 0: do not wait)")
    parser.add_argument("--json", type=Path, metavar="FILE",
                        help="also write every run's figures to FILE (JSON), for later analysis")
    parser.add_argument("--report", type=Path, metavar="FILE",
                        help="run nothing: print the summary of the runs --json wrote to FILE (give the same "
                             "--workload, --tasks and --queries)")
    parser.add_argument("--thread-sample", type=float, default=1.0, metavar="SECONDS",
                        help="how often each Spark thread's CPU time is read (default %(default)s)")
    parser.add_argument("--with-conf", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                        help="change a Spark setting of every arm but the first, e.g. "
                             "spark.executor.metrics.pollingInterval=5s (an empty value removes it; repeatable)")
    args = parser.parse_args()
    if args.rounds < 1 or args.passes < 1:
        parser.error("--rounds and --passes must be >= 1")

    arms = labelled([a.strip() for a in args.arms.split(",") if a.strip()])
    if len(arms) < 2:
        parser.error("--arms needs at least two arms")
    if args.report:
        runs = [Run(**r) for r in json.loads(args.report.read_text())]
        arms = list(dict.fromkeys(r.arm for r in runs))
        args.rounds = max(r.round for r in runs)
        report(runs, arms, [q for q in args.queries.split(",")] if args.workload == "tpcds" else ["job"], args)
        return 0
    base = load_settings()
    names = tpcds.select_queries(args.queries, tpcds.available_queries()) if args.workload == "tpcds" else ["job"]
    queries = tpcds.load_queries(names) if args.workload == "tpcds" else []
    data = tpcds.ensure_data(base.cache_dir, args.scale) if args.workload == "tpcds" else None
    jar = ensure_annotator_jar(ROOT)
    runs: list[Run] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sparkscope-bench-overhead-") as tmp, \
            throwaway_stack(Path(tmp) / "stack", only=("influxdb", "telegraf")) as settings:
        plan_path = Path(tmp) / "plan.json"
        if args.workload == "tpcds":
            plan_path.write_text(json.dumps({
                "data_dir": str(data), "tables": list(tpcds.TABLES), "repetitions": args.passes + 1,
                "schema_cache": str(tpcds.schema_cache(data)),
                "queries": [{"name": q.name, "sql": q.sql} for q in queries]}))
            workload = (demo_run.DRIVER_SCRIPT, [str(plan_path)])
        else:
            workload = (ROOT / "bench" / "jobs" / "many_tasks.py", [str(args.tasks)])
        stack_pids = [PidFile(settings.state_dir, n).running_pid() for n in ("influxdb", "telegraf")]
        why = TASKS.start()
        atexit.register(TASKS.stop)  # bpftrace runs in a session of its own: never left behind
        print("processes and threads are counted apart, those of spark-submit's tree (bench/forks.bt)"
              if why is None else
              f"processes and threads are counted together (/proc/stat): {why}", flush=True)
        print(f"stack: InfluxDB {settings.influx_url}, Graphite {settings.graphite_host}:"
              f"{settings.graphite_port}; Spark logs in {tmp}", flush=True)
        for n in range(1, args.rounds + 1):
            for arm in round_order(arms, n):
                run = Run(arm, n)
                print(f"round {n}/{args.rounds} {arm:7} sparkscope ({time.monotonic() - started:5.0f} s "
                      f"elapsed)", flush=True)
                if args.quiet_wait > 0:
                    wait_for_quiet(args.quiet_wait)
                changes = dict(args.with_conf) if arm != arms[0] else {}
                run_once(run, conf_for(arm, settings, jar, changes), workload, names[-1], args.passes,
                         Path(tmp) / f"round{n}-{arm.replace('#', '-')}.log", [p for p in stack_pids if p], settings,
                         args.thread_sample)
                runs.append(run)
                print(f"      queries {run.total_s:6.2f} s, spark-submit {run.wall_s:5.1f} s, Spark CPU "
                      f"{run.cpu_s:5.1f} s, {started_text([run])}, other work {run.other_cores:4.2f} cores"
                      f"{' (disturbed)' if run.disturbed else ''}  ({run.app_id})", flush=True)
    TASKS.stop()
    report(runs, arms, names, args)
    if args.json:
        args.json.write_text(json.dumps([vars(r) for r in runs], indent=1))
        print(f"runs written to {args.json}")
    print(f"\nbenchmark time {(time.monotonic() - started) / 60:.1f} min")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
