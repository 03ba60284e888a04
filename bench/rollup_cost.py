#!/usr/bin/env python3
"""What the rollups' continuous queries cost InfluxDB while an application runs.

A throwaway InfluxDB (rollup policies and continuous queries as `up` makes
them) receives live samples of one application: --executors executors and a
driver, each with the metric names the shipped Telegraf filter stores, every
--period seconds, stamped now, through the HTTP write API (Telegraf left out:
only InfluxDB's own cost is measured). The run alternates blocks of
--block-minutes with the continuous queries present and dropped, --rounds
times each, so both arms see the same machine load in turn. Printed per
block and per arm: InfluxDB's CPU seconds per minute and its RSS, and the
arms' difference, which is what the rollups cost; the ingest alone is the
"off" arm.

The minute level runs every minute over the last 2 minutes of every Spark
measurement; the 10 and 30 minute levels run every 10 and 30 minutes over
the level below, so a block shorter than 30 minutes sees the coarser runs
only when its window crosses their boundary (the block lines say which did).

    .venv/bin/python bench/rollup_cost.py --executors 500 --block-minutes 5 --rounds 2
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

from ingest import rss_peak_mb
from long_window import jvm_paths
from overhead import process_cpu_seconds
from sparkscope.store import influx
from sparkscope.stack import rollups
from sparkscope.stack.native import PidFile
from sparkscope_testkit.sandbox import throwaway_stack


class LiveWriter(threading.Thread):
    """Every period, one sample of every series, stamped now; counts what it wrote."""

    def __init__(self, url: str, db: str, executors: int, period: int):
        super().__init__(daemon=True)
        self.url, self.db, self.period = url, db, period
        paths = jvm_paths()
        jvms = [(str(i), paths["executor"]) for i in range(executors)] + [("driver", paths["driver"])]
        self.series = [f"{m},applicationid=app-bench-rollups,executorid={e},host=bench,namespace={ns},"
                       f"username=spark" for e, ps in jvms for ns, m, _ in ps]
        self.stop = threading.Event()
        self.points = 0
        self.errors = 0

    def run(self) -> None:
        step = 0
        while not self.stop.is_set():
            began = time.time()
            now = int(began)
            lines = [f"{s} value={(hash(s) + step * 7919) % 1_000_000} {now}" for s in self.series]
            for start in range(0, len(lines), 10_000):
                body = "\n".join(lines[start:start + 10_000])
                try:
                    influx.write(self.url, self.db, body, precision="s")
                    self.points += len(lines[start:start + 10_000])
                except (OSError, influx.InfluxError):
                    self.errors += 1
            step += 1
            self.stop.wait(max(self.period - (time.time() - began), 0))


def set_queries(url: str, db: str, retention: str, on: bool) -> None:
    if on:
        rollups.ensure_rollups(url, db, retention)
        return
    for name in rollups.existing_queries(url, db):
        influx.query(url, f"DROP CONTINUOUS QUERY {influx.identifier(name)} ON {influx.identifier(db)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--executors", type=int, default=500)
    parser.add_argument("--period", type=int, default=10, help="sink period, s")
    parser.add_argument("--block-minutes", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2, help="blocks per arm, alternating")
    parser.add_argument("--warmup-minutes", type=float, default=3.0,
                        help="writing before the first block, so the minute level has data to read")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="sparkscope-bench-rollups-") as tmp, \
            throwaway_stack(Path(tmp), only=("influxdb",)) as settings:
        url, db = settings.influx_admin, settings.database
        pid = PidFile(settings.state_dir, "influxdb").running_pid()
        writer = LiveWriter(url, db, args.executors, args.period)
        print(f"{args.executors} executors + driver: {len(writer.series):,} series, "
              f"{len(writer.series) / args.period:,.0f} points/s; warm-up {args.warmup_minutes:g} min", flush=True)
        writer.start()
        time.sleep(args.warmup_minutes * 60)
        per_arm: dict[str, list[float]] = {"on": [], "off": []}
        for block in range(2 * args.rounds):
            arm = "on" if block % 2 == 0 else "off"
            set_queries(url, db, settings.retention, arm == "on")
            cpu0, wall0, points0 = process_cpu_seconds([pid]), time.monotonic(), writer.points
            t0 = time.time()
            time.sleep(args.block_minutes * 60)
            minutes = (time.monotonic() - wall0) / 60
            rate = (process_cpu_seconds([pid]) - cpu0) / minutes
            per_arm[arm].append(rate)
            t1 = time.time()
            crossed = [f"{m} min" for m in (10, 30) if int(t1 // (m * 60)) > int(t0 // (m * 60))]
            print(f"  block {block + 1} continuous queries {arm:3}: InfluxDB {rate:5.2f} CPU s/min, "
                  f"{(writer.points - points0) / (minutes * 60):,.0f} points/s written, load "
                  f"{os.getloadavg()[0]:.1f}" + (f"; crossed a {' and '.join(crossed)} boundary" if crossed and
                                                  arm == "on" else ""), flush=True)
        writer.stop.set()
        writer.join(timeout=60)
        on, off = statistics.median(per_arm["on"]), statistics.median(per_arm["off"])
        print(f"\nInfluxDB CPU, median of {args.rounds} blocks each: continuous queries on {on:.2f} s/min, "
              f"off {off:.2f} s/min; the rollups cost {on - off:.2f} s of one core per minute "
              f"({(on - off) / 60 * 100:.1f} % of a core), ratio on/off {on / off:.2f}; "
              f"InfluxDB peak RSS {rss_peak_mb(pid):,.0f} MB; write errors {writer.errors}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
