"""What `./sparkscope report` costs on a long run: a 7-day application of
100 executors (generated), reported by the real CLI as a user runs it.

The run is written as the stack holds it after a week: the 10-minute rollup
(as its continuous queries write it) for all but the last hour, raw samples
at a 10 s period for the last hour, the annotator's application, executor
and peak points. The report reads the rollup for the long part and raw
samples for the tail (report/run_facts.py), so what it reads grows with the
executors, not the run's length. Prints the report's wall time and the peak
memory (max RSS) of the CLI process, median of --repeat runs.

    .venv/bin/python bench/report_long_run.py [--executors 100] [--days 7] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sparkscope.report.run_facts import SERIES, TOTALS
from sparkscope.store import influx
from sparkscope.stack import rollups
from sparkscope_testkit.sandbox import settings_environ, throwaway_stack

ROOT = Path(__file__).resolve().parents[1]

MEASUREMENTS = (*SERIES, *TOTALS, "heap.max", "pools.G1-Old-Gen.used-after-gc")


def write(settings, lines: list[str], policy: str | None = None) -> None:
    for chunk in range(0, len(lines), 50_000):
        influx.write(settings.influx_writer, settings.database, "\n".join(lines[chunk:chunk + 50_000]),
                     policy=policy)


def generate(settings, app: str, executors: int, days: float) -> int:
    now = int(time.time()) // 600 * 600
    start, end = now - int(days * 86_400), now - 60
    ids = ["driver", *map(str, range(executors))]
    written = 0
    rolled = []
    for e in ids:
        for m in MEASUREMENTS:
            series = f"{m},applicationid={app},executorid={e},namespace=executor"
            for at in range(start, end - 3600, 600):
                rolled.append(f"{series} value={(at - start) + hash(e) % 1000},mean=1 {at}")
        if len(rolled) > 200_000:
            write(settings, rolled, rollups.LEVELS[2].policy)
            written += len(rolled)
            rolled = []
    write(settings, rolled, rollups.LEVELS[2].policy)
    written += len(rolled)
    raw = []
    for e in ids:
        for m in MEASUREMENTS:
            series = f"{m},applicationid={app},executorid={e},namespace=executor"
            raw += [f"{series} value={t - start} {t}" for t in range(end - 3600, end, 10)]
        if len(raw) > 200_000:
            write(settings, raw)
            written += len(raw)
            raw = []
    write(settings, raw)
    written += len(raw)
    peaks = [f'sparkscope_executor_peaks,applicationid={app} executor_id="{e}",JVMHeapMemory=5e8,'
             f'OnHeapExecutionMemory=1e8,OnHeapStorageMemory=1e8,OnHeapUnifiedMemory=2e8,'
             f'ProcessTreeJVMRSSMemory=9e8 {end}' for e in ids]
    write(settings, peaks + [
        f'sparkscope_memory_conf,applicationid={app} spark.master="yarn",spark.executor.memory="4g" {start}',
        f'sparkscope_application,applicationid={app} status="FINISHED",app_name="weekly",'
        f'end_time_ms={end * 1000}i,duration_ms={(end - start) * 1000}i {start}'])
    return written + len(peaks) + 2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--executors", type=int, default=100)
    parser.add_argument("--days", type=float, default=7)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="sparkscope-bench-report-") as tmp, \
            throwaway_stack(Path(tmp) / "state", only=("influxdb",), SPARKSCOPE_RETENTION="30d") as settings:
        app = "app-20261118000000-0007"
        began = time.monotonic()
        points = generate(settings, app, args.executors, args.days)
        print(f"wrote {points:,} points ({args.days:g} days, {args.executors} executors + driver) in "
              f"{time.monotonic() - began:.0f} s", flush=True)
        env = {**os.environ, **settings_environ(settings)}
        walls, rss = [], []
        for n in range(args.repeat):
            before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            t0 = time.monotonic()
            done = subprocess.run([str(ROOT / "sparkscope"), "report", app, "--out", str(Path(tmp) / f"r{n}")],
                                  env=env, capture_output=True, text=True, timeout=600)
            walls.append(time.monotonic() - t0)
            # ru_maxrss of children is the largest child so far (KiB): the CLI, each run alike.
            rss.append(max(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, before) / 1024)
            if done.returncode != 0:
                print(done.stdout[-2000:], done.stderr[-2000:])
                return 1
            print(f"  report {n + 1}: {walls[-1]:.1f} s", flush=True)
        print(f"report of a {args.days:g}-day run, {args.executors} executors: median {statistics.median(walls):.1f} s "
              f"(runs {', '.join(f'{w:.1f}' for w in walls)}), peak RSS of the CLI {max(rss):.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
