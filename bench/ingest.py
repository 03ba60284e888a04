#!/usr/bin/env python3
"""Ingestion benchmark: simulated Spark executors speak Graphite to the stack.

Each simulated executor sends the 192 metric names a real Spark 3.5 executor
sends (recorded in tests/data/spark-3.5.9-metric-names.txt), all at once every period,
over its own TCP connection, at a random phase within the period, as the
GraphiteSink does. For each scale it reports points/s offered, loss (sent
minus stored, by count), the catch-up (seconds from the last report until
everything was stored: Telegraf's buffer hides a writer that falls behind
for a while, so lossless alone does not mean it kept up), points/s stored
over sending and catch-up, and the CPU and peak RSS of Telegraf and
InfluxDB. The same load is then fed to InfluxDB's own [[graphite]] listener,
so the cost of the Telegraf hop is a ratio measured in the same run.

Telegraf runs as shipped: it stores only the metrics a panel or the report
reads (SPARKSCOPE_UNREAD_METRICS=drop), so a point counts as lost when its
measurement passes that filter (the globs of telegraf/telegraf.conf) and it
is not stored; --unread pass keeps (and counts) everything. InfluxDB's own
listener cannot filter and stores every line. The machine's CPU busy share
(/proc/stat) and the sender's own CPU are printed too: on 2 cores the sender
competes with what it measures. On loss, the error lines of the services'
logs say which limit was hit.

    .venv/bin/python bench/ingest.py --executors 10,100,500,1000,2000
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fnmatch
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from sparkscope.provision.go import ensure_influxd
from sparkscope.process import quiet, stop_group, wait_until
from sparkscope.store import influx
from sparkscope.probes import procstat
from sparkscope.stack import thanos
from sparkscope.store.promql import PromQuery
from sparkscope.stack.native import NativeBackend, PidFile
from sparkscope.settings import Settings
from sparkscope_testkit.sandbox import free_port, isolated_settings, throwaway_stack

ROOT = Path(__file__).resolve().parents[1]

NAMES_FILE = ROOT / "tests" / "data" / "spark-3.5.9-metric-names.txt"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
SETTLE_S = 5.0


def kept_globs() -> list[str]:
    """The measurements telegraf.conf's filter always stores (its first rule)."""
    text = (ROOT / "telegraf" / "telegraf.conf").read_text()
    block = re.search(r"\[\[processors\.filter\.rule\]\]\s*name = \[(.*?)\]", text, re.S).group(1)
    return re.findall(r'"([^"]+)"', block)


def stored_by_filter(path: str, unread: str) -> bool:
    """Whether Telegraf stores this executor metric path (namespace.measurement...)."""
    measurement = path.split(".", 1)[1]
    return unread == "pass" or any(fnmatch.fnmatchcase(measurement, g) for g in kept_globs())


def machine_busy() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def log_errors(path: Path, since: int) -> list[str]:
    """Distinct error lines (digits blanked) the service logged after byte `since`."""
    if not path.exists():
        return []
    text = path.read_bytes()[since:].decode(errors="replace")
    seen = {}
    for line in text.splitlines():
        if re.search(r"\b(E!|W!|error|err=|drop|exceed|full)", line, re.I):
            key = re.sub(r"\d+", "#", line.split(" ", 1)[-1])[:160]
            seen[key] = seen.get(key, 0) + 1
    return [f"{n}x {k}" for k, n in seen.items()][:8]


def executor_metric_paths() -> list[str]:
    """The metric paths one executor reports (source.metric...), from the recording."""
    paths = []
    for line in NAMES_FILE.read_text().split():
        parts = line.split(".", 3)
        if len(parts) == 4 and parts[2] == "1":
            paths.append(parts[3])
    return paths


@dataclass
class Usage:
    cpu_s: float
    rss_peak_mb: float


def cpu_seconds(pid: int) -> float:
    """CPU time of pid and its live descendants."""
    total = 0.0
    for member in procstat.descendants(pid):
        seconds = procstat.cpu_seconds(procstat.read(member) or "")
        if seconds is None and member == pid:
            raise ProcessLookupError(f"no process {pid}")
        total += seconds or 0.0
    return total


def rss_peak_mb(pid: int) -> float:
    """The largest peak RSS among pid and its descendants (the service's own process)."""
    peak = 0.0
    for member in procstat.descendants(pid):
        try:
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]) / 1024)
        except OSError:
            pass
    return peak


def send_load(address: tuple[str, int], app_id: str, executors: int, period_s: float, periods: int,
              rng: random.Random) -> tuple[int, float]:
    """Send `periods` reports of every executor; returns (lines sent, seconds taken)."""
    paths = [p.encode() for p in executor_metric_paths()]
    prefixes = [f"spark.{app_id}.{i}.".encode() for i in range(executors)]
    conns = [socket.create_connection(address, timeout=30) for _ in range(executors)]
    phases = sorted((rng.uniform(0, period_s), i) for i in range(executors))
    sent = 0
    start, wall = time.monotonic(), time.time()
    try:
        for period in range(periods):
            base = start + period * period_s
            for phase, i in phases:
                delay = base + phase - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                # Stamped with the time the report was due, not when it went out: a
                # sender that fell behind on a busy machine would otherwise stamp two
                # reports of one executor with the same second, and InfluxDB keeps one
                # point per series and timestamp (192 points that looked lost).
                ts = b" %d\n" % int(wall + period * period_s + phase)
                value = b" %d" % rng.randrange(1 << 30)
                payload = b"".join(prefixes[i] + p + value + ts for p in paths)
                conns[i].sendall(payload)
                sent += len(paths)
        elapsed = time.monotonic() - start
    finally:
        for c in conns:
            c.close()
    return sent, max(elapsed, periods * period_s)


def stored_points(url: str, db: str, app_id: str, since_s: int = 0) -> int:
    """Points stored for the application, counted 16 measurements at a time:
    one count over every series of thousands of executors outlasts InfluxDB's
    own query timeout (60 s in influxdb.conf), which cuts the answer short."""
    names = [row[0] for s in influx.query(url, "SHOW MEASUREMENTS", db) for row in s.get("values", [])]
    total = 0
    for i in range(0, len(names), 16):
        chunk = ", ".join('"' + n.replace('"', '\\"') + '"' for n in names[i:i + 16])
        series = influx.query(url, f'SELECT count("value") FROM {chunk} WHERE "applicationid" = \'{app_id}\' '
                                   f'AND time >= {since_s}s', db, timeout=120)
        total += sum(s["values"][0][1] for s in series)
    return total


def thanos_stored_points(query_url: str, password: str, app_id: str, since_s: int = 0) -> int:
    """Samples of the application stamped since_s or later that Thanos Query
    answers with (each ingester's copy merged into one: the replica label)."""
    # The raw samples of every series of the run, counted here: count_over_time drops
    # the metric name, and series of different names would then clash (422).
    window = max(1, int(time.time()) - since_s + 1)
    result = PromQuery(query_url, thanos.USER, password, timeout_s=120).instant(
        f'{{applicationid="{app_id}"}}[{window}s]', int(time.time() * 1000))
    return sum(1 for series in result for t, _ in series["values"] if float(t) >= since_s)


def wait_stored(count, expected: int, deadline_s: float, since_s: int = 0) -> tuple[int, float]:
    """Poll count(since_s) until the stored count (of points stamped since_s or
    later) reaches expected or stops growing; returns the count and the
    seconds it took from the call to its last growth."""
    start = time.monotonic()
    end = start + deadline_s
    last, grown_at = -1, start
    while time.monotonic() < end:
        stored = count(since_s)
        if stored != last:
            last, grown_at = stored, time.monotonic()
        if stored >= expected or time.monotonic() - grown_at > 15:
            return stored, grown_at - start
        time.sleep(1.0)
    return count(since_s), time.monotonic() - start


def measure(label: str, address, url: str, db: str, pids: dict[str, int], executors: int,
            period_s: float, periods: int, seed: int, unread: str, logs: dict[str, Path],
            warm_periods: int = 0, count=None) -> dict:
    """count(app_id, since_s): points stored; InfluxDB's at url by default."""
    app_id = f"app-{time.strftime('%Y%m%d%H%M%S')}-{executors:04d}"
    count = count or (lambda app, since: stored_points(url, db, app, since))
    stored_of = lambda since: count(app_id, since)  # noqa: E731
    rng = random.Random(seed)
    kept_share = sum(stored_by_filter(p, unread) for p in executor_metric_paths()) / len(executor_metric_paths())
    if warm_periods:
        # The application's series made first, as a running application has
        # them: its executors' first reports, stored before anything is timed.
        warm, _ = send_load(address, app_id, executors, period_s, warm_periods, rng)
        wait_stored(stored_of, round(warm * kept_share), deadline_s=600)
    since_s = int(time.time())  # the timed reports are stamped from here on
    before = {n: cpu_seconds(p) for n, p in pids.items()}
    log_sizes = {n: p.stat().st_size if p.exists() else 0 for n, p in logs.items()}
    busy_before, self_before = machine_busy(), os.times()
    sent, elapsed = send_load(address, app_id, executors, period_s, periods, rng)
    sender_cpu = (os.times().user + os.times().system - self_before.user - self_before.system) / elapsed
    # CPU is read after a settle time for the last flush, before the counting
    # queries below add their own load.
    time.sleep(SETTLE_S)
    cpu = {n: (cpu_seconds(p) - before[n]) / (elapsed + SETTLE_S) for n, p in pids.items()}
    busy_after = machine_busy()
    busy = (busy_after[0] - busy_before[0]) / max(busy_after[1] - busy_before[1], 1)
    expected = round(sent * kept_share)
    # Lossless is not enough: Telegraf's buffer (1,000,000 points) hides a
    # writer that falls behind for a while. How long after the last report it
    # took to store everything says whether it kept up; stored points over
    # the whole time is the rate it really wrote.
    stored, catch_up_s = wait_stored(stored_of, expected, deadline_s=120 + executors * 0.1, since_s=since_s)
    catch_up_s += SETTLE_S
    return {
        "path": label, "executors": executors, "offered_pts_s": sent / (periods * period_s),
        "window_s": elapsed + SETTLE_S,  # what cpu (cores) is measured over: the sending and a settle time
        "stored_pts_s": stored / (elapsed + catch_up_s), "catch_up_s": catch_up_s,
        "sent": sent, "expected": expected, "stored": stored, "lost": expected - stored,
        "cpu": cpu, "rss": {n: rss_peak_mb(p) for n, p in pids.items()}, "busy": busy, "sender": sender_cpu,
        "errors": {n: log_errors(p, log_sizes[n]) for n, p in logs.items()},
    }


def graphite_templates() -> list[str]:
    """The templates of telegraf/telegraf.conf, so both paths parse alike."""
    text = (ROOT / "telegraf" / "telegraf.conf").read_text()
    block = re.search(r"^\s*templates = \[(.*?)^\s*\]", text, re.S | re.M).group(1)
    return re.findall(r'"([^"]+)"', block)


def start_influx_graphite(state: Path) -> tuple[subprocess.Popen, int, int]:
    """A second InfluxDB with its own [[graphite]] listener, same templates."""
    http_port, graphite_port = free_port(pair_offset=2), free_port()
    templates = ",\n".join(f'    "{t}"' for t in graphite_templates())
    conf = state / "influxdb-graphite.conf"
    base = (ROOT / "influxdb" / "influxdb.conf").read_text()
    conf.write_text(base + f"""
[[graphite]]
  enabled = true
  bind-address = "127.0.0.1:{graphite_port}"
  database = "spark"
  protocol = "tcp"
  separator = "."
  batch-size = 5000
  batch-timeout = "2s"
  templates = [
{templates}
  ]
""")
    env = dict(os.environ, INFLUXDB_META_DIR=str(state / "meta"), INFLUXDB_DATA_DIR=str(state / "data"),
               INFLUXDB_DATA_WAL_DIR=str(state / "wal"), INFLUXDB_HTTP_BIND_ADDRESS=f"127.0.0.1:{http_port}",
               INFLUXDB_BIND_ADDRESS=f"127.0.0.1:{http_port + 2}")
    influxd = ensure_influxd(Path(os.environ.get("SPARKSCOPE_CACHE_DIR", Path.home() / ".cache" / "sparkscope")))
    proc = subprocess.Popen([str(influxd), "-config", str(conf)], env=env, stdout=subprocess.DEVNULL,
                            stderr=open(state / "influxd.log", "w"), start_new_session=True)
    url = f"http://127.0.0.1:{http_port}"
    if not wait_until(lambda: influx.ping(url), 60):
        raise RuntimeError(f"InfluxDB with [[graphite]] did not start; see {state / 'influxd.log'}")
    influx.ensure_database(url, "spark", "7d")
    return proc, http_port, graphite_port


# Configurations to compare with the shipped one: each a list of text
# replacements (file, the line as shipped, the line instead) in
# telegraf/telegraf.conf or influxdb/influxdb.conf. Each runs on its own stack,
# interleaved with the others round by round (--rounds).
TELEGRAF_CONF, INFLUXDB_CONF = "telegraf/telegraf.conf", "influxdb/influxdb.conf"
BATCH = ("metric_batch_size = 50000", "metric_batch_size = {}")
FSYNC = 'wal-fsync-delay = "100ms"'
VARIANTS: dict[str, list[tuple[str, str, str]]] = {
    "shipped": [],
    # Telegraf's output
    "identity": [(TELEGRAF_CONF, 'content_encoding = "gzip"', 'content_encoding = "identity"')],  # plain bodies
    "batch5000": [(TELEGRAF_CONF, BATCH[0], BATCH[1].format(5000))],  # the batch size shipped before issue 17
    "batch20000": [(TELEGRAF_CONF, BATCH[0], BATCH[1].format(20000))],  # shipped from issue 17 to issue 28
    "flush1s": [(TELEGRAF_CONF, 'flush_interval = "2s"', 'flush_interval = "1s"')],
    "flush5s": [(TELEGRAF_CONF, 'flush_interval = "2s"', 'flush_interval = "5s"')],
    # InfluxDB's storage engine
    "inmem": [(INFLUXDB_CONF, 'index-version = "tsi1"', 'index-version = "inmem"')],
    "fsync0": [(INFLUXDB_CONF, FSYNC, 'wal-fsync-delay = "0s"')],  # InfluxDB's default: fsync every write
    "fsync1s": [(INFLUXDB_CONF, FSYNC, 'wal-fsync-delay = "1s"')],
    "snapshot256m": [(INFLUXDB_CONF, FSYNC, FSYNC + '\n  cache-snapshot-memory-size = "256m"')],  # default 25m
    "cold1m": [(INFLUXDB_CONF, FSYNC, FSYNC + '\n  cache-snapshot-write-cold-duration = "1m"')],  # default 10m
    "compact4m": [(INFLUXDB_CONF, FSYNC, FSYNC + '\n  compact-throughput = "4m"\n  compact-throughput-burst = "4m"')],
}


@contextlib.contextmanager
def variant_stack(state_dir: Path, variant: str, unread: str) -> Iterator[Settings]:
    """A throwaway InfluxDB + Telegraf whose configs have the variant's
    replacements: the stack reads its configs from a copy of the project's
    root (symlinks, the changed folders copied and edited)."""
    if variant == "shipped":
        with throwaway_stack(state_dir, only=("influxdb", "telegraf"), unread_metrics=unread) as settings:
            yield settings
        return
    root = state_dir.parent / f"root-{state_dir.name}"
    root.mkdir(parents=True)
    changed = {name.split("/")[0] for name, _, _ in VARIANTS[variant]}
    for entry in ROOT.iterdir():
        if entry.name in changed:
            shutil.copytree(entry, root / entry.name)
        else:
            (root / entry.name).symlink_to(entry)
    for name, shipped, instead in VARIANTS[variant]:
        conf = root / name
        text = conf.read_text()
        if shipped not in text:
            raise SystemExit(f"variant {variant}: {shipped!r} is not in {name} any more")
        conf.write_text(text.replace(shipped, instead, 1))
    settings = dataclasses.replace(isolated_settings(state_dir, unread), root=root)
    backend = NativeBackend(settings)
    try:
        backend.up(only=("influxdb", "telegraf"), progress=quiet)
        yield settings
    finally:
        backend.down(progress=quiet)


def free_thanos_base(processes: int) -> int:
    """A base port whose whole block of Thanos ports is free on 127.0.0.1 now."""
    for base in range(23000, 60000, 97):
        sockets = []
        try:
            for port in (p for proc in thanos.layout(base, processes).processes for p in proc.ports()):
                sockets.append(socket.socket())
                sockets[-1].bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise RuntimeError("no free block of ports for Thanos")


@contextlib.contextmanager
def store_stack(state_dir: Path, store: str, unread: str) -> Iterator[tuple[Settings, list[str], object]]:
    """(settings, the store's own processes, count(app_id, since_s)) for a store
    (STORES): influxdb as shipped, or the Thanos store with N ingesters
    (replication factor 2), where Telegraf writes to InfluxDB and Thanos alike
    and only Thanos' processes and samples count as the store's."""
    if store == "influxdb":
        with variant_stack(state_dir, "shipped", unread) as settings:
            yield settings, ["influxdb"], lambda app, since: stored_points(settings.influx_admin, settings.database,
                                                                          app, since)
        return
    ingesters = int(store.removeprefix("thanos"))
    base = free_thanos_base(ingesters)
    plan = thanos.layout(base, ingesters, 2)
    with throwaway_stack(state_dir, only=("influxdb", *plan.names, "telegraf"), unread_metrics=unread,
                         SPARKSCOPE_METRICS_STORE="thanos", THANOS_PORT=str(base), THANOS_INGESTERS=str(ingesters),
                         THANOS_REPLICATION_FACTOR="2") as settings:
        password = thanos.Files(settings.state_dir / "thanos").password()
        yield settings, [plan.router.name, *(p.name for p in plan.ingesters)], \
            lambda app, since: thanos_stored_points(plan.query.http_url, password, app, since)


STORES = ("influxdb", "thanos2", "thanos3")


def print_row(r: dict) -> None:
    cpu = " ".join(f"{n} {v * 100:5.1f}%" for n, v in r["cpu"].items())
    rss = " ".join(f"{n} {v:6.0f} MB" for n, v in r["rss"].items())
    print(f"{r['path']:18} {r['executors']:6d} {r['offered_pts_s']:10.0f} {r['stored_pts_s']:10.0f} {r['sent']:9d} "
          f"{r['expected']:9d} {r['stored']:9d} {r['lost']:7d} {r['catch_up_s']:8.0f}   cpu: {cpu} "
          f"sender {r['sender'] * 100:5.1f}% "
          f"machine busy {r['busy'] * 100:3.0f}%   peak rss: {rss}   load {os.getloadavg()[0]:.1f}", flush=True)
    for name, lines in r["errors"].items():
        for line in lines:
            print(f"    {name} log: {line}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--executors", default="10,100,500,1000,2000", help="comma list of scales")
    parser.add_argument("--period", type=float, default=10.0, help="sink period in seconds (default 10)")
    parser.add_argument("--periods", type=int, default=3, help="reports per executor per scale (default 3)")
    parser.add_argument("--no-compare", action="store_true", help="skip InfluxDB's own [[graphite]] listener")
    parser.add_argument("--only-compare", action="store_true", help="only InfluxDB's own [[graphite]] listener")
    parser.add_argument("--unread", choices=("drop", "pass"), default="drop",
                        help="SPARKSCOPE_UNREAD_METRICS of the Telegraf path (default drop, as shipped)")
    parser.add_argument("--variants", default="shipped",
                        help=f"comma list of Telegraf or InfluxDB configs to run side by side, each on its own stack: "
                             f"{', '.join(VARIANTS)} (default shipped)")
    parser.add_argument("--warm", type=int, default=0, metavar="N",
                        help="first send N untimed reports per executor and wait until they are stored, so the "
                             "timed ones go to existing series, as in a running application (default 0: every "
                             "series is new, as when thousands of executors start at once)")
    parser.add_argument("--stores", default="",
                        help=f"comma list of metrics stores to compare side by side instead of --variants: "
                             f"{', '.join(STORES)} (thanosN: the Thanos store with N ingesters, replication factor 2)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run the variants this many times, order reversed every other round (default 1)")
    args = parser.parse_args()
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)}: choose from {', '.join(VARIANTS)}")
    scales = [int(x) for x in args.executors.split(",")]
    print(f"{len(executor_metric_paths())} metrics per executor, period {args.period:g} s, "
          f"{args.periods} periods per scale; machine: {os.cpu_count()} cores", flush=True)
    header = (f"{'path':18} {'execs':>6} {'offered/s':>10} {'stored/s':>10} {'sent':>9} {'expected':>9} "
              f"{'stored':>9} {'lost':>7} {'catch-up':>8}")
    print(f"Telegraf path: SPARKSCOPE_UNREAD_METRICS={args.unread}, "
          f"{sum(stored_by_filter(p, args.unread) for p in executor_metric_paths())} metrics per executor stored",
          flush=True)
    print(header, flush=True)
    results = []
    if args.stores:
        return compare_stores(args, scales)
    with tempfile.TemporaryDirectory(prefix="sparkscope-bench-") as tmp:
        runs = [] if args.only_compare else [
            variant for round_ in range(args.rounds) for variant in (variants if round_ % 2 == 0 else variants[::-1])]
        for i, variant in enumerate(runs):
            with variant_stack(Path(tmp) / f"stack-{i}", variant, args.unread) as settings:
                pids = {n: PidFile(settings.state_dir, n).running_pid() for n in ("telegraf", "influxdb")}
                logs = {n: settings.state_dir / "logs" / f"{n}.log" for n in pids}
                label = "telegraf->influxdb" if variant == "shipped" else f"telegraf({variant})"
                for n in scales:
                    r = measure(label, (settings.graphite_host, settings.graphite_port),
                                settings.influx_admin, settings.database, pids, n, args.period, args.periods, n,
                                args.unread, logs, args.warm)
                    print_row(r)
                    results.append(r)
        if not args.no_compare:
            state = Path(tmp) / "influx-graphite"
            state.mkdir()
            proc, http_port, graphite_port = start_influx_graphite(state)
            try:
                for n in scales:
                    r = measure("influxdb[[graphite]]", ("127.0.0.1", graphite_port), f"http://127.0.0.1:{http_port}",
                                "spark", {"influxdb": proc.pid}, n, args.period, args.periods, n, "pass",
                                {"influxdb": state / "influxd.log"}, args.warm)
                    print_row(r)
                    results.append(r)
            finally:
                stop_group(proc.pid, proc=proc)
    for label in dict.fromkeys(r["path"] for r in results if r["path"].startswith("telegraf")):
        mine = [r for r in results if r["path"] == label]
        lossless = [r for r in mine if r["lost"] == 0]
        if lossless:
            best = max(lossless, key=lambda r: r["offered_pts_s"])
            print(f"\n{label}: highest lossless rate {best['offered_pts_s']:.0f} points/s offered, all stored "
                  f"{best['catch_up_s']:.0f} s after the last report, {best['stored_pts_s']:.0f} points/s over the "
                  f"whole time ({best['executors']} executors at a {args.period:g} s period)")
        for n in scales:
            cpus = [sum(r["cpu"].values()) for r in mine if r["executors"] == n]
            if cpus:
                print(f"{label}: {n} executors, Telegraf + InfluxDB CPU median {statistics.median(cpus) * 100:.1f} % "
                      f"of a core over {len(cpus)} run(s), lost {sum(r['lost'] for r in mine if r['executors'] == n)}")
    # The Telegraf hop's cost: each Telegraf run against InfluxDB's own listener at the same scale.
    for label in dict.fromkeys(r["path"] for r in results if r["path"].startswith("telegraf")):
        ratios = []
        for n in scales:
            listener = [sum(r["cpu"].values()) for r in results if r["path"] == "influxdb[[graphite]]"
                        and r["executors"] == n]
            ours = [sum(r["cpu"].values()) for r in results if r["path"] == label and r["executors"] == n]
            if listener and ours and listener[0] > 0:
                ratios.append(statistics.median(ours) / listener[0])
        if ratios:
            print(f"CPU of {label} (Telegraf + InfluxDB) vs influxdb[[graphite]] alone: median ratio "
                  f"{statistics.median(ratios):.2f}x over {len(ratios)} scales")
    return 0


def compare_stores(args, scales: list[int]) -> int:
    """Each store (--stores) on its own stack, round by round in alternating
    order: points/s stored and the store's CPU per million points stored, side
    by side in one run."""
    stores = args.stores.split(",")
    unknown = [s for s in stores if s not in STORES]
    if unknown:
        raise SystemExit(f"unknown store(s) {', '.join(unknown)}: choose from {', '.join(STORES)}")
    results = []
    with tempfile.TemporaryDirectory(prefix="sparkscope-bench-stores-") as tmp:
        runs = [s for round_ in range(args.rounds) for s in (stores if round_ % 2 == 0 else stores[::-1])]
        for i, store in enumerate(runs):
            with store_stack(Path(tmp) / f"stack-{i}", store, args.unread) as (settings, own, count):
                names = ["telegraf", *own]
                pids = {n: PidFile(settings.state_dir, n).running_pid() for n in names}
                logs = {n: settings.state_dir / "logs" / f"{n}.log" for n in names}
                for n in scales:
                    r = measure(store, (settings.graphite_host, settings.graphite_port), settings.influx_admin,
                                settings.database, pids, n, args.period, args.periods, n, args.unread, logs,
                                args.warm, count=count)
                    store_cpu = sum(v for k, v in r["cpu"].items() if k in own)
                    r["store_cpu_s_per_million"] = store_cpu * r["window_s"] / max(r["stored"], 1) * 1e6
                    print_row(r)
                    print(f"    {store}: the store's own processes ({', '.join(own)}) "
                          f"{store_cpu * 100:.1f} % of a core, {r['store_cpu_s_per_million']:.1f} CPU-s per million "
                          f"points stored", flush=True)
                    results.append(r)
    print()
    for n in scales:
        for store in stores:
            mine = [r for r in results if r["path"] == store and r["executors"] == n]
            if not mine:
                continue
            rate = statistics.median(r["stored_pts_s"] for r in mine)
            per_m = statistics.median(r["store_cpu_s_per_million"] for r in mine)
            print(f"{n:5d} executors  {store:9}  stored {rate:9.0f} points/s (median of {len(mine)}), lost "
                  f"{sum(r['lost'] for r in mine)}, store CPU {per_m:6.1f} s per million points")
        base = [r for r in results if r["path"] == stores[0] and r["executors"] == n]
        for store in stores[1:]:
            mine = [r for r in results if r["path"] == store and r["executors"] == n]
            if base and mine:
                print(f"{n:5d} executors  {store} / {stores[0]}: CPU per million points "
                      f"{statistics.median(r['store_cpu_s_per_million'] for r in mine) / statistics.median(r['store_cpu_s_per_million'] for r in base):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
