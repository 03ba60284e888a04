"""The stack: InfluxDB, Telegraf and Grafana, run by one of two backends
behind one interface, so that `up`, `down`, `status`, `demo` and the tests
do not care which:

- native.py: local processes (InfluxDB and Telegraf built from source, the
  user's own Grafana), started by pid;
- compose.py: docker compose (`docker compose` v2 or `docker-compose` v1).

Which backend runs the stack is recorded in the state dir at `up`, so that
`down` and `status` find it again; `--backend` overrides the choice, which is
otherwise compose when a Docker engine answers, else native. Both read the
same config files and settings (settings.py); what they share, health checks,
versions, InfluxDB's statistics and the wait for health, lives in Backend.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable, Optional

from sparkscope.store import http
from sparkscope.stack import contact_points
from sparkscope.errors import SparkscopeError
from sparkscope.process import Progress, wait_until
from sparkscope.store import influx
from sparkscope.store.promql import PromQuery, PromReads
from sparkscope.store.reads import InfluxReads, Reads, Rollup
from sparkscope.store.schema import INGEST_REFUSED_MEASUREMENT, TELEGRAF_WRITE_MEASUREMENT
from sparkscope.stack import remote_store, rollups, thanos
from sparkscope.stack.influx_storage import REFUSAL_WINDOW_S, human_size, influx_write_problem, telegraf_refusal
from sparkscope.settings import Settings

SERVICE_NAMES = ("influxdb", "telegraf", "grafana")
BACKENDS = ("native", "compose")
HEALTH_DEADLINE_S = {"influxdb": 60.0, "telegraf": 30.0, "grafana": 120.0}
THANOS_HEALTH_DEADLINE_S = 60.0  # each Thanos process: ready in 1-3 s, more on a loaded machine


def thanos_layout(settings: Settings) -> thanos.Layout:
    """Where the Thanos store's processes listen (SPARKSCOPE_METRICS_STORE=thanos)."""
    try:
        return thanos.layout(settings.thanos_port, settings.thanos_ingesters, settings.thanos_replication_factor)
    except thanos.ThanosConfigError as err:
        raise StackError(f"{err}; fix it in .env") from None


def metrics_reads(settings: Settings, timeout_s: float = 10.0, rollup: Optional[Rollup] = None) -> Reads:
    """The read layer of this stack's metrics store: InfluxReads, or with the
    Thanos store PromReads (Spark's metrics through Query, as the stack's
    user; the annotator's events from InfluxDB), or with the remote store
    PromReads at the user's PromQL API with their credentials and CA. Every
    command that reads a run (top, report, compare, the demo's summary) takes
    its Reads here."""
    events = InfluxReads(settings.influx_reader, settings.database, timeout_s, rollup)
    if settings.metrics_store == remote_store.STORE_NAME:
        return PromReads(remote_store.endpoint(settings, timeout_s), events)
    if settings.metrics_store != thanos.STORE_NAME:
        return events
    files = thanos.Files(settings.state_dir / "thanos")
    try:
        password = files.password()
    except OSError:
        raise StackError(f"the Thanos store has no password at {files.password_file} yet: start the stack "
                         "with ./sparkscope up (SPARKSCOPE_METRICS_STORE=thanos)") from None
    return PromReads(PromQuery(thanos_layout(settings).query.http_url, thanos.USER, password, timeout_s), events)


def service_names(settings: Settings) -> tuple[str, ...]:
    """Every service of this stack, in the order they start: with the Thanos
    store, its processes come after InfluxDB (which keeps the events) and
    before Telegraf (which writes to both)."""
    if settings.metrics_store != thanos.STORE_NAME:
        return SERVICE_NAMES
    return ("influxdb", *thanos_layout(settings).names, "telegraf", "grafana")


def wanted_services(settings: Settings, only: tuple[str, ...]) -> tuple[str, ...]:
    """The services `only` asks for, in start order; the whole stack
    (SERVICE_NAMES, what up and down mean without names) takes the metrics
    store's processes along."""
    names = service_names(settings)
    unknown = sorted(set(only) - set(names))
    if unknown:
        raise StackError(f"no {', '.join(unknown)} in this stack: it runs {', '.join(names)} "
                         f"(SPARKSCOPE_METRICS_STORE={settings.metrics_store}, THANOS_INGESTERS="
                         f"{settings.thanos_ingesters})")
    everything = set(only) >= set(SERVICE_NAMES)
    return tuple(name for name in names if name in only or everything)


class StackError(SparkscopeError):
    """The stack could not be started or stopped; the message says what to do next."""


# Telegraf's own report (inputs.internal) comes every 10 s and is stored at its next flush: a
# Telegraf younger than this has simply not reported yet.
TELEGRAF_FIRST_REPORT_S = 60

@dataclass
class ServiceStatus:
    name: str
    backend: str
    # up | degraded (InfluxDB answers but cannot store points; Grafana lacks its InfluxDB plugin)
    # | unhealthy | down
    # | not installed (natively, Grafana: the user has none; the rest of the stack works)
    state: str
    process: str  # "pid 1234", "container sparkscope-influxdb-1", or "-"
    url: str
    version: str = "-"
    data: str = ""  # InfluxDB: its database's size and series count
    detail: str = ""  # what is wrong and what to do; may span lines


# --- what both backends check --------------------------------------------------------

def tcp_open(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def grafana_health(url: str) -> Optional[dict]:
    """Grafana's /api/health when its database is ok (it then serves the API), else None."""
    try:
        with http.urlopen(f"{url}/api/health", timeout=2) as resp:
            body = json.loads(resp.read())
            return body if resp.status == 200 and body.get("database") == "ok" else None
    except (OSError, ValueError):
        return None


# Grafana 13's InfluxDB datasource is a plugin (id influxdb); without it every panel fails.
INFLUXDB_PLUGIN_MISSING = (
    "has no InfluxDB datasource plugin (id influxdb), so every panel fails: Grafana 13 ships it as the "
    "plugin grafana-influxdb-datasource. Install it with `grafana cli plugins install influxdb`{where}, or "
    "set GF_PLUGINS_PREINSTALL=influxdb (influxdb@<version>@<zip URL> from a mirror without internet), then "
    "./sparkscope up grafana again (docs/upgrading.md, \"Grafana 12 to 13\")")


def influxdb_plugin_installed(settings: Settings) -> Optional[bool]:
    """Whether the running Grafana has the influxdb datasource plugin (built in up to 12.x, a
    plugin in 13); None when Grafana cannot tell (not answering, or refusing our admin)."""
    request = urllib.request.Request(f"{settings.grafana_url}/api/plugins/influxdb/settings")
    request.add_header("Authorization", http.basic_auth(settings.grafana_user, settings.grafana_password))
    try:
        with http.urlopen(request, timeout=5) as resp:
            return resp.status == 200
    except urllib.error.HTTPError as err:
        return False if err.code == 404 else None
    except OSError:
        return None


def health_checks(settings: Settings) -> dict[str, tuple[Callable[[], bool], str]]:
    """Per service: a check that it answers, and the address users reach it at."""
    return {
        "influxdb": (lambda: influx.ping(settings.influx_url), settings.influx_url),
        "telegraf": (lambda: tcp_open(settings.graphite_host, settings.graphite_port)
                     and tcp_open(settings.graphite_host, settings.events_port),
                     f"tcp://{settings.graphite_bind}:{settings.graphite_port} (Graphite), "
                     f"{settings.events_url} (annotator events)"),
        "grafana": (lambda: grafana_health(settings.grafana_url) is not None, settings.grafana_url),
        **(thanos_health_checks(settings) if settings.metrics_store == thanos.STORE_NAME else {}),
    }


def thanos_ready(url: str, password: Callable[[], str]) -> bool:
    """A Thanos process answers /-/ready with 200 (Query: its endpoints looked up;
    receive: its hashring or TSDB ready), asked with the stack's Basic auth."""
    try:
        request = urllib.request.Request(f"{url}/-/ready")
        request.add_header("Authorization", http.basic_auth(thanos.USER, password()))
        with http.urlopen(request, timeout=2) as resp:
            return resp.status == 200
    except (OSError, ValueError):
        return False


def thanos_health_checks(settings: Settings) -> dict[str, tuple[Callable[[], bool], str]]:
    files = thanos.Files(settings.state_dir / "thanos")
    plan = thanos_layout(settings)
    checks = {}
    for process in plan.processes:
        if process is plan.query:
            address = f"{process.http_url} (PromQL, Basic auth {thanos.USER})"
        elif process is plan.router:
            address = f"{process.remote_write_url} (remote write, client certificate)"
        elif process is plan.compact:
            address = f"{process.http_url} (block viewer, Basic auth {thanos.USER})"
        else:
            address = f"grpc://{process.grpc_address} (StoreAPI, client certificate)"
        checks[process.name] = ((lambda url=process.http_url: thanos_ready(url, files.password)), address)
    return checks


# --- the interface -------------------------------------------------------------------------

class Backend:
    """One way of running the stack. A backend says how to start, stop and find
    each service; waiting for health, the database, the record of which backend
    runs and the status rows are the same for both."""

    name = ""
    starts_together = False
    runs_thanos = False  # the Thanos store's processes (natively only, for now)

    def __init__(self, settings: Settings):
        self.settings = settings

    # what a backend provides
    def _start(self, names: tuple[str, ...], progress: Progress) -> dict[str, str]:
        """Start these services (none of them running); returns each one's process label."""
        raise NotImplementedError

    def _stop(self, names: tuple[str, ...], progress: Progress, everything: bool = False) -> None:
        """Stop these running services; everything: the whole stack was asked to stop."""
        raise NotImplementedError

    def prepare(self, names: tuple[str, ...], progress: Progress) -> None:
        """Build or fetch what these services need, before any start's deadline is counted."""

    def processes(self) -> dict[str, Optional[str]]:
        """Each service's process label ("pid 1234", "container x") while it runs, else None."""
        raise NotImplementedError

    def log_hint(self, name: str) -> str:
        """Where the service's log is, as a user would look."""
        raise NotImplementedError

    def log_excerpt(self, name: str) -> str:
        """The end of the service's log for an error message, or where to read it."""
        return self.log_hint(name)

    def started_at(self, name: str) -> Optional[datetime]:
        """When the service's current process started (UTC), where the backend knows."""
        return None

    def recent_log(self, name: str, seconds: float) -> list[str]:
        """The service's log lines of about the last `seconds` (more is fine: callers
        read the lines' own times); [] when there is no log to read."""
        return []

    def versions(self) -> dict[str, str]:
        """What each service is, when the service itself does not say (Telegraf)."""
        return {}

    # the same for both
    def up(self, only: tuple[str, ...] = SERVICE_NAMES, progress: Progress = print) -> None:
        settings = self.settings
        if settings.metrics_store in (thanos.STORE_NAME, remote_store.STORE_NAME) and not self.runs_thanos:
            raise StackError(f"SPARKSCOPE_METRICS_STORE={settings.metrics_store} runs with the native backend only "
                             f"for now: ./sparkscope up --backend native (docs/scale.md)")
        missing = settings.missing_secrets()
        if missing:
            raise StackError(f"{', '.join(missing)} not set (or the placeholder of .env.example): set them in "
                             f".env, or leave them empty and ./sparkscope up writes random ones (mode 0600)")
        other = recorded_backend(settings)
        if other not in (None, self.name) and any(open_stack(settings, other).processes().values()):
            raise StackError(f"the {other} stack is running; stop it first (./sparkscope down), then "
                             f"./sparkscope up --backend {self.name}")
        checks = health_checks(settings)
        running = self.processes()
        wanted = list(wanted_services(settings, only))
        for name in wanted:
            healthy, address = checks[name]
            if running.get(name) is None and healthy():
                raise StackError(f"{name}: something else already answers at {address}; stop it or change "
                                 f"its port in .env")
        record_backend(settings, self.name)
        for name in wanted:
            if running.get(name) is not None and checks[name][0]():
                progress(f"{name:9} already running  {checks[name][1]}")
        to_start = tuple(n for n in wanted if running.get(n) is None or not checks[n][0]())
        if "grafana" in to_start:
            # Grafana reads its contact points (.env ALERT_*) when it starts, from this file.
            contact_points.sync(settings.root / "grafana" / "provisioning" / "alerting",
                                dict(settings.alert_contacts), progress)
        self.prepare(to_start, progress)
        # Natively each service starts once the one before answers (InfluxDB first,
        # so its database exists before Telegraf writes); compose orders them itself.
        groups = [to_start] if self.starts_together else [(n,) for n in to_start]
        for group in filter(None, groups):
            started = time.monotonic()
            labels = self._start(group, progress)
            for name in group:
                self._wait_healthy(name, started)
                if name == "influxdb":
                    # Users first: with authentication on, nothing else gets in without them.
                    influx.ensure_users(settings.influx_users, settings.database, settings.retention)
                    rollups.ensure_rollups(settings.influx_admin, settings.database, settings.retention)
                progress(f"{name:9} up in {time.monotonic() - started:4.1f} s  {labels.get(name, '')}  "
                         f"{checks[name][1]}")
                if name == "grafana" and influxdb_plugin_installed(settings) is False:
                    progress(f"grafana   {INFLUXDB_PLUGIN_MISSING.format(where=self.plugin_install_hint())}")

    def _wait_healthy(self, name: str, started: float) -> None:
        healthy, address = health_checks(self.settings)[name]
        limit = HEALTH_DEADLINE_S.get(name, THANOS_HEALTH_DEADLINE_S)
        deadline = limit - (time.monotonic() - started)
        # A service that exits at start is not running: fail at once, not at the deadline.
        answered = wait_until(lambda: healthy() or self.processes().get(name) is None, max(deadline, 1.0))
        if answered and healthy():
            return
        exited = self.processes().get(name) is None
        self._stop((name,), lambda _: None)
        reason = "exited at start" if exited else f"did not answer at {address} within {limit:.0f} s"
        raise StackError(f"{name} {reason}; {self.log_excerpt(name)}")

    def down(self, only: tuple[str, ...] = SERVICE_NAMES, progress: Progress = print) -> None:
        running = self.processes()
        names = tuple(reversed(wanted_services(self.settings, only)))
        self._stop(tuple(n for n in names if running.get(n) is not None), progress,
                   everything=set(only) >= set(SERVICE_NAMES))
        for name in names:
            progress(f"{name:9} {'stopped (' + running[name] + ')' if running.get(name) else 'not running'}")
        if not any(self.processes().values()):
            forget_backend(self.settings)

    def plugin_install_hint(self) -> str:
        """Where `grafana cli plugins install` must put a plugin for this backend's Grafana."""
        return ""

    def status(self) -> list[ServiceStatus]:
        settings = self.settings
        checks = health_checks(settings)
        running = self.processes()
        versions = self.versions()
        # Whether InfluxDB takes points, from what it answered Telegraf's writes: status
        # itself writes nothing (a status every minute must not touch the user's data).
        refusal = telegraf_refusal(self.recent_log("telegraf", REFUSAL_WINDOW_S),
                                   since=self.started_at("influxdb")) if running.get("telegraf") else None
        rows = []
        for name in service_names(settings):
            healthy, address = checks[name]
            row = ServiceStatus(name, self.name, "down", running.get(name) or "-", address,
                                versions.get(name, "-"))
            if running.get(name) is None:
                row.detail = f"not running ({self.log_hint(name)}); start it: ./sparkscope up {name}"
            elif not healthy():
                row.state = "unhealthy"
                row.detail = f"runs but does not answer at {address}; {self.log_hint(name)}"
            else:
                row.state = "up"
                if name == "influxdb":
                    self._influx_row(row, refusal)
                elif name == "telegraf":
                    self._telegraf_row(row)
                    if refusal:
                        row.state = "degraded"
                        row.detail = "; ".join(filter(None, [
                            f"InfluxDB refused its writes in the last minute ({refusal}); it keeps the points "
                            f"and retries: see influxdb above", row.detail]))
                elif name == thanos.QUERY:
                    self._thanos_query_row(row)
                elif name == thanos.COMPACT:
                    self._thanos_compact_row(row)
                elif name == thanos.STORE:
                    self._thanos_store_row(row)
                elif name == "grafana":
                    row.version = (grafana_health(settings.grafana_url) or {}).get("version", row.version)
                    if influxdb_plugin_installed(settings) is False:
                        row.state = "degraded"
                        row.detail = INFLUXDB_PLUGIN_MISSING.format(where=self.plugin_install_hint())
            rows.append(row)
        if settings.metrics_store == remote_store.STORE_NAME:
            query = remote_store.endpoint(settings, timeout_s=5)
            state, detail = remote_store.check(query)
            rows.append(ServiceStatus(remote_store.ROW, "remote", state, "-", f"{query.url} (PromQL)",
                                      detail=detail))
        return rows

    def _thanos_query_row(self, row: ServiceStatus) -> None:
        """Which ingesters Query reaches (its /api/v1/stores): one down is survived
        (the replicas), and said, so that it is started again."""
        plan = thanos_layout(self.settings)
        try:
            found = json.loads(self._thanos_get(f"{plan.query.http_url}/api/v1/stores")).get("data", {})
            stores = [*found.get("receive", []), *found.get("store", [])]
        except (OSError, ValueError, AttributeError) as err:
            row.data = f"ingesters: unknown ({err})"
            return
        reached = {store.get("name") for store in stores if store.get("lastError") is None}
        missing = [p.name for p in plan.ingesters if p.grpc_address not in reached]
        row.data = f"reaches {len(plan.ingesters) - len(missing)} of {len(plan.ingesters)} ingesters"
        if plan.store.grpc_address not in reached:
            row.state = "degraded"
            row.data += ", not the store gateway"
            row.detail = (f"does not reach {plan.store.name}: answers lack what the ingesters no longer keep "
                          f"(older than THANOS_RECEIVE_RETENTION={self.settings.thanos_receive_retention}); "
                          f"start it: ./sparkscope up {plan.store.name}")
        else:
            row.data += " and the store gateway"
        if missing:
            row.state = "degraded"
            row.detail = (f"does not reach {', '.join(missing)}: each series is on {plan.replication_factor} "
                          f"ingesters, so answers stay whole while fewer than {plan.replication_factor} are "
                          f"missing; start them: ./sparkscope up {' '.join(missing)}")

    def _thanos_get(self, url: str) -> bytes:
        """A Thanos process's HTTP answer, with the store's Basic auth (OSError when it does not answer)."""
        request = urllib.request.Request(url)
        password = thanos.Files(self.settings.state_dir / "thanos").password()
        request.add_header("Authorization", http.basic_auth(thanos.USER, password))
        with http.urlopen(request, timeout=5) as resp:
            return resp.read()

    def _thanos_store_row(self, row: ServiceStatus) -> None:
        """How many of the bucket's blocks the store gateway serves (its own count,
        thanos_bucket_store_blocks_loaded; it looks for new ones every few minutes)."""
        plan = thanos_layout(self.settings)
        try:
            text = self._thanos_get(f"{plan.store.http_url}/metrics").decode(errors="replace")
        except (OSError, ValueError) as err:
            row.data = f"blocks served: unknown ({err})"
            return
        found = re.search(r"^thanos_bucket_store_blocks_loaded(?:\{[^}]*\})? (\S+)$", text, re.MULTILINE)
        row.data = f"serves {float(found.group(1)):.0f} blocks of the bucket" if found else \
            "blocks served: not reported"

    def _thanos_compact_row(self, row: ServiceStatus) -> None:
        """What the bucket holds per resolution, and whether it takes new blocks:
        a bucket that does not is said here (the compactor's log says it too, on
        every pass), while Query goes on answering from what is there."""
        bucket = thanos.Files(self.settings.state_dir / "thanos").bucket
        row.data = thanos.bucket_summary(bucket)
        problem = thanos.bucket_problem(bucket)
        if problem:
            row.state = "degraded"
            row.detail = problem
        elif halted := thanos.compactor_halted(self.recent_log(thanos.COMPACT, 3600)):
            row.state = "degraded"
            row.detail = (f"the compactor stopped working on the bucket: {halted}; Query still answers. "
                          f"{self.log_hint(thanos.COMPACT)}")

    def _telegraf_row(self, row: ServiceStatus) -> None:
        """Telegraf's own count of what it holds and what it lost (inputs.internal:
        internal_write, written every 10 s; counters start at 0 when Telegraf starts)."""
        settings = self.settings
        try:
            series = influx.query(settings.influx_reader,
                                  'SELECT last("buffer_size"), last("buffer_limit"), last("metrics_dropped") '
                                  f'FROM "{TELEGRAF_WRITE_MEASUREMENT}" '
                                  'WHERE time > now() - 2m AND "output" = \'influxdb\'',
                                  settings.database)
        except influx.InfluxError as err:
            row.data = f"buffer: unknown ({err})"
            return
        if not series:
            started = self.started_at("telegraf")
            age = (datetime.now(timezone.utc) - started).total_seconds() if started else None
            if age is not None and age < TELEGRAF_FIRST_REPORT_S:
                row.data = (f"buffer: no report yet (Telegraf started {max(0, int(age))} s ago; "
                            f"it reports every 10 s)")
            else:
                row.data = "buffer: no report in the last 2 min (InfluxDB unreachable for Telegraf?)"
            return
        _, size, limit, dropped = series[0]["values"][0]
        row.data = f"buffer {int(size or 0):,} of {int(limit or 0):,} points"
        if dropped:  # the stack works; what was lost is said, not made a failure
            row.data += f", {int(dropped):,} dropped"
            row.detail = (f"Telegraf dropped {int(dropped):,} points since it started: InfluxDB could not take them "
                          f"before its buffer (TELEGRAF_BUFFER_LIMIT={settings.telegraf_buffer_limit:,}) filled up")
        if settings.metrics_store in (thanos.STORE_NAME, remote_store.STORE_NAME):
            self._telegraf_prometheus_output(row, settings.metrics_store)
        refused = self._refused_at_the_door()
        if refused:
            row.data += f", {sum(n for n, _ in refused.values()):,} refused"
            row.detail = "; ".join(filter(None, [row.detail, "the ingest guard refused what the schema does not "
                                   "declare (since Telegraf started): " + ", ".join(
                                       f"{reason} {n:,} (last: {last})" for reason, (n, last) in sorted(refused.items()))
                                   + ". Fix the sender, or declare the new name in src/sparkscope/store/schema.py and "
                                   "run .venv/bin/python -m sparkscope.generate"]))

    def _telegraf_prometheus_output(self, row: ServiceStatus, alias: str) -> None:
        """What Telegraf's remote write (telegraf/thanos.conf or remote.conf, alias thanos or
        remote: the store's name) holds and dropped."""
        try:
            series = influx.query(self.settings.influx_reader,
                                  'SELECT last("buffer_size"), last("metrics_dropped") '
                                  f'FROM "{TELEGRAF_WRITE_MEASUREMENT}" '
                                  f'WHERE time > now() - 2m AND "output" = \'http\' AND "alias" = \'{alias}\'',
                                  self.settings.database)
        except influx.InfluxError:
            return
        where = "Thanos" if alias == thanos.STORE_NAME else "the remote store"
        if not series:
            row.data += f"; to {where}: no report in the last 2 min"
            return
        _, size, dropped = series[0]["values"][0]
        row.data += f"; to {where}: buffer {int(size or 0):,} points" + (f", {int(dropped):,} dropped" if dropped else "")

    def _refused_at_the_door(self) -> dict[str, tuple[int, str]]:
        """What Telegraf's ingest guard refused, per reason: (points, the last one's name, made
        printable: a sender chose it). Its counts start at 0 when Telegraf starts; the last hour's."""
        try:
            series = influx.query(self.settings.influx_reader,
                                  f'SELECT last("points"), last("last") FROM "{INGEST_REFUSED_MEASUREMENT}" '
                                  'WHERE time > now() - 1h GROUP BY "refusal"', self.settings.database)
        except influx.InfluxError:
            return {}
        printable = lambda text: "".join(c if c.isprintable() else "?" for c in str(text or ""))[:120]
        return {printable(s["tags"]["refusal"]): (int(s["values"][0][1] or 0), printable(s["values"][0][2]))
                for s in series}

    def _influx_row(self, row: ServiceStatus, refusal: Optional[str]) -> None:
        settings = self.settings
        row.version = influx.server_version(settings.influx_url) or row.version
        try:
            stats = influx.database_stats(settings.influx_admin, settings.database)
            row.data = f"database {settings.database}: {human_size(stats.size_bytes)}, {stats.series:,} series"
        except influx.InfluxError as err:
            row.data = f"database {settings.database}: no statistics ({err})"
        problem = influx_write_problem(settings, refusal)
        if problem:
            row.state, row.detail = "degraded", f"answers queries but {problem}"


# --- which backend -----------------------------------------------------------------------

def docker_engine_answers() -> bool:
    """A Docker engine answers (`docker info` succeeds), not merely a docker CLI."""
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def recorded_backend(settings: Settings) -> Optional[str]:
    try:
        name = (settings.state_dir / "backend").read_text().strip()
    except OSError:
        return None
    return name if name in BACKENDS else None


def record_backend(settings: Settings, name: str) -> None:
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    (settings.state_dir / "backend").write_text(name + "\n")


def forget_backend(settings: Settings) -> None:
    (settings.state_dir / "backend").unlink(missing_ok=True)


def choose_backend(settings: Settings, requested: Optional[str] = None) -> str:
    """--backend if given, else the one recorded at up, else compose when a Docker engine answers."""
    if requested:
        if requested not in BACKENDS:
            raise StackError(f"no backend {requested!r}: choose {' or '.join(BACKENDS)}")
        return requested
    if settings.metrics_store in (thanos.STORE_NAME, remote_store.STORE_NAME):  # compose runs neither yet
        return recorded_backend(settings) or "native"
    return recorded_backend(settings) or ("compose" if docker_engine_answers() else "native")


def open_stack(settings: Settings, backend: Optional[str] = None) -> Backend:
    name = choose_backend(settings, backend)
    if name == "compose":
        from sparkscope.stack.compose import ComposeBackend
        return ComposeBackend(settings)
    from sparkscope.stack.native import NativeBackend
    return NativeBackend(settings)
