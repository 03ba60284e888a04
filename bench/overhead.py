#!/usr/bin/env python3
"""Spark's overhead from sparkscope: the Graphite sink plus the annotator.

The demo's TPC-DS queries (data generated once per scale and cached, the
Spark-dialect query files) run in local-cluster[2,1,1024], alternately
without sparkscope (plain Spark) and with it (spark-conf/spark-defaults.conf
pointed at a throwaway stack, plus the annotator jar and listener), in ABBA
order (round 1: without, with; round 2: with, without; ...) so that a drift
in the machine's load falls on both arms alike.

Each run is one Spark application: a warm-up pass over the queries (JIT,
class loading, file caches), then --passes measured passes. A run's figure is
the sum of its measured query times, timed in the driver around each
query's collect(); JVM start-up and stop, which vary by seconds on a busy
2-core machine, stay out of it and are shown apart (the whole spark-submit
time). Printed as it goes: every pass of every run; at the end the median of
each arm, the ratio of the medians, the per-round ratio (with / without,
each round's two runs side by side) with its spread, per-query medians, and
the CPU time of all Spark processes per run.

    .venv/bin/python bench/overhead.py --scale 0.1 --queries q3,q7,q42 --rounds 6
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from sparkscope.build.annotator_jar import ensure_annotator_jar  # noqa: E402
from sparkscope.demo import command, tpcds  # noqa: E402
from sparkscope.demo import run as demo_run  # noqa: E402
from sparkscope.demo.options import DemoOptions  # noqa: E402
from sparkscope.spark.conf import annotator_properties, sparkscope_properties  # noqa: E402
from sparkscope.spark.submit import spark_env, submit_argv  # noqa: E402
from sparkscope.stack.native import PidFile  # noqa: E402
from sparkscope.stack.settings import load_settings  # noqa: E402
from support.sandbox import throwaway_stack  # noqa: E402

MASTER = "local-cluster[2,1,1024]"
# Ten quick queries at sf=0.1 (0.6 to 3 s each here, warm): star joins and
# aggregations over the sales tables, one with a window function (q98).
DEFAULT_QUERIES = "q3,q7,q19,q42,q43,q52,q55,q68,q96,q98"
ARMS = ("without", "with")


@dataclass
class Run:
    arm: str
    round: int
    app_id: str = ""
    query_s: dict[str, list[float]] = field(default_factory=dict)  # measured passes only
    wall_s: float = 0.0
    cpu_s: float = 0.0  # all Spark processes (driver, executors, Python workers)
    stack_cpu_s: float = 0.0  # Telegraf and InfluxDB
    other_cores: float = 0.0  # everything else on the machine, mean cores busy during the run
    forks: int = 0  # processes started on the machine during the run (Spark's own, mostly)

    @property
    def disturbed(self) -> bool:
        return self.other_cores > QUIET_CORES

    @property
    def total_s(self) -> float:
        return sum(sum(times) for times in self.query_s.values())


def conf_for(arm: str, settings, jar: Path, with_conf: dict[str, str],
             base_conf: dict[str, str] | None = None) -> dict[str, str]:
    """The demo's Spark settings; for 'without', minus everything sparkscope adds
    (or, given base_conf, sparkscope as shipped with those changes: to weigh one
    part of it, such as the profiler plugin); for 'with', plus the --with-conf
    changes (to find which setting costs). An empty value removes the key."""
    options = DemoOptions(executors=2, executor_memory_mb=1024)
    conf = demo_run.spark_conf(settings, options, jar)
    conf["spark.app.name"] = f"sparkscope-bench-overhead-{arm}"
    if arm == "without" and base_conf:
        conf.update(base_conf)
    elif arm == "without":
        ours = set(sparkscope_properties(settings)) | set(annotator_properties(settings, jar))
        conf = {k: v for k, v in conf.items() if k not in ours}
    else:
        conf.update(with_conf)
    return {k: v for k, v in conf.items() if v != ""}


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
    """Processes forked on the machine since boot (/proc/stat), e.g. Spark's pgrep calls."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("processes "):
            return int(line.split()[1])
    return 0


def process_cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(stat[11]) + int(stat[12])) / CLOCK_TICKS
    return total


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


def run_once(run: Run, conf: dict[str, str], plan_path: Path, last_name: str, passes: int,
             log: Path, stack_pids: list[int]) -> None:
    argv = submit_argv(demo_run.DRIVER_SCRIPT, MASTER, conf, [str(plan_path)])
    spark_before, self_before = own_cpu_seconds()
    stack_before, busy_before = process_cpu_seconds(stack_pids), busy_seconds()
    forks_before = processes_started()
    started = time.monotonic()
    pass_s: dict[int, float] = {}
    with open(log, "w") as err:
        proc = subprocess.Popen(argv, env=spark_env(), stdout=subprocess.PIPE, stderr=err,
                                stdin=subprocess.DEVNULL, text=True, cwd=log.parent)
        for line in proc.stdout:
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
        code = proc.wait()
    run.wall_s = time.monotonic() - started
    run.forks = processes_started() - forks_before
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


def summarize(runs: list[Run], label: str) -> None:
    by_arm = {arm: [r for r in runs if r.arm == arm] for arm in ARMS}
    if not all(by_arm.values()):
        print(f"  {label}: not enough runs")
        return
    med = {arm: statistics.median(r.total_s for r in rs) for arm, rs in by_arm.items()}
    pairs = []
    for n in sorted({r.round for r in runs}):
        pair = {r.arm: r for r in runs if r.round == n}
        if set(pair) == set(ARMS):
            pairs.append(pair["with"].total_s / pair["without"].total_s)
    print(f"  {label}:")
    for arm, rs in by_arm.items():
        totals = [r.total_s for r in rs]
        print(f"    {arm:7} sparkscope: median {med[arm]:7.2f} s over {len(rs)} runs "
              f"(min {min(totals):.2f}, max {max(totals):.2f})")
    ratio = med["with"] / med["without"]
    print(f"    ratio of medians with/without: {ratio:.4f}  ({(ratio - 1) * 100:+.1f} %)")
    if pairs:
        q1, q3 = quartiles(pairs)
        print(f"    per-round ratio: median {statistics.median(pairs):.4f}, IQR {q1:.4f}..{q3:.4f}, "
              f"min {min(pairs):.4f}, max {max(pairs):.4f} over {len(pairs)} rounds")


def report(runs: list[Run], queries: list[str], args: argparse.Namespace) -> None:
    print(f"\nTPC-DS sf={tpcds.scale_label(args.scale)}, {len(queries)} queries x {args.passes} measured "
          f"pass(es) per run after a warm-up pass, {MASTER}, {args.rounds} rounds in ABBA order.")
    if args.with_conf:
        print("'with' arm changed by: " + ", ".join(f"{k}={v}" for k, v in args.with_conf))
    if args.base_conf:
        print("'without' arm: sparkscope as shipped, changed by: "
              + ", ".join(f"{k}={v}" for k, v in args.base_conf))
    print("Query time per run (sum of the measured passes):")
    print("  round  " + "  ".join(f"{arm:>22}" for arm in ARMS) + "   with/without")
    for n in range(1, args.rounds + 1):
        pair = {r.arm: r for r in runs if r.round == n}
        cells = [f"{pair[a].total_s:8.2f} s ({pair[a].other_cores:4.2f} other){'*' if pair[a].disturbed else ' '}"
                 for a in ARMS]
        print(f"  {n:5}  " + "  ".join(f"{c:>22}" for c in cells) +
              f"   {pair['with'].total_s / pair['without'].total_s:.4f}")
    print(f"  (other: cores used by other work on the machine during the run; * above {QUIET_CORES})")
    summarize(runs, "all rounds")
    quiet_rounds = {r.round for r in runs} - {r.round for r in runs if r.disturbed}
    if len(quiet_rounds) < args.rounds:
        summarize([r for r in runs if r.round in quiet_rounds],
                  f"undisturbed rounds only ({len(quiet_rounds)} of {args.rounds})")
    by_arm = {arm: [r for r in runs if r.arm == arm] for arm in ARMS}
    print("Per query, median seconds over every measured pass (without, with, ratio):")
    for name in queries:
        w = statistics.median(t for r in by_arm["without"] for t in r.query_s.get(name, []))
        s = statistics.median(t for r in by_arm["with"] for t in r.query_s.get(name, []))
        print(f"  {name:5} {w:7.3f} {s:7.3f}  {s / w:.3f}")

    def med(arm: str, attr: str) -> float:
        return statistics.median(getattr(r, attr) for r in by_arm[arm])

    print(f"Whole spark-submit (start-up, warm-up, passes, stop), median: without {med('without', 'wall_s'):.1f} s, "
          f"with {med('with', 'wall_s'):.1f} s, ratio {med('with', 'wall_s') / med('without', 'wall_s'):.3f}")
    print(f"CPU of all Spark processes per run, median: without {med('without', 'cpu_s'):.1f} s, "
          f"with {med('with', 'cpu_s'):.1f} s, ratio {med('with', 'cpu_s') / med('without', 'cpu_s'):.3f}; "
          f"Telegraf + InfluxDB: {med('without', 'stack_cpu_s'):.1f} s idle, {med('with', 'stack_cpu_s'):.1f} s "
          f"while receiving")
    print(f"Processes started on the machine per run, median: without {med('without', 'forks'):.0f}, "
          f"with {med('with', 'forks'):.0f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=command._scale_arg, default=0.1,
                        help="TPC-DS scale factor (default %(default)s; data cached per scale)")
    parser.add_argument("--queries", default=DEFAULT_QUERIES, metavar="LIST",
                        help="comma list of TPC-DS queries (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=6,
                        help="rounds; each runs both arms once, in ABBA order (default %(default)s)")
    parser.add_argument("--passes", type=int, default=2,
                        help="measured passes over the queries per run, after one warm-up pass "
                             "(default %(default)s)")
    parser.add_argument("--quiet-wait", type=float, default=120, metavar="SECONDS",
                        help="before each run, wait up to this long for other work on the machine "
                             "to stop (default %(default)s; 0: do not wait)")
    parser.add_argument("--with-conf", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                        help="change a Spark setting of the 'with' arm only, e.g. "
                             "spark.executor.processTreeMetrics.enabled=false (repeatable)")
    parser.add_argument("--base-conf", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                        help="make the 'without' arm sparkscope as shipped with this change instead of plain "
                             "Spark, e.g. spark.plugins= (no profiler plugin; an empty value removes the key; "
                             "repeatable)")
    args = parser.parse_args()
    if args.rounds < 1 or args.passes < 1:
        parser.error("--rounds and --passes must be >= 1")

    base = load_settings()
    names = tpcds.select_queries(args.queries, tpcds.available_queries())
    queries = tpcds.load_queries(names)
    data = tpcds.ensure_data(base.cache_dir, args.scale)
    jar = ensure_annotator_jar(ROOT)
    runs: list[Run] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sparkscope-bench-overhead-") as tmp, \
            throwaway_stack(Path(tmp) / "stack", only=("influxdb", "telegraf")) as settings:
        plan_path = Path(tmp) / "plan.json"
        plan_path.write_text(json.dumps({
            "data_dir": str(data), "tables": list(tpcds.TABLES), "repetitions": args.passes + 1,
            "schema_cache": str(tpcds.schema_cache(data)),
            "queries": [{"name": q.name, "sql": q.sql} for q in queries]}))
        stack_pids = [PidFile(settings.state_dir, n).running_pid() for n in ("influxdb", "telegraf")]
        print(f"stack: InfluxDB {settings.influx_url}, Graphite {settings.graphite_host}:"
              f"{settings.graphite_port}; Spark logs in {tmp}", flush=True)
        for n in range(1, args.rounds + 1):
            order = ARMS if n % 2 == 1 else tuple(reversed(ARMS))
            for arm in order:
                run = Run(arm, n)
                print(f"round {n}/{args.rounds} {arm:7} sparkscope ({time.monotonic() - started:5.0f} s "
                      f"elapsed)", flush=True)
                if args.quiet_wait > 0:
                    wait_for_quiet(args.quiet_wait)
                run_once(run, conf_for(arm, settings, jar, dict(args.with_conf), dict(args.base_conf)), plan_path, names[-1], args.passes,
                         Path(tmp) / f"round{n}-{arm}.log", [p for p in stack_pids if p])
                runs.append(run)
                print(f"      queries {run.total_s:6.2f} s, spark-submit {run.wall_s:5.1f} s, Spark CPU "
                      f"{run.cpu_s:5.1f} s, {run.forks} processes started, other work {run.other_cores:4.2f} cores"
                      f"{' (disturbed)' if run.disturbed else ''}  ({run.app_id})", flush=True)
    report(runs, names, args)
    print(f"\nbenchmark time {(time.monotonic() - started) / 60:.1f} min")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
