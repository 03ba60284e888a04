#!/usr/bin/env python3
"""Dashboard latency over long windows: every panel of both dashboards over 6
and 24 hours of a large application, among many stored applications.

Data, written back-dated straight to InfluxDB's HTTP write API in big batches
(Telegraf would take hours to replay a day), stored as Telegraf stores it
(same measurements, tags and default policy), only the measurements the
shipped Telegraf filter keeps (what the dashboards and report read):

- one application of --executors executors plus a driver, each reporting
  every --period seconds: raw samples for the last --raw-hours, and before
  that, back to the longest window, per-minute rollup points in the form the
  continuous query writes (highest value and mean of the minute); the
  dashboards read raw samples only for ranges up to 2 h, so a 6 or 24 h
  window reads rollups whatever --raw-hours is;
- the raw window is then rolled up by the continuous queries' own SELECT
  statements (stack/rollups.py), and the 10-minute level from the minute one;
- --apps further applications (2 executors and a driver, 2 minutes each,
  heap only, with the annotator's application, query, job and stage points),
  spread over the longest window, for the picker and annotation queries.

Then, per window and dashboard, timed as Grafana 12 sends the queries
(since 2026-11-25: no Grafana runs; the model of Grafana 12 in
src/sparkscope_testkit/grafana12.py interpolates them, and they go straight to
InfluxDB, see bench/dashboard_latency.py for the rules):

- the opening: the dashboard opened on the big application
  (?var-applicationid=, ?var-top=--top) over the window, which resolves every
  variable in order, one InfluxDB request each: the hidden ones ($rp,
  $mean_field and $bucket from the resolution lookup by range, the $peak_*
  chain, $task_*, $drawn) and the pickers. Printed as the application picker
  alone, the hidden variables one after another, and every variable query one
  after another (an upper bound: Grafana's scenes run independent variables
  at once); one warm-up opening, then --repeat timed;
- each panel: its targets as the model interpolates them ($bucket,
  ${applicationid:regex} ...), one HTTP request per target, one after another
  (Grafana's InfluxQL backend runs a panel's queries in a loop unless the
  influxdbRunQueriesInParallel toggle is on, off by default); one warm-up,
  then --repeat timed runs;
- each InfluxDB annotation's query, likewise.

Printed: p50/p95 per panel, slowest first, and the whole dashboard (all
panels one after another, median); with --compare-raw also the same panels
reading raw samples over the raw window ($rp, $mean_field and $peak_rp forced
to the raw policy as ?var- values in the URL would; $bucket stays the
lookup's, so the same points come back from the other source).

    .venv/bin/python bench/long_window.py --executors 500 --windows 6,24

--hold keeps the stack (InfluxDB alone) up after timing; --attach then times
the dashboards as they are now in dashboards/ against it, so that a change
is measured side by side with what the held run timed, on the same data:

    .venv/bin/python bench/long_window.py \
        --attach http://127.0.0.1:PORT --db spark --app APP --now END_S --windows 6

Flags dropped with Grafana: --attach-user and $GRAFANA_PASSWORD (--attach is
now the held InfluxDB's URL, with --db), and --interval-counts (it set the
auto $interval's target count; the dashboards now group by $bucket, a fixed
lookup by range).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from dashboard_latency import (TimedInflux, board_url_vars, opening_rows, p95, recorded_paths,
                               time_opening, time_panels)
from ingest import cpu_seconds, stored_by_filter
from sparkscope.dashboards.queries import is_counter
from sparkscope.dashboards.uids import LIVE_UID, SUMMARY_UID
from sparkscope.store import influx, schema
from sparkscope.stack import rollups
from sparkscope.stack.native import PidFile
from sparkscope_testkit.grafana12 import Dashboard12
from sparkscope_testkit.sandbox import throwaway_stack

ROOT = Path(__file__).resolve().parents[1]

HOUR = 3600


class Writer:
    """Line protocol to /write in batches; retries while InfluxDB sheds load."""

    def __init__(self, url: str, db: str, batch: int = 50_000):
        self.url, self.db, self.batch = url, db, batch
        self.lines: dict[str | None, list[str]] = {}  # per retention policy (None: the default)
        self.count = 0

    def add(self, line: str, policy: str | None = None) -> None:
        lines = self.lines.setdefault(policy, [])
        lines.append(line)
        if len(lines) >= self.batch:
            self.flush(policy)

    def flush(self, policy: str | None = None) -> None:
        lines = self.lines.pop(policy, [])
        if not lines:
            return
        body = "\n".join(lines)
        for attempt in range(60):
            try:
                influx.write(self.url, self.db, body, precision="s", policy=policy)
                break
            except (OSError, influx.InfluxError) as err:  # cache full, timeout: let it snapshot
                if attempt == 59:
                    raise
                print(f"    write retry ({err})", flush=True)
                time.sleep(2)
        self.count += len(lines)

    def flush_all(self) -> None:
        for policy in list(self.lines):
            self.flush(policy)


def jvm_paths() -> dict[str, list[tuple[str, str, bool]]]:
    """Per JVM kind: (namespace, measurement, is counter) of what Telegraf keeps."""
    out = {}
    for kind, recorded in (("executor", "1"), ("driver", "driver")):
        out[kind] = [(p.split(".", 1)[0], p.split(".", 1)[1], is_counter(p.split(".", 1)[1]))
                     for p in recorded_paths(recorded) if stored_by_filter(p, "drop")]
    return out


def write_big_app(w: Writer, app: str, executors: int, period: int, raw_s: int, total_s: int, now: int,
                  write_levels: bool = False, only_totals: bool = False) -> None:
    """only_totals: the annotator's totals alone (added to a held run's data written without them)."""
    paths = jvm_paths()
    jvms = [] if only_totals else ([(str(i), paths["executor"]) for i in range(executors)]
                                   + [("driver", paths["driver"])])
    rng = random.Random(7)
    base = {(e, m): rng.randrange(1 << 28) for e, ps in jvms for _, m, _ in ps}
    keys = {(e, m): f"{m},applicationid={app},executorid={e},host=bench,namespace={ns},username=spark"
            for e, ps in jvms for ns, m, _ in ps}
    counters = {(e, m) for e, ps in jvms for _, m, c in ps if c}
    # The annotator's per-application totals (annotator TaskTimeTotals), as often as the sink reports.
    for counter in schema.TASK_TIME_COUNTERS:
        keys["app", counter] = f"{schema.TASK_TOTALS_PREFIX}{counter},applicationid={app}"
        base["app", counter] = 0
        counters.add(("app", counter))

    def value(key, step: int) -> int:
        if key in counters:
            return base[key] // 1000 + step * 3000
        return base[key] + ((step * 7919 + base[key]) % 997) * 100_000

    # Rollup points, in the form the continuous queries write them: the
    # minutes before the raw window, or with write_levels every level over
    # the whole window (no back-fill through InfluxDB afterwards).
    start, raw_start = now - total_s, now - raw_s
    for level in (rollups.LEVELS[1:] if write_levels else rollups.LEVELS[1:2]):
        bucket = int(level.every[:-1]) * 60
        until = now if write_levels else raw_start
        began, before = time.monotonic(), w.count
        for at in range(start // bucket * bucket, until // bucket * bucket, bucket):
            first, last = at // period, (at + bucket) // period - 1
            for key, series in keys.items():
                # A bucket's samples rise or wander; their highest and mean are
                # near its first and last (the exact values do not matter here).
                a, b = value(key, first), value(key, last)
                counted = f",samples={bucket // period}i" if level.samples else ""
                w.add(f"{series} value={max(a, b)},mean={(a + b) / 2:.1f}{counted} {at}", level.policy)
        w.flush(level.policy)
        print(f"  {level.policy} points for {(until - start) / HOUR:.0f} h: {w.count - before:,} "
              f"({(w.count - before) / max(time.monotonic() - began, 1e-9):,.0f}/s)", flush=True)
    written, began = w.count, time.monotonic()
    for t in range(raw_start // period * period, now, period):
        step = t // period
        for key, series in keys.items():
            w.add(f"{series} value={value(key, step)} {t}")
        if (t - raw_start) % 1800 < period:
            print(f"  raw samples to {(t - raw_start) / HOUR:4.1f} h: {w.count - written:,} "
                  f"({(w.count - written) / max(time.monotonic() - began, 1e-9):,.0f}/s)", flush=True)
    w.flush()


def write_many_apps(w: Writer, apps: int, total_s: int, now: int, write_levels: bool = False) -> None:
    """Small runs spread over the window: heap samples and annotator events."""
    for n in range(apps):
        start = now - total_s + int(n * total_s / apps)
        app = f"app-{time.strftime('%Y%m%d%H%M%S', time.gmtime(start))}-{n:05d}"
        for e in ("0", "1", "driver"):
            series = f"JVMHeapMemory,applicationid={app},executorid={e},host=bench,namespace=ExecutorMetrics,username=spark"
            for t in range(start, start + 120, 10):
                w.add(f"{series} value={100_000_000 + t % 977} {t}")
            for level in rollups.LEVELS[1:] if write_levels else ():
                bucket = int(level.every[:-1]) * 60
                for at in sorted({t // bucket * bucket for t in range(start, start + 120, 10)}):
                    n = sum(1 for t in range(start, start + 120, 10) if at <= t < at + bucket)
                    counted = f",samples={n}i" if level.samples else ""
                    w.add(f"{series} value={100_000_976},mean={100_000_488.0}{counted} {at}", level.policy)
        end_ms = (start + 120) * 1000
        w.add(f'sparkscope_application,applicationid={app},status=FINISHED app_name="job {n}",spark_user="u",'
              f'spark_version="3.5.9",duration_ms=120000i,end_time_ms={end_ms}i,text="job {n}" {start}')
        for kind, count in (("query", 5), ("job", 10), ("stage", 20)):
            for k in range(count):
                at = start + k * 100 // count
                tags = f"applicationid={app},status=SUCCEEDED" + (",straggler=false" if kind == "stage" else "")
                w.add(f'sparkscope_{kind},{tags} text="{kind} {k}",end_time_ms={(at + 5) * 1000}i,'
                      f'duration_ms=5000i,{kind}_id={k}i {at}')
    w.flush_all()


def disk_bytes(directory: Path) -> int:
    return sum(f.stat().st_size for f in directory.rglob("*") if f.is_file())


def wait_quiet(pid: int, limit_s: float = 180) -> float:
    """Wait until InfluxDB's compactions settle (under 10 % of a core over 5 s)."""
    began = time.monotonic()
    while time.monotonic() - began < limit_s:
        before = cpu_seconds(pid)
        time.sleep(5)
        if (cpu_seconds(pid) - before) / 5 < 0.10:
            break
    return time.monotonic() - began


def time_annotations(dash: Dashboard12, sender: TimedInflux, repeat: int) -> list[tuple[str, list[float]]]:
    """Each annotation's query as Grafana 12 sends it: one warm-up, then `repeat` timed (those off
    by default too, which Grafana runs once toggled on)."""
    out = []
    for a in dash.board.get("annotations", {}).get("list", []):
        if (a.get("datasource") or {}).get("type") != "influxdb":
            continue
        off = "" if a.get("enable", True) else " (off by default)"
        dash.annotation_events(a)
        sender.take()
        times = []
        for _ in range(repeat):
            dash.annotation_events(a)
            times.append(sum(seconds for _, seconds in sender.take()))
        out.append((f"annotation: {a['name']}{off}", times))
    return out


def shown(dash: Dashboard12, name: str) -> str:
    return ",".join(dash.variables[name].current) if name in dash.variables else "-"


def time_windows(sender: TimedInflux, boards: dict[str, dict], app: str, now: int, windows: list[float],
                 args: argparse.Namespace) -> None:
    """Every panel of each board over each window ending at now + 60 s: p50/p95 per panel, then the
    slowest per window and board."""
    rows = []
    for hours in windows:
        to_ms = (now + 60) * 1000
        from_ms = to_ms - int(hours * HOUR * 1000)
        # The resolution lookup picks the level and $bucket by range; the raw arm forces the raw
        # policy as ?var- values in the URL would (same $bucket, so the same points).
        arms: list[tuple[str, dict[str, str]]] = [("lookup", {})]
        if args.compare_raw and hours <= args.raw_hours:
            arms.append(("raw", {"rp": schema.RAW_POLICY, "mean_field": "value", "peak_rp": schema.RAW_POLICY}))
        for arm, forced in arms:
            for name, board in boards.items():
                wanted = {"applicationid": app, "top": str(args.top), **forced}
                if args.no_totals:
                    wanted["task_scope"] = "(?:.+)"  # as for a run without the annotator's totals
                dash, opened = time_opening(board, sender, from_ms, to_ms, board_url_vars(board, wanted),
                                            args.repeat)
                print(f"\n{hours:g} h, {arm}: {name}: rp={shown(dash, 'rp')} peak_rp={shown(dash, 'peak_rp')} "
                      f"task_scope={shown(dash, 'task_scope')} bucket={shown(dash, 'bucket')} "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
                timed = time_panels(dash, sender, args.repeat)
                whole = sum(statistics.median(t) for _, t in timed)
                timed += time_annotations(dash, sender, args.repeat)
                timed += opening_rows(dash, opened)
                for title, t in sorted(timed, key=lambda x: -statistics.median(x[1])):
                    print(f"  {title[:52]:<52} p50 {statistics.median(t) * 1000:7.0f} ms  "
                          f"p95 {p95(t) * 1000:7.0f} ms", flush=True)
                print(f"  {'whole dashboard, panels one after another':<52} p50 {whole * 1000:7.0f} ms",
                      flush=True)
                rows.append((hours, arm, name, timed, whole))
    print("\nslowest panel, annotation or variable per window and dashboard (p95):")
    for hours, arm, name, timed, whole in rows:
        title, t = max((row for row in timed if not row[0].startswith("opening:")), key=lambda x: p95(x[1]))
        print(f"  {hours:4g} h {arm:10} {name:26} {title[:40]:<40} p95 {p95(t) * 1000:6.0f} ms  "
              f"whole p50 {whole * 1000:6.0f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--executors", type=int, default=500)
    parser.add_argument("--windows", default="6,24", help="hours, comma list")
    parser.add_argument("--raw-hours", type=float, default=6.0, help="raw samples for this many hours back")
    parser.add_argument("--period", type=int, default=10, help="sink period of the simulated app, s")
    parser.add_argument("--apps", type=int, default=10_000, help="further small applications stored")
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--top", default="20", help="Executors drawn ($top): 10, 20, 50 or 100000 (all)")
    parser.add_argument("--no-totals", action="store_true",
                        help="task time from every executor's counters, as for a run without the annotator")
    parser.add_argument("--compare-raw", action="store_true", help="also time the panels on raw samples")
    parser.add_argument("--rollups", choices=("backfill", "write"), default="backfill",
                        help="backfill: the raw window rolled up by the continuous queries' own SELECT (slow: "
                             "about 30,000 points/s here); write: every level written directly, as computed here")
    parser.add_argument("--attach", metavar="INFLUXDB_URL",
                        help="time the dashboards now in dashboards/ against the InfluxDB of a stack held by "
                             "--hold (its --app, --now and --db, as --hold printed them); writes nothing")
    parser.add_argument("--db", default="spark", help="with --attach: the held stack's database")
    parser.add_argument("--boards", default="executors,application",
                        help="which dashboards to time, by a word of their file name")
    parser.add_argument("--app", help="with --attach: the big application's id, as --hold printed it")
    parser.add_argument("--now", type=int, help="with --attach: the data's end in s, as --hold printed it")
    parser.add_argument("--hold", action="store_true",
                        help="after timing, keep the stack up (its InfluxDB URL printed) until Enter")
    args = parser.parse_args()
    windows = [float(x) for x in args.windows.split(",")]
    total_s, raw_s = int(max(windows) * HOUR), int(args.raw_hours * HOUR)
    # The live and summary dashboards: the profiles one reads one stored
    # profile by its id, whatever the window.
    boards = {p.name: json.loads(p.read_text()) for p in sorted((ROOT / "dashboards").glob("*.json"))
              if json.loads(p.read_text())["uid"] in (LIVE_UID, SUMMARY_UID)
              and any(word in p.name for word in args.boards.split(","))}
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}", flush=True)
    if args.attach:
        if not (args.app and args.now):
            parser.error("--attach needs --app and --now")
        time_windows(TimedInflux(args.attach, args.db), boards, args.app, args.now, windows, args)
        return 0
    # InfluxDB alone: the data goes straight to it, and no Grafana runs (the model sends its queries).
    with tempfile.TemporaryDirectory(prefix="sparkscope-bench-long-") as tmp, \
            throwaway_stack(Path(tmp), only=("influxdb",)) as settings:
        url, db = settings.influx_admin, settings.database
        influx_pid = PidFile(settings.state_dir, "influxdb").running_pid()
        now = int(time.time()) // 60 * 60 - 60  # a whole minute, already past
        app = f"app-{time.strftime('%Y%m%d%H%M%S', time.gmtime(now - total_s))}-9999"
        began = time.monotonic()
        w = Writer(url, db)
        print(f"writing {args.executors} executors + driver, {max(windows):g} h as {app}", flush=True)
        write_levels = args.rollups == "write"
        write_big_app(w, app, args.executors, args.period, raw_s, total_s, now, write_levels)
        write_many_apps(w, args.apps, total_s, now, write_levels)
        print(f"wrote {w.count:,} points in {time.monotonic() - began:.0f} s", flush=True)
        began = time.monotonic()
        for level in rollups.LEVELS[1:] if not write_levels else ():
            # In windows the server's query timeout (60 s) allows on a busy machine.
            # The small applications' raw heap spans the whole window.
            start = now - total_s
            step = 600 if level.source == schema.RAW_POLICY else 7200
            written = 0
            for chunk in range(start // step * step, now + 60, step):
                for statement in rollups.backfill_statements(db, level, chunk * 1000,
                                                             min(chunk + step, now + 60) * 1000):
                    result = influx.query(url, statement, db, timeout=120)
                    written += result[0]["values"][0][1] if result else 0
            print(f"  {level.policy}: {written:,} points written by its continuous query's SELECT", flush=True)
        print(f"rolled up in {time.monotonic() - began:.0f} s; InfluxDB settled after "
              f"{wait_quiet(influx_pid):.0f} s; series {influx.database_stats(url, db).series:,}", flush=True)
        base = settings.state_dir / "influxdb"
        print(f"on disk: data {disk_bytes(base / 'data') / 1e6:,.0f} MB, WAL {disk_bytes(base / 'wal') / 1e6:,.0f} MB "
              f"for {w.count:,} points written (rollups computed by InfluxDB not counted)", flush=True)

        try:
            time_windows(TimedInflux(url, db), boards, app, now, windows, args)
        finally:
            if args.hold:
                print(f"\nholding the stack: InfluxDB {url} db {db}, application {app}, data up to {now} s "
                      f"(time range {(now + 60 - int(max(windows) * HOUR)) * 1000} to {(now + 60) * 1000} ms); "
                      f"time it again with --attach {url} --db {db} --app {app} --now {now}; Enter stops it",
                      flush=True)
                sys.stdin.readline()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
