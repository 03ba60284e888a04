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
from sparkscope.store.schema import INGEST_REFUSED_MEASUREMENT, TELEGRAF_WRITE_MEASUREMENT
from sparkscope.stack import rollups
from sparkscope.stack.influx_storage import REFUSAL_WINDOW_S, human_size, influx_write_problem, telegraf_refusal
from sparkscope.settings import Settings

SERVICE_NAMES = ("influxdb", "telegraf", "grafana")
BACKENDS = ("native", "compose")
HEALTH_DEADLINE_S = {"influxdb": 60.0, "telegraf": 30.0, "grafana": 120.0}


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
    }


# --- the interface -------------------------------------------------------------------------

class Backend:
    """One way of running the stack. A backend says how to start, stop and find
    each service; waiting for health, the database, the record of which backend
    runs and the status rows are the same for both."""

    name = ""
    starts_together = False

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
        wanted = [name for name in SERVICE_NAMES if name in only]
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
        deadline = HEALTH_DEADLINE_S[name] - (time.monotonic() - started)
        # A service that exits at start is not running: fail at once, not at the deadline.
        answered = wait_until(lambda: healthy() or self.processes().get(name) is None, max(deadline, 1.0))
        if answered and healthy():
            return
        exited = self.processes().get(name) is None
        self._stop((name,), lambda _: None)
        reason = "exited at start" if exited else f"did not answer at {address} within {HEALTH_DEADLINE_S[name]:.0f} s"
        raise StackError(f"{name} {reason}; {self.log_excerpt(name)}")

    def down(self, only: tuple[str, ...] = SERVICE_NAMES, progress: Progress = print) -> None:
        running = self.processes()
        names = tuple(n for n in reversed(SERVICE_NAMES) if n in only)
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
        for name in SERVICE_NAMES:
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
                elif name == "grafana":
                    row.version = (grafana_health(settings.grafana_url) or {}).get("version", row.version)
                    if influxdb_plugin_installed(settings) is False:
                        row.state = "degraded"
                        row.detail = INFLUXDB_PLUGIN_MISSING.format(where=self.plugin_install_hint())
            rows.append(row)
        return rows

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
        refused = self._refused_at_the_door()
        if refused:
            row.data += f", {sum(n for n, _ in refused.values()):,} refused"
            row.detail = "; ".join(filter(None, [row.detail, "the ingest guard refused what the schema does not "
                                   "declare (since Telegraf started): " + ", ".join(
                                       f"{reason} {n:,} (last: {last})" for reason, (n, last) in sorted(refused.items()))
                                   + ". Fix the sender, or declare the new name in src/sparkscope/store/schema.py and "
                                   "run .venv/bin/python -m sparkscope.generate"]))

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
    return recorded_backend(settings) or ("compose" if docker_engine_answers() else "native")


def open_stack(settings: Settings, backend: Optional[str] = None) -> Backend:
    name = choose_backend(settings, backend)
    if name == "compose":
        from sparkscope.stack.compose import ComposeBackend
        return ComposeBackend(settings)
    from sparkscope.stack.native import NativeBackend
    return NativeBackend(settings)
