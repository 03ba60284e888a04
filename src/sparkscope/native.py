"""The native runner: InfluxDB, Telegraf and Grafana as local processes.

They run with the same config files Docker mounts (influxdb/, telegraf/,
grafana/, dashboards/); only paths and listen addresses differ, and those go
in through each program's own environment-variable overrides. Every process
is started in its own session, its pid recorded in <state>/pids, and stopped
by that pid only.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from sparkscope import influx
from sparkscope.install import Progress, ensure_grafana, ensure_influxd, ensure_telegraf
from sparkscope.settings import PLACEHOLDER_PASSWORD, Settings

HEALTH_DEADLINE_S = {"influxdb": 60.0, "telegraf": 30.0, "grafana": 120.0}


class StackError(RuntimeError):
    """The stack could not be started or stopped; the message says what to do next."""


@dataclass
class Service:
    name: str
    argv: list[str]
    env: dict[str, str]
    extra_dirs: list[Path] = field(default_factory=list)


def tcp_open(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def grafana_healthy(url: str) -> bool:
    """Grafana's /api/health says its database is ok (it then serves the API)."""
    try:
        with urllib.request.urlopen(f"{url}/api/health", timeout=2) as resp:
            return resp.status == 200 and json.loads(resp.read()).get("database") == "ok"
    except (OSError, ValueError):
        return False


def wait_until(check: Callable[[], bool], deadline_s: float, interval_s: float = 0.25) -> bool:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(interval_s)
    return check()


# --- pid files ---------------------------------------------------------------

def _start_ticks(pid: int) -> str | None:
    """The process start time from /proc, so a recycled pid is never mistaken for ours."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


class PidFile:
    def __init__(self, state_dir: Path, name: str):
        self.path = state_dir / "pids" / f"{name}.pid"

    def write(self, pid: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(f"{pid} {_start_ticks(pid) or ''}\n")

    def running_pid(self) -> int | None:
        """The recorded pid if that very process still runs, else None."""
        try:
            pid_text, _, ticks = self.path.read_text().strip().partition(" ")
            pid = int(pid_text)
        except (OSError, ValueError):
            return None
        if _start_ticks(pid) is None or _start_ticks(pid) != ticks:
            return None
        # A service that exited at start stays a zombie until `up` (its parent)
        # reaps it; it is not running, and up must not wait out the deadline.
        if _zombie(pid):
            return None
        return pid

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


# --- the three services -------------------------------------------------------

SERVICE_NAMES = ("influxdb", "telegraf", "grafana")


def influx_dirs(state: Path) -> dict[str, Path]:
    """Where the native InfluxDB keeps its files, by the config key they override."""
    base = state / "influxdb"
    return {"INFLUXDB_META_DIR": base / "meta", "INFLUXDB_DATA_DIR": base / "data",
            "INFLUXDB_DATA_WAL_DIR": base / "wal"}


def health_checks(settings: Settings) -> dict[str, tuple[Callable[[], bool], str]]:
    """Per service: a check that it answers, and the address users reach it at."""
    return {
        "influxdb": (lambda: influx.ping(settings.influx_url), settings.influx_url),
        "telegraf": (lambda: tcp_open(settings.graphite_host, settings.graphite_port)
                     and tcp_open(settings.graphite_host, settings.events_port),
                     f"{settings.graphite_bind}:{settings.graphite_port} (Graphite, TCP), "
                     f"{settings.events_url} (annotator events)"),
        "grafana": (lambda: grafana_healthy(settings.grafana_url),
                    f"{settings.grafana_url} (HTTP API; the web UI is not built natively)"),
    }


def build_services(settings: Settings, only: tuple[str, ...] = SERVICE_NAMES,
                   progress: Progress = print) -> list[Service]:
    """Install (or find cached) binaries and describe how to run each service."""
    root, state = settings.root, settings.state_dir
    services = []
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("INFLUXDB_", "GF_"))}
    shared = {"INFLUX_URL": settings.influx_url, "SPARKSCOPE_DB": settings.database}
    grafana_dirs = [state / "grafana" / d for d in ("data", "logs", "plugins")]
    if "influxdb" in only:
        influxd = ensure_influxd(settings.cache_dir, progress)
        services.append(Service(
            name="influxdb",
            argv=[str(influxd), "-config", str(root / "influxdb" / "influxdb.conf")],
            env={
                **base_env,
                **{key: str(path) for key, path in influx_dirs(state).items()},
                "INFLUXDB_HTTP_BIND_ADDRESS": f"{settings.http_bind}:{settings.influxdb_port}",
                # The backup RPC port sits two above the HTTP port (8086 -> 8088),
                # so two stacks on one machine never collide on it.
                "INFLUXDB_BIND_ADDRESS": f"127.0.0.1:{settings.influxdb_port + 2}",
            },
        ))
    if "telegraf" in only:
        telegraf = ensure_telegraf(settings.cache_dir, progress)
        services.append(Service(
            name="telegraf",
            argv=[str(telegraf), "--config", str(root / "telegraf" / "telegraf.conf")],
            env={
                **base_env,
                **shared,
                "GRAPHITE_LISTEN": f"{settings.graphite_bind}:{settings.graphite_port}",
                "EVENTS_LISTEN": f"{settings.graphite_bind}:{settings.events_port}",
            },
        ))
    if "grafana" in only:
        from sparkscope.grafana_build import grafana_command

        grafana_home = ensure_grafana(settings.cache_dir, progress)
        services.append(Service(
            name="grafana",
            argv=grafana_command(grafana_home, root / "grafana" / "grafana.ini"),
            env={
                **base_env,
                **shared,
                "GF_PATHS_DATA": str(grafana_dirs[0]),
                "GF_PATHS_LOGS": str(grafana_dirs[1]),
                "GF_PATHS_PLUGINS": str(grafana_dirs[2]),
                "GF_PATHS_PROVISIONING": str(root / "grafana" / "provisioning"),
                "GF_SERVER_HTTP_ADDR": settings.http_bind,
                "GF_SERVER_HTTP_PORT": str(settings.grafana_port),
                "GF_SECURITY_ADMIN_USER": settings.grafana_user,
                "GF_SECURITY_ADMIN_PASSWORD": settings.grafana_password,
                "SPARKSCOPE_DASHBOARDS_DIR": str(root / "dashboards"),
                "GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH": str(root / "dashboards" / "spark-executors.json"),
            },
            extra_dirs=grafana_dirs,
        ))
    return services


def ensure_env_file(settings: Settings, progress: Progress = print) -> bool:
    """Write .env with a random Grafana password when the user has none yet."""
    env_path = settings.root / ".env"
    if env_path.exists() or os.environ.get("GRAFANA_ADMIN_PASSWORD"):
        return False
    template = (settings.root / ".env.example").read_text()
    password = secrets.token_urlsafe(18)
    env_path.write_text(template.replace(f"GRAFANA_ADMIN_PASSWORD={PLACEHOLDER_PASSWORD}",
                                         f"GRAFANA_ADMIN_PASSWORD={password}"))
    env_path.chmod(0o600)
    progress(f"wrote {env_path} with a random Grafana admin password (user {settings.grafana_user})")
    return True


def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join("    " + l for l in path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "    (no log)"


def start_service(svc: Service, state: Path) -> int:
    log_path = state / "logs" / f"{svc.name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    for d in svc.extra_dirs:
        d.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        log.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting {' '.join(svc.argv)}\n".encode())
        log.flush()
        proc = subprocess.Popen(svc.argv, env=svc.env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, cwd=state)
    PidFile(state, svc.name).write(proc.pid)
    return proc.pid


def up(settings: Settings, only: tuple[str, ...] = SERVICE_NAMES, progress: Progress = print) -> list[Service]:
    if settings.password_is_placeholder:
        raise StackError(
            "GRAFANA_ADMIN_PASSWORD is the placeholder from .env.example: set your own in .env "
            "(or delete .env and ./sparkscope up writes one with a random password)"
        )
    services = build_services(settings, only, progress)
    checks = health_checks(settings)
    state = settings.state_dir
    for svc in services:
        healthy, address = checks[svc.name]
        pidfile = PidFile(state, svc.name)
        if pidfile.running_pid() is not None and healthy():
            progress(f"{svc.name:9} already running  {address}")
            continue
        if pidfile.running_pid() is None and healthy():
            raise StackError(
                f"{svc.name}: something else already answers at {address}; stop it or change "
                f"its port in .env"
            )
        started = time.monotonic()
        pid = start_service(svc, state)
        if not wait_until(lambda: healthy() or pidfile.running_pid() is None,
                          HEALTH_DEADLINE_S[svc.name]) or not healthy():
            log_path = state / "logs" / f"{svc.name}.log"
            stop_pid(pid)
            pidfile.clear()
            raise StackError(
                f"{svc.name} did not become healthy within {HEALTH_DEADLINE_S[svc.name]:.0f} s; "
                f"last log lines ({log_path}):\n{_log_tail(log_path)}"
            )
        if svc.name == "influxdb":
            influx.ensure_database(settings.influx_url, settings.database, settings.retention)
        progress(f"{svc.name:9} up in {time.monotonic() - started:4.1f} s  pid {pid}  {address}")
    return services


def stop_pid(pid: int, deadline_s: float = 15.0) -> None:
    """SIGTERM the process group we started, then SIGKILL after the deadline."""
    ticks = _start_ticks(pid)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        if wait_until(lambda: _start_ticks(pid) != ticks or _zombie(pid), deadline_s, 0.1):
            return


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def down(settings: Settings, only: tuple[str, ...] = SERVICE_NAMES, progress: Progress = print) -> None:
    for name in reversed(SERVICE_NAMES):
        if name not in only:
            continue
        pidfile = PidFile(settings.state_dir, name)
        pid = pidfile.running_pid()
        if pid is None:
            progress(f"{name:9} not running")
        else:
            stop_pid(pid)
            progress(f"{name:9} stopped (pid {pid})")
        pidfile.clear()


def status(settings: Settings) -> list[tuple[str, str, str]]:
    """(service, state, detail) rows; state is up, degraded (InfluxDB answers but
    cannot store points), unhealthy or down. A detail may span lines."""
    checks = health_checks(settings)
    rows = []
    for name in SERVICE_NAMES:
        healthy, address = checks[name]
        pid = PidFile(settings.state_dir, name).running_pid()
        log_path = settings.state_dir / "logs" / f"{name}.log"
        if pid is None:
            detail = f"not running (log: {log_path})"
            disk = influx_disk_problem(settings) if name == "influxdb" else None
            rows.append((name, "down", f"{detail}\n{disk}" if disk else detail))
        elif healthy():
            problem = influx_write_problem(settings) if name == "influxdb" else None
            if problem:
                rows.append((name, "degraded", f"pid {pid} answers queries but {problem}"))
            else:
                rows.append((name, "up", f"pid {pid}  {address}"))
        else:
            rows.append((name, "unhealthy", f"pid {pid} runs but {address} does not answer; see {log_path}"))
    return rows


# --- can InfluxDB store points? ---------------------------------------------------

# Below this much free space (or 5 % of a small filesystem) InfluxDB's next
# WAL segment or compaction can fail at any moment.
LOW_DISK_BYTES = 64 * 2**20


@dataclass
class DiskState:
    path: Path  # the InfluxDB directory checked
    mount: Path  # the mount point holding it
    free_bytes: int  # available to unprivileged users, as df shows
    size_bytes: int
    read_only: bool

    @property
    def low(self) -> bool:
        return self.free_bytes < min(LOW_DISK_BYTES, self.size_bytes // 20)


def _mount_point(path: Path) -> Path:
    path = path.resolve()
    device = path.stat().st_dev
    while path.parent != path and path.parent.stat().st_dev == device:
        path = path.parent
    return path


def influx_disks(settings: Settings) -> list[DiskState]:
    """The filesystems holding InfluxDB's meta, data and WAL directories (each once)."""
    seen: dict[int, DiskState] = {}
    for path in influx_dirs(settings.state_dir).values():
        try:
            device = path.stat().st_dev
            if device in seen:
                continue
            fs = os.statvfs(path)
            seen[device] = DiskState(path, _mount_point(path), fs.f_bavail * fs.f_frsize,
                                     fs.f_blocks * fs.f_frsize, bool(fs.f_flag & os.ST_RDONLY))
        except OSError:
            continue  # not created yet: InfluxDB never ran here
    return list(seen.values())


def _size(n: float) -> str:
    """Bytes as df -h shows them: 0 B, 3.2 MB, 14.0 GB."""
    unit = "B"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            break
        n /= 1024
    return f"{n:.0f} B" if unit == "B" else f"{n:.1f} {unit}"


RESTART_INFLUXDB = "./sparkscope down influxdb && ./sparkscope up influxdb"


def influx_disk_problem(settings: Settings) -> str | None:
    """A read-only filesystem under InfluxDB's directories, for a stopped InfluxDB
    (it cannot start there)."""
    for disk in influx_disks(settings):
        if disk.read_only:
            return (f"InfluxDB's directory {disk.path} is on a read-only filesystem ({disk.mount}); "
                    f"InfluxDB cannot start or store points there. Find out why (mount | grep "
                    f"'{disk.mount}'; a disk error makes the kernel remount read-only: dmesg), make it "
                    f"writable, then: ./sparkscope up influxdb")
    return None


def telegraf_buffer_limit(settings: Settings) -> str:
    """metric_buffer_limit from telegraf/telegraf.conf, for messages."""
    try:
        text = (settings.root / "telegraf" / "telegraf.conf").read_text()
    except OSError:
        return "metric_buffer_limit"
    match = re.search(r"^\s*metric_buffer_limit\s*=\s*(\d+)", text, re.M)
    return f"{int(match.group(1)):,} points" if match else "metric_buffer_limit"


# InfluxDB's error text -> (what it means, what to do before restarting InfluxDB)
_WRITE_CAUSES = (
    ("no space left on device", "its disk is full", "free space on that disk (df -h {mount})"),
    ("read-only file system", "its data directory is on a read-only filesystem",
     "find out why {mount} went read-only (mount; dmesg: disk errors make the kernel remount "
     "read-only) and make it writable"),
    ("permission denied", "it may not write its own files",
     "give the user running InfluxDB write access to {path} (ls -l {path})"),
    ("too many open files", "it ran out of file descriptors",
     "raise its open-files limit (ulimit -n) before starting the stack"),
)


def influx_write_problem(settings: Settings) -> str | None:
    """Whether InfluxDB can store points; None when it can.

    A full or read-only disk leaves InfluxDB answering pings and queries while
    it refuses writes. Two signals: the filesystems under its directories
    (statvfs: full, read-only), and a test write of a few points of new series
    (unique tag values). A new series goes through the series index, which
    InfluxDB 1.8 writes apart from its WAL; after a disk-full error either may
    keep failing until InfluxDB restarts, and a point of an existing series
    would test the WAL only. Even so a write can succeed on a full disk when
    it fits in the last, partly used block of a file, hence the statvfs check.
    Each check leaves a few series of measurement sparkscope_selfcheck, which
    expire with the retention policy.
    """
    token = secrets.token_hex(4)
    now = int(time.time())
    points = "\n".join(f"sparkscope_selfcheck,check={token}-{i} ok=1i {now}" for i in range(8))
    try:
        influx.write(settings.influx_url, settings.database, points)
        reason = None
    except influx.WriteRefused as err:
        reason = err.reason
    except influx.InfluxError as err:
        return f"a test write failed: {err}"
    disks = influx_disks(settings)
    # The filesystem InfluxDB names in its error, else a full or read-only one of ours.
    disk = next((d for d in disks if reason and str(d.path) in reason), None) or \
        next((d for d in disks if d.low or d.read_only), None)
    if reason is None and disk is None:
        return None
    return _write_problem_message(settings, reason, disk)


def _write_problem_message(settings: Settings, reason: str | None, disk: DiskState | None) -> str:
    where = {"mount": disk.mount if disk else settings.state_dir / "influxdb",
             "path": disk.path.parent if disk else settings.state_dir / "influxdb"}
    text = (reason or "").lower()
    if reason is None:  # the test write went through, the disk says why the next may not
        text = "read-only file system" if disk.read_only else "no space left on device"
    meaning, remedy = "it fails to store them", f"see {settings.state_dir / 'logs' / 'influxdb.log'}"
    for needle, cause, todo in _WRITE_CAUSES:
        if needle in text:
            meaning, remedy = cause, todo.format(**where)
            break
    disk_full = "no space left" in text
    if disk_full and disk is not None:
        meaning += (f" ({_size(disk.free_bytes)} free of {_size(disk.size_bytes)} on {disk.mount})" if disk.low
                    else f" (was: {_size(disk.free_bytes)} free now on {disk.mount})")
    if reason:
        first = f"refuses writes: {meaning}."
    elif disk_full and disk.free_bytes:
        first = f"{meaning.replace('is full', 'is almost full')}: writes will fail soon."
    else:
        first = f"{meaning}: writes fail from now on (a few may still fit in partly used blocks)."
    lines = [first,
             *([f"InfluxDB says: {reason}"] if reason else []),
             f"Spark runs on; Telegraf keeps Spark's metrics in memory (up to "
             f"{telegraf_buffer_limit(settings)}, then drops the oldest) and retries.",
             f"To fix: {remedy}, then restart InfluxDB alone, so that Telegraf keeps its buffer: "
             f"{RESTART_INFLUXDB}"]
    if disk_full:
        lines.append("InfluxDB 1.8 can keep refusing writes after a full disk until it restarts, even "
                     "once space is free again. A shorter SPARKSCOPE_RETENTION in .env keeps less data.")
    return "\n".join(lines)
