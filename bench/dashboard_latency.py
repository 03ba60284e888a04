#!/usr/bin/env python3
"""Dashboard latency: every panel of the dashboards over one hour of a large
application, through Grafana's /api/ds/query, as the UI runs them.

A simulated application of N executors (default 100) plus a driver, each
reporting the metric names a real Spark 3.5 JVM reports (the recording in
tests/data/spark-3.5.9-metric-names.txt) every 10 s for one hour, is sent over Graphite
to the stack's Telegraf with back-dated timestamps (paced so Telegraf's
buffer never overflows), then counted in InfluxDB. Each panel's queries then
run together in one request per refresh, repeated; the script prints p50 and
p95 per panel, slowest first, and the time a whole dashboard refresh takes
(all panels, one after the other: an upper bound for the browser, which runs
a few at once).

    .venv/bin/python bench/dashboard_latency.py --executors 100 --repeat 9
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

from ingest import wait_stored  # noqa: E402
from sparkscope.dashboards.queries import is_counter  # noqa: E402
from support.grafana_api import Grafana, substitute  # noqa: E402
from support.sandbox import throwaway_stack  # noqa: E402

NAMES_FILE = ROOT / "tests" / "data" / "spark-3.5.9-metric-names.txt"


def recorded_paths(executor: str) -> list[str]:
    """namespace.measurement paths the recorded run's executor 1 or driver sent."""
    out = []
    for line in NAMES_FILE.read_text().split():
        parts = line.split(".", 3)
        if len(parts) == 4 and parts[2] == executor:
            out.append(parts[3])
    return out


def backfill(address: tuple[str, int], app_id: str, executors: int, period_s: int, hours: float,
             rate: float, rng: random.Random) -> int:
    """Send `hours` of reports ending now, at most `rate` points/s; returns points sent."""
    jvms = [(str(i), recorded_paths("1")) for i in range(executors)] + [("driver", recorded_paths("driver"))]
    state: dict[tuple[str, str], float] = {}
    steps = int(hours * 3600 / period_s)
    start_ts = int(time.time()) - steps * period_s
    total = sum(len(paths) for _, paths in jvms) * steps
    sent = 0
    began = time.monotonic()
    with socket.create_connection(address, timeout=60) as conn:
        for step in range(steps):
            ts = start_ts + step * period_s
            lines = []
            for executor, paths in jvms:
                for path in paths:
                    key = (executor, path)
                    measurement = path.split(".", 1)[1] if "." in path else path
                    if is_counter(measurement):  # counters only grow
                        state[key] = state.get(key, 0) + rng.randrange(0, 5000)
                    else:  # gauges wander
                        state[key] = max(0, state.get(key, rng.randrange(1 << 28)) + rng.randrange(-1 << 20, 1 << 20))
                    lines.append(f"spark.{app_id}.{executor}.{path} {int(state[key])} {ts}\n")
            conn.sendall("".join(lines).encode())
            sent += len(lines)
            ahead = sent / rate - (time.monotonic() - began)
            if ahead > 0:
                time.sleep(ahead)
            if step % 30 == 0 or step == steps - 1:
                print(f"  backfill {sent:,}/{total:,} points ({sent / max(time.monotonic() - began, 1e-9):,.0f}/s)",
                      flush=True)
    return sent


def panels(board: dict) -> list[dict]:
    return [p for top in board["panels"] for p in [top, *top.get("panels", [])] if p["type"] != "row"]


def time_panels(grafana: Grafana, board: dict, variables: dict[str, str], repeat: int,
                time_from: str) -> list[tuple[str, list[float]]]:
    out = []
    for panel in panels(board):
        now_ms = int(time.time() * 1000)
        targets = [dict(t, query=substitute(t["query"], board, variables, now_ms - 3_600_000, now_ms))
                   if "query" in t else dict(t) for t in panel["targets"]]
        for t in targets:
            t.update(intervalMs=20_000, maxDataPoints=1200)
        grafana.query(targets, time_from)  # warm: the first run reads from disk
        times = []
        for _ in range(repeat):
            began = time.perf_counter()
            grafana.query(targets, time_from)
            times.append(time.perf_counter() - began)
        out.append((panel["title"], times))
    return out


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--executors", type=int, default=100)
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--period", type=int, default=10, help="sink period of the simulated app, s")
    parser.add_argument("--repeat", type=int, default=9, help="timed runs per panel")
    parser.add_argument("--rate", type=float, default=30_000, help="backfill pace, points/s")
    args = parser.parse_args()

    boards = {p.name: json.loads(p.read_text()) for p in sorted((ROOT / "dashboards").glob("*.json"))}
    with tempfile.TemporaryDirectory(prefix="sparkscope-bench-latency-") as tmp, \
            throwaway_stack(Path(tmp)) as settings:
        grafana = Grafana(settings.grafana_url, settings.grafana_user, settings.grafana_password)
        app_id = f"app-{time.strftime('%Y%m%d%H%M%S')}-0000"
        print(f"sending {args.hours:g} h of {args.executors} executors + driver at a {args.period} s period "
              f"as application {app_id}", flush=True)
        sent = backfill((settings.graphite_host, settings.graphite_port), app_id, args.executors, args.period,
                        args.hours, args.rate, random.Random(7))
        stored = wait_stored(settings.influx_url, settings.database, app_id, sent, deadline_s=600)
        print(f"stored {stored:,} of {sent:,} points", flush=True)

        # The hidden variables as the browser resolves them for an hour: raw
        # samples; every executor drawn (Executors drawn = all), as this bench
        # always timed; peaks read raw (they would be as fast from the rollup).
        variables = {"username": ".*", "applicationid": app_id, "executorid": ".*", "interval": "20s",
                     "rp": "sparkscope", "mean_field": "value", "top": "100000", "drawn": ".*",
                     "peak_raw_samples": "", "peak_rolled_samples": "", "peak_rp": "sparkscope"}
        window = f"now-{int(args.hours * 60)}m"
        print(f"\n{'dashboard':<26} {'panel':<46} {'p50 ms':>8} {'p95 ms':>8}")
        rows = []
        for name, board in boards.items():
            timed = time_panels(grafana, board, variables, args.repeat, window)
            refresh = sum(statistics.median(t) for _, t in timed)
            rows += [(name, title, statistics.median(t), p95(t)) for title, t in timed]
            print(f"{name:<26} {'(all panels, one after another)':<46} {refresh * 1000:>8.0f}")
        for name, title, median, high in sorted(rows, key=lambda r: -r[2]):
            print(f"{name:<26} {title[:46]:<46} {median * 1000:>8.0f} {high * 1000:>8.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
