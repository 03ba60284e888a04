#!/usr/bin/env python3
"""What one refresh of `sparkscope top` costs InfluxDB with many executors.

A throwaway InfluxDB (src/sparkscope_testkit/sandbox.py) gets a running application
of N executors (default 500) plus a driver: every measurement top reads,
one sample each per sink period (5 s) over the last --minutes, as Telegraf
stores Spark's Graphite lines; and what the annotator writes (the
application, every executor added with its cores, a few hundred stages,
jobs and queries, some RUNNING). Then top's own reader (sparkscope.top.data)
refreshes the run view --repeat times and the disks view as often, as the
read-only user; the script prints the median and p95 of a whole refresh and
of each of its queries (queries with the same first words are summed:
the reads for every executor and for the rows on screen). The issue's
target: a refresh under 100 ms. The time of a whole refresh includes
top's own Python work; the queries' is what InfluxDB and the HTTP hop cost.

    .venv/bin/python bench/top_refresh.py --executors 500 --repeat 21
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from sparkscope.store import influx
from sparkscope.top import data
from sparkscope_testkit.sandbox import throwaway_stack

PERIOD_S = 5
APP = "app-20990101000000-0001"


def spark_lines(executors: int, minutes: int, now: int) -> list[str]:
    rnd = random.Random(1)
    ids = ["driver"] + [str(n) for n in range(executors)]
    lines = []
    for executor in ids:
        tags = f"applicationid={APP},executorid={executor},host=bench"
        counters = {m: 0.0 for m in data.COUNTERS}
        for t in range(now - minutes * 60, now + 1, PERIOD_S):
            for measurement in data.GAUGES:
                value = 4 * 2**30 if measurement == "heap.max" else rnd.randint(0, 3 * 2**30)
                lines.append(f"{measurement},{tags} value={value} {t}")
            for measurement in counters:
                counters[measurement] += rnd.randint(0, 50 * 2**20)
                lines.append(f"{measurement},{tags} value={counters[measurement]} {t}")
    return lines


def annotator_lines(executors: int, now: int) -> list[str]:
    app = f"applicationid={APP}"
    start_ms = (now - 3600) * 1000
    lines = [f"sparkscope_application,{app},status=RUNNING app_name=\"bench\" {start_ms}"]
    lines += [f"sparkscope_executor,{app},event=added executor_id=\"{n}\",cores=4i {start_ms + 1000 + n}"
              for n in range(executors)]
    for stage in range(300):
        at = start_ms + stage * 10_000
        lines.append(f"sparkscope_stage,{app},status=RUNNING stage_id={stage}i,attempt=0i,"
                     f"text=\"stage {stage}.0 running\" {at}")
        if stage < 297:
            lines.append(f"sparkscope_stage,{app},status=SUCCEEDED,straggler={str(stage % 50 == 0).lower()} "
                         f"stage_id={stage}i,attempt=0i,name=\"s\",end_time_ms={at + 9000}i,text=\"stage\" {at}")
        if stage % 3 == 0:
            for kind, key in (("sparkscope_job", "job_id"), ("sparkscope_query", "execution_id")):
                lines.append(f"{kind},{app},status=RUNNING {key}={stage}i,text=\"running\" {at}")
                lines.append(f"{kind},{app},status=SUCCEEDED {key}={stage}i,text=\"done\" {at}")
    return lines


def write(settings, lines: list[str], precision: str) -> None:
    for n in range(0, len(lines), 50_000):
        influx.write(settings.influx_writer, settings.database, "\n".join(lines[n:n + 50_000]), precision)


def timed(reader: data.TopReader, call) -> tuple[float, dict[str, float]]:
    """One call's time, and each query's inside it (keyed by its first words)."""
    each: dict[str, float] = {}
    plain = reader.q

    def q(statement: str):
        t0 = time.perf_counter()
        try:
            return plain(statement)
        finally:
            key = " ".join(statement.split()[:3])[:60]
            each[key] = each.get(key, 0.0) + time.perf_counter() - t0

    reader.q = q
    t0 = time.perf_counter()
    call()
    total = time.perf_counter() - t0
    reader.q = plain
    return total, each


def report(name: str, runs: list[tuple[float, dict[str, float]]]) -> None:
    totals = sorted(t for t, _ in runs)
    p95 = totals[min(len(totals) - 1, int(len(totals) * 0.95))]
    print(f"{name}: median {statistics.median(totals) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms "
          f"({len(totals)} refreshes)")
    for key in runs[0][1]:
        values = [each.get(key, 0.0) for _, each in runs]
        print(f"    {statistics.median(values) * 1000:7.1f} ms  {key}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--executors", type=int, default=500)
    parser.add_argument("--minutes", type=int, default=10, help="of samples before now (default 10)")
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--rows", type=int, default=50,
                        help="executor rows the screen shows (a 200x50 terminal: 50; 80x24: 24)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sparkscope-bench-top-") as state, \
            throwaway_stack(Path(state), only=("influxdb",)) as settings:
        now = int(time.time())
        t0 = time.monotonic()
        spark = spark_lines(args.executors, args.minutes, now)
        write(settings, spark, "s")
        write(settings, annotator_lines(args.executors, now), "ms")
        print(f"wrote {len(spark):,} Spark samples ({args.executors} executors + driver, {args.minutes} min every "
              f"{PERIOD_S} s) and the annotator's points in {time.monotonic() - t0:.0f} s")
        reader = data.TopReader(settings.influx_reader, settings.database, interval_s=PERIOD_S)
        run = reader.run(APP)
        snap = reader.snapshot(run, rows=args.rows)  # warm-up; also reads what it keeps (cores, max heap)
        print(f"one refresh reads {len(snap.executors)} executors, {snap.task_slots} task slots, "
              f"{len(snap.running['stage'])} stages running")
        report(f"run view refresh, {args.rows} rows on screen, sorted by heap",
               [timed(reader, lambda: reader.snapshot(run, rows=args.rows)) for _ in range(args.repeat)])
        report(f"run view refresh, {args.rows} rows on screen, sorted by RSS",
               [timed(reader, lambda: reader.snapshot(run, sort="m", rows=args.rows)) for _ in range(args.repeat)])
        report("disks view refresh", [timed(reader, lambda: reader.disks(run)) for _ in range(args.repeat)])
        report("run picker", [timed(reader, reader.runs) for _ in range(args.repeat)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
