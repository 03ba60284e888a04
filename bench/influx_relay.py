#!/usr/bin/env python3
"""What the native InfluxDB's relay costs (src/sparkscope/stack/influx_relay.py):
the same writes and queries through InfluxDB's own TCP port and through the
relay to its Unix socket, interleaved, against one influxd.

Natively influxd runs in a network namespace of its own (so its backup port
is out of everyone's reach) and the relay puts its HTTP API on the host.
Here one influxd serves both: its TCP port (direct) and its Unix socket, with
the relay in front on a second port (relay). Each round writes one batch of
--points points (Telegraf's batch is 50,000) and runs a dashboard-like query
through each path, in alternating order. Printed per path: the median write
and query time with their 10th-90th percentiles, the points stored per
second, and the ratio relay/direct of the medians with the ratio's spread
over rounds (each round's pair measured back to back).

    .venv/bin/python bench/influx_relay.py --rounds 20 --points 50000
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from sparkscope.store import influx
from sparkscope.process import start_group, stop_group, wait_until
from sparkscope.provision.go import ensure_influxd
from sparkscope.settings import ROOT, load_settings
from sparkscope.stack.influx_storage import influx_dirs
from sparkscope_testkit.sandbox import free_port


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def batch(round_no: int, path: str, points: int, executors: int = 500) -> str:
    base = 1_700_000_000 + round_no * 10
    lines = []
    for i in range(points):
        executor, t = i % executors, base + i // executors
        lines.append(f"JVMHeapMemory,applicationid=app-{path},executorid={executor} value={i * 1000} {t}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--points", type=int, default=50_000, help="points per write (Telegraf's batch: 50,000)")
    args = parser.parse_args()
    influxd = ensure_influxd(load_settings().cache_dir)
    work = Path(tempfile.mkdtemp(prefix="sparkscope-relay-bench-"))
    direct_port, relay_port = free_port(pair_offset=2), free_port()
    sock = work / "influxd.sock"
    env = {**os.environ, **{k: str(v) for k, v in influx_dirs(work).items()},
           "INFLUXDB_HTTP_AUTH_ENABLED": "false", "INFLUXDB_HTTP_BIND_ADDRESS": f"127.0.0.1:{direct_port}",
           "INFLUXDB_BIND_ADDRESS": f"127.0.0.1:{direct_port + 2}",
           "INFLUXDB_HTTP_UNIX_SOCKET_ENABLED": "true", "INFLUXDB_HTTP_BIND_SOCKET": str(sock)}
    proc = start_group([sys.executable, "-m", "sparkscope.stack.influx_relay", "--listen",
                        f"127.0.0.1:{relay_port}", "--socket", str(sock), "--", str(influxd), "-config",
                        str(ROOT / "influxdb" / "influxdb.conf")], work / "influxd.log", env=env)
    urls = {"direct": f"http://127.0.0.1:{direct_port}", "relay": f"http://127.0.0.1:{relay_port}"}
    try:
        if not wait_until(lambda: all(influx.ping(u) for u in urls.values()), 60):
            print(f"influxd did not answer; see {work / 'influxd.log'}", file=sys.stderr)
            return 1
        influx.ensure_database(influx.Endpoint(urls["direct"]), "bench", "INF")
        writes: dict[str, list[float]] = {"direct": [], "relay": []}
        queries: dict[str, list[float]] = {"direct": [], "relay": []}
        ratios_w, ratios_q = [], []
        for r in range(args.rounds):
            order = ("direct", "relay") if r % 2 == 0 else ("relay", "direct")
            took_w, took_q = {}, {}
            for path in order:
                body = batch(r, path, args.points)
                started = time.perf_counter()
                influx.write(influx.Endpoint(urls[path]), "bench", body)
                took_w[path] = time.perf_counter() - started
                started = time.perf_counter()
                influx.query(influx.Endpoint(urls[path]), f'SELECT max("value") FROM "JVMHeapMemory" WHERE '
                             f'"applicationid" = \'app-{path}\' GROUP BY "executorid"', "bench")
                took_q[path] = time.perf_counter() - started
            for path in order:
                writes[path].append(took_w[path])
                queries[path].append(took_q[path])
            ratios_w.append(took_w["relay"] / took_w["direct"])
            ratios_q.append(took_q["relay"] / took_q["direct"])
            print(f"round {r + 1}/{args.rounds}: write direct {took_w['direct'] * 1000:.0f} ms, relay "
                  f"{took_w['relay'] * 1000:.0f} ms", file=sys.stderr, flush=True)
        print(f"{args.rounds} rounds, {args.points:,} points a write, one influxd, paths interleaved")
        print(f"{'path':8} {'write median':>13} {'p10-p90':>17} {'points/s':>10} {'query median':>13} {'p10-p90':>17}")
        for path in ("direct", "relay"):
            w, q = writes[path], queries[path]
            print(f"{path:8} {statistics.median(w) * 1000:10.1f} ms {quantile(w, .1) * 1000:7.1f}-"
                  f"{quantile(w, .9) * 1000:6.1f} ms {args.points / statistics.median(w):10,.0f} "
                  f"{statistics.median(q) * 1000:10.1f} ms {quantile(q, .1) * 1000:7.1f}-"
                  f"{quantile(q, .9) * 1000:6.1f} ms")
        print(f"relay/direct, per round: write median {statistics.median(ratios_w):.3f} "
              f"[p10 {quantile(ratios_w, .1):.3f}, p90 {quantile(ratios_w, .9):.3f}], query median "
              f"{statistics.median(ratios_q):.3f} [p10 {quantile(ratios_q, .1):.3f}, p90 {quantile(ratios_q, .9):.3f}]")
        return 0
    finally:
        stop_group(proc.pid, proc=proc)


if __name__ == "__main__":
    sys.exit(main())
