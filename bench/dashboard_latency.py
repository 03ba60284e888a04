#!/usr/bin/env python3
"""Dashboard latency: every panel of the dashboards over one hour of a large
application, each query timed as Grafana 12 sends it to InfluxDB.

A simulated application of N executors (default 100) plus a driver, each
reporting the metric names a real Spark 3.5 JVM reports (the recording in
tests/data/spark-3.5.9-metric-names.txt) every 10 s for one hour, is sent over Graphite
to the stack's Telegraf with back-dated timestamps (paced so Telegraf's
buffer never overflows), then counted in InfluxDB (what the shipped filter
keeps: the stack drops the names no dashboard reads).

No Grafana runs (since 2026-11-25): each dashboard is opened through the
model of Grafana 12 in src/sparkscope_testkit/grafana12.py over the last --hours
(a relative range, as the browser opens it), on the bench's application
(?var-applicationid=) with every executor drawn (?var-top=100000, as this
bench always timed). Opening it resolves its variables as Grafana 12 does,
in order, one InfluxDB request each ($bucket, $rp and $mean_field from the
resolution lookup by range, the $peak_* chain, $drawn, the pickers ...);
the opening is timed apart: its requests one after another, repeated like
the panels (an upper bound: Grafana's scenes run variables that do not
depend on each other at once). Each panel's targets are then interpolated
by the model (${applicationid:regex}, $bucket ...) and sent straight to
InfluxDB as Grafana's backend sends them (GET /query?db=&epoch=ms&q=, one
HTTP request per target; hidden targets only when an expression needs
them). A panel's time is its targets' requests one after another: Grafana's
InfluxQL backend runs the queries of a panel's request in a loop unless the
feature toggle influxdbRunQueriesInParallel is on (off by default in 12.x;
grafana/grafana#80955, #81209). Grafana's own share (its HTTP hop, turning
InfluxDB's JSON into frames) is not in these figures. One warm-up run, then
--repeat timed runs per panel; the script prints p50 and p95 per panel,
slowest first, the opening, and the time a whole dashboard refresh takes
(all panels, one after the other: an upper bound for the browser, which
runs a few at once).

Flags: unchanged (no flag of this bench was Grafana's). The fixed 20 s
interval and maxDataPoints the old requests carried are gone with
$interval: the dashboards group by $bucket, looked up by range.

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

from ingest import stored_by_filter, wait_stored
from sparkscope.dashboards.queries import is_counter
from sparkscope_testkit.grafana12 import Dashboard12, influx_http, iter_panels
from sparkscope_testkit.sandbox import throwaway_stack

ROOT = Path(__file__).resolve().parents[1]

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
             rate: float, rng: random.Random) -> tuple[int, int]:
    """Send `hours` of reports ending now, at most `rate` points/s; returns the points sent and
    how many of them the shipped filter stores."""
    jvms = [(str(i), recorded_paths("1")) for i in range(executors)] + [("driver", recorded_paths("driver"))]
    state: dict[tuple[str, str], float] = {}
    steps = int(hours * 3600 / period_s)
    start_ts = int(time.time()) - steps * period_s
    total = sum(len(paths) for _, paths in jvms) * steps
    kept_per_step = sum(1 for _, paths in jvms for p in paths if "." in p and stored_by_filter(p, "drop"))
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
    return sent, kept_per_step * steps


# ------------------------------------------------------------------ timing through the model of Grafana 12

class TimedInflux:
    """send(query, rp) as Grafana 12's backend sends a target (sparkscope_testkit.grafana12.influx_http: one
    GET /query per target), each request's wall time logged (reading and parsing InfluxDB's JSON
    included, as Grafana reads it before it answers)."""

    def __init__(self, settings, timeout: float = 120):
        # As Grafana's datasource: the read-only user.
        self._send = influx_http(settings.influx_url, settings.database, settings.influx_read_user,
                                 settings.influx_read_password, timeout=timeout)
        self.log: list[tuple[str, float]] = []

    def __call__(self, query: str, rp: str | None = None) -> list[dict]:
        began = time.perf_counter()
        try:
            return self._send(query, rp)
        finally:
            self.log.append((query, time.perf_counter() - began))

    def take(self) -> list[tuple[str, float]]:
        """The requests logged since the last take()."""
        out, self.log = self.log, []
        return out


def board_url_vars(board: dict, wanted: dict) -> dict:
    """The ?var-name= values of `wanted` that this dashboard has a variable for."""
    names = {v["name"] for v in board.get("templating", {}).get("list", [])}
    return {name: value for name, value in wanted.items() if name in names}


def open_timed(board: dict, influx: TimedInflux, from_ms: int, to_ms: int, url_vars: dict,
               relative_from: str | None = None) -> tuple[Dashboard12, dict[str, float]]:
    """The dashboard opened as Grafana 12 opens it, and the seconds of each variable's request
    (in the order the model resolved them)."""
    influx.take()
    dash = Dashboard12(board, influx, from_ms, to_ms, url_vars=url_vars, relative_from=relative_from)
    sent = influx.take()
    asked = [(name, var.request) for name, var in dash.variables.items() if var.request is not None]
    if [query for _, query in asked] != [query for query, _ in sent]:
        raise RuntimeError(f"{board.get('title')}: the requests sent on opening are not the variables' own: "
                           f"{[q for q, _ in sent]} against {[q for _, q in asked]}")
    return dash, {name: seconds for (name, _), (_, seconds) in zip(asked, sent)}


def time_opening(board: dict, influx: TimedInflux, from_ms: int, to_ms: int, url_vars: dict, repeat: int,
                 relative_from: str | None = None) -> tuple[Dashboard12, list[dict[str, float]]]:
    """Open the dashboard once to warm up, then `repeat` times: the last opening and, per timed
    opening, {variable: seconds of its request}."""
    timed = []
    for _ in range(repeat + 1):
        dash, seconds = open_timed(board, influx, from_ms, to_ms, url_vars, relative_from)
        timed.append(seconds)
    return dash, timed[1:]


def panels(board: dict) -> list[dict]:
    return [p for p in iter_panels(board) if p.get("type") != "row"]


def has_data(results: dict[str, list[dict]]) -> bool:
    return any(v is not None for series in results.values() for s in series for row in s.get("values") or []
               for v in row[1:])


def panel_seconds(dash: Dashboard12, influx: TimedInflux, panel: dict) -> tuple[float, int, bool]:
    """One run of the panel as Grafana 12 runs it: its requests' seconds, one after another, how
    many it sent, and whether any came back with data."""
    influx.take()
    results = dash.run_panel(panel)
    sent = influx.take()
    return sum(seconds for _, seconds in sent), len(sent), has_data(results)


def time_panels(dash: Dashboard12, influx: TimedInflux, repeat: int,
                empty: list[str] | None = None) -> list[tuple[str, list[float]]]:
    """Every panel that sends a query: one warm-up run (the first reads from disk), then `repeat`
    timed ones. The titles of the panels that got no data are added to `empty`."""
    out = []
    for panel in panels(dash.board):
        title = panel.get("title") or f"panel {panel.get('id')}"
        _, count, data = panel_seconds(dash, influx, panel)
        if not count:
            continue  # a text panel, or every target hidden
        if not data and empty is not None:
            empty.append(title)
        out.append((title, [panel_seconds(dash, influx, panel)[0] for _ in range(repeat)]))
    return out


def opening_rows(dash: Dashboard12, timed: list[dict[str, float]]) -> list[tuple[str, list[float]]]:
    """The opening as rows: every variable's request one after another, the application picker,
    and the hidden variables one after another."""
    hidden = [name for name, var in dash.variables.items() if var.spec.get("hide") == 2]
    rows = [(f"opening: {len(timed[0]) if timed else 0} variable queries, in turn",
             [sum(t.values()) for t in timed])]
    if timed and "applicationid" in timed[0]:
        runs = len(dash.variables["applicationid"].options)
        rows.append((f"application picker ({runs:,} runs)", [t["applicationid"] for t in timed]))
    if timed and any(name in timed[0] for name in hidden):
        rows.append(("hidden variables, one after another", [sum(t.get(n, 0.0) for n in hidden) for t in timed]))
    return rows


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
            throwaway_stack(Path(tmp), only=("influxdb", "telegraf")) as settings:
        influx = TimedInflux(settings)
        app_id = f"app-{time.strftime('%Y%m%d%H%M%S')}-0000"
        print(f"sending {args.hours:g} h of {args.executors} executors + driver at a {args.period} s period "
              f"as application {app_id}", flush=True)
        sent, kept = backfill((settings.graphite_host, settings.graphite_port), app_id, args.executors,
                              args.period, args.hours, args.rate, random.Random(7))
        stored, _ = wait_stored(settings.influx_admin, settings.database, app_id, kept, deadline_s=600)
        print(f"stored {stored:,} of the {kept:,} points the shipped filter keeps ({sent:,} sent)", flush=True)

        # The last --hours, as the browser opens a relative range; the application
        # and every executor drawn given as ?var- values in the URL.
        range_s = max(1, round(args.hours * 3600))
        relative = f"now-{range_s // 60}m" if range_s % 60 == 0 else f"now-{range_s}s"
        to_ms = int(time.time() * 1000)
        from_ms = to_ms - range_s * 1000
        wanted = {"applicationid": app_id, "top": "100000"}
        print(f"\n{'dashboard':<26} {'panel':<46} {'p50 ms':>8} {'p95 ms':>8}")
        rows = []
        for name, board in boards.items():
            dash, opened = time_opening(board, influx, from_ms, to_ms, board_url_vars(board, wanted),
                                        args.repeat, relative)
            empty: list[str] = []
            timed = time_panels(dash, influx, args.repeat, empty)
            refresh = sum(statistics.median(t) for _, t in timed)
            rows += [(name, title, statistics.median(t), p95(t)) for title, t in timed + opening_rows(dash, opened)]
            bucket = dash.variables["bucket"].text if "bucket" in dash.variables else "-"
            print(f"{name:<26} {'(all panels, one after another)':<46} {refresh * 1000:>8.0f}"
                  f"   ($bucket {bucket})", flush=True)
            if empty:
                print(f"{'':<26}   without data on this run ({len(empty)} of {len(timed)}): {', '.join(empty)}",
                      flush=True)
        for name, title, median, high in sorted(rows, key=lambda r: -r[2]):
            print(f"{name:<26} {title[:46]:<46} {median * 1000:>8.0f} {high * 1000:>8.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
