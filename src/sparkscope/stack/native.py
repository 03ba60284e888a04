"""The native backend: InfluxDB, Telegraf and Grafana as local processes.

InfluxDB and Telegraf are built from source (provision/go.py); Grafana is the
user's own installation (grafana_local.py), never built here. They run with the same config files Docker mounts (influxdb/, telegraf/,
grafana/, dashboards/); only paths and listen addresses differ, and those go
in through each program's own environment-variable overrides. Every process
is started in a session of its own, its pid recorded in <state>/pids, and
stopped by that pid only.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Callable, Optional

from sparkscope.store import http
from sparkscope.stack import contact_points
from sparkscope.provision.go import (INFLUXD_VERSION, TELEGRAF_VERSION, THANOS_VERSION, ensure_influxd,
                                     ensure_telegraf, ensure_thanos)
from sparkscope.probes.blockprobe.probe import ATTACHED
from sparkscope.probes.blockprobe.readiness import why_not_traceable
from sparkscope.probes.threadprobe.readiness import why_no_kernel_stacks, why_no_py_spy
from sparkscope.probes.threadprobe.sampler import STARTED as THREADPROBE_STARTED
from sparkscope.probes.privilege import why_untrusted
from sparkscope.probes.cli import switched_on
from sparkscope.process import (Progress, is_zombie, log_tail, process_started_at, python_module_argv, start_group,
                                start_ticks, stop_group, wait_until)
from sparkscope.stack import (SERVICE_NAMES, Backend, ServiceStatus, StackError, service_names, thanos,
                              thanos_layout, wanted_services)
from sparkscope.stack import influx_relay as relay_module
from sparkscope.stack import remote_store
from sparkscope.stack.supervise import read_status as read_supervise_status
from sparkscope.stack.grafana_local import HOW_TO_GET, GrafanaNotFound, LocalGrafana, find_grafana
from sparkscope.stack.influx_storage import influx_dirs, influx_disk_problem
from sparkscope.settings import Settings, read_env_file


@dataclass
class Service:
    name: str
    argv: list[str]
    env: dict[str, str]
    dirs: list[Path] = field(default_factory=list)  # created before it starts
    pre_start: list[Path] = field(default_factory=list)  # stale files removed before it starts
    programs: list[Path] = field(default_factory=list)  # what it runs besides argv[0] (checked as root too)


class PidFile:
    def __init__(self, state_dir: Path, name: str):
        self.path = state_dir / "pids" / f"{name}.pid"

    def write(self, pid: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Never through a symlink: as root that would truncate any file it points at.
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "w") as f:
            f.write(f"{pid} {start_ticks(pid) or ''}\n")

    def running_pid(self) -> Optional[int]:
        """The recorded pid if that very process still runs, else None. Only a pid
        file we wrote counts: `down` signals what it names."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            with os.fdopen(fd) as f:
                st = os.fstat(f.fileno())
                if st.st_uid != os.geteuid() or st.st_mode & 0o022:
                    return None
                pid_text, _, ticks = f.read(64).strip().partition(" ")
            pid = int(pid_text)
        except (OSError, ValueError):
            return None
        if start_ticks(pid) is None or start_ticks(pid) != ticks:
            return None
        # A service that exited at start stays a zombie until `up` (its parent)
        # reaps it; it is not running, and up must not wait out the deadline.
        return None if is_zombie(pid) else pid

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


# --- how each service runs: one function per service -----------------------------------

def _base_env() -> dict[str, str]:
    # The user's own INFLUXDB_* / GF_* variables would override our config files.
    return {k: v for k, v in os.environ.items() if not k.startswith(("INFLUXDB_", "GF_"))}


def influxd_binary(settings: Settings, progress: Progress) -> Path:
    """The user's influxd (INFLUXD_BINARY), else the one built here once."""
    if not settings.influxd_binary:
        return ensure_influxd(settings.cache_dir, progress)
    given = Path(settings.influxd_binary).expanduser()
    if not (given.is_file() and os.access(given, os.X_OK)):
        raise StackError(f"INFLUXD_BINARY={settings.influxd_binary} is not an executable file: give the path of "
                         f"an influxd 1.x (1.13 or newer), or leave it empty in .env to build one")
    return given


# unshare from util-linux: a user namespace (no root needed) holding a network
# namespace of its own, where influxd's backup port is out of everyone's reach.
PRIVATE_NETWORK = ["unshare", "--user", "--map-root-user", "--net", "--"]
_private_network: dict[str, Optional[str]] = {}


def why_no_private_network() -> Optional[str]:
    """None when this machine lets us start a process in a network namespace of
    its own, else why not (no unshare; user namespaces off, as in some containers)."""
    if "answer" not in _private_network:
        try:
            done = subprocess.run(PRIVATE_NETWORK + ["true"], capture_output=True, text=True, timeout=10)
            _private_network["answer"] = None if done.returncode == 0 else (
                done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        except (OSError, subprocess.TimeoutExpired) as err:
            _private_network["answer"] = str(err)
    return _private_network["answer"]


def influx_socket(state_dir: Path, owners: frozenset[int] = frozenset()) -> Path:
    """Where influxd serves HTTP for the relay: a folder only this user (or the
    service user it is handed to, owners) may enter. A Unix socket's path has at
    most 107 bytes; a deep state dir gets a short one."""
    folder = state_dir / "run"  # not beside InfluxDB's files: their disk may be full or read-only
    if len(str(folder / "influxd.sock")) > 100:
        digest = hashlib.sha256(str(state_dir).encode()).hexdigest()[:12]
        folder = Path(tempfile.gettempdir()) / f"sparkscope-{os.getuid()}-{digest}"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid not in {os.getuid(), *owners}:
        raise StackError(f"{folder} is not a folder of this user's: remove it, then ./sparkscope up again")
    folder.chmod(0o700)
    return folder / "influxd.sock"


def unreachable_tls(folder: Path) -> Optional[dict[str, str]]:
    """Where no namespace can be made, influxd's own TCP listener (1.13 always
    opens one) stays on the host's loopback: these settings make it speak TLS
    that asks for a client certificate signed by a key in this 0700 folder, which
    no client holds, so nobody gets an HTTP request through it; the relay serves
    HTTP from the socket. None without openssl to make the throwaway key."""
    cert, key = folder / "influxd-unreachable.crt", folder / "influxd-unreachable.key"
    if not (cert.exists() and key.exists()):
        try:
            done = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                                   "ec_paramgen_curve:prime256v1", "-nodes", "-days", "36500",
                                   "-subj", "/CN=sparkscope-influxd-unreachable", "-keyout", str(key),
                                   "-out", str(cert)], capture_output=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if done.returncode != 0:
            return None
    key.chmod(0o600)
    return {"INFLUXDB_HTTP_HTTPS_ENABLED": "true", "INFLUXDB_HTTP_HTTPS_CERTIFICATE": str(cert),
            "INFLUXDB_HTTP_HTTPS_PRIVATE_KEY": str(key),
            "INFLUXDB_HTTP_HTTPS_CLIENT_AUTH_TYPE": "RequireAndVerifyClientCert",
            "INFLUXDB_HTTP_HTTPS_CLIENT_CA_PATHS_0": str(cert)}


def influxdb_service(settings: Settings, progress: Progress) -> Service:
    influxd = influxd_binary(settings, progress)
    dirs = influx_dirs(settings.state_dir)
    env = {**_base_env(), **{key: str(path) for key, path in dirs.items()}}
    argv = [str(influxd), "-config", str(settings.root / "influxdb" / "influxdb.conf")]
    http_address = f"{settings.influxdb_bind}:{settings.influxdb_port}"
    # As root, influxd and the relay run as the service user, who gets this folder.
    service_user = NativeBackend(settings).service_user()
    sock = influx_socket(settings.state_dir, frozenset({service_user[0]} if service_user else ()))
    # The relay, run as the very file checked below (not whatever `-m` would find
    # on sys.path), creates the first admin over the socket before it lets
    # anyone in: no moment when a stranger's CREATE USER ... WITH ALL PRIVILEGES
    # finds an InfluxDB without users (the admin's password is in its
    # environment, which only this user and root may read, never in argv).
    relay_file = Path(relay_module.__file__)
    # Its data dirs and the socket's folder: created (0700), and as root handed to the service user.
    data_dirs = [*dirs.values(), sock.parent]

    def behind_relay(command: list[str], listeners: dict[str, str]) -> Service:
        return Service("influxdb", [sys.executable, "-I", str(relay_file), "--listen", http_address,
                                    "--socket", str(sock), "--", *command], {
            **env,
            "SPARKSCOPE_FIRST_ADMIN_USER": settings.influx_admin.user,
            "SPARKSCOPE_FIRST_ADMIN_PASSWORD": settings.influx_admin.password,
            # HTTP on the socket the relay reaches.
            "INFLUXDB_HTTP_UNIX_SOCKET_ENABLED": "true",
            "INFLUXDB_HTTP_BIND_SOCKET": str(sock),
            "INFLUXDB_HTTP_UNIX_SOCKET_PERMISSIONS": "0700",
            **listeners,
        }, dirs=data_dirs, pre_start=[sock], programs=[influxd, relay_file])

    no_namespace = why_no_private_network()
    if no_namespace is None:
        # Inside its namespace: HTTP on a loopback nobody else shares, the
        # backup port where nobody can connect.
        return behind_relay([*PRIVATE_NETWORK, *argv], {"INFLUXDB_HTTP_BIND_ADDRESS": "127.0.0.1:8086",
                                                        "INFLUXDB_BIND_ADDRESS": "127.0.0.1:8088"})
    progress(f"  warning: InfluxDB's backup port 127.0.0.1:{settings.influxdb_port + 2} will answer any local "
             f"user without credentials: this machine allows no network namespace of our own "
             f"({no_namespace}). On a host shared with others, use compose (./sparkscope up --backend compose) "
             f"or allow user namespaces (sysctl kernel.unprivileged_userns_clone=1)")
    # The backup RPC port sits two above the HTTP port (8086 -> 8088),
    # so two stacks on one machine never collide on it.
    backup = {"INFLUXDB_BIND_ADDRESS": f"127.0.0.1:{settings.influxdb_port + 2}"}
    tls = unreachable_tls(sock.parent)
    if tls is None:
        progress("  warning: no openssl here, so a fresh InfluxDB answers on its own address before its first "
                 "admin exists: any local user could create one first. Install openssl, then ./sparkscope up")
        # Its own bind: exposing Grafana (SPARKSCOPE_HTTP_BIND) leaves InfluxDB where it was.
        return Service("influxdb", argv, {**env, **backup, "INFLUXDB_HTTP_BIND_ADDRESS": http_address},
                       dirs=data_dirs)
    # influxd's own TCP listener: any free port, and useless to anyone (unreachable_tls).
    return behind_relay(argv, {**backup, **tls, "INFLUXDB_HTTP_BIND_ADDRESS": "127.0.0.1:0"})


# telegraf.conf substitutes numbers (${TELEGRAF_BUFFER_LIMIT}, outside any string), which
# Telegraf's strict handling of ${...}, its default from 1.38, refuses ("invalid TOML
# syntax"); said explicitly, as Telegraf 1.37 asks. The chart and compose say the same.
TELEGRAF_FLAGS = ("--non-strict-env-handling",)


def telegraf_service(settings: Settings, progress: Progress) -> Service:
    telegraf = ensure_telegraf(settings.cache_dir, progress)
    argv = [str(telegraf), *TELEGRAF_FLAGS, "--config", str(settings.root / "telegraf" / "telegraf.conf")]
    to_thanos: dict[str, str] = {}
    if settings.metrics_store == thanos.STORE_NAME:  # a second output: remote write to the Receive router
        argv += ["--config", str(settings.root / "telegraf" / "thanos.conf")]
        prepare_thanos(settings, progress)  # its certificate, which Telegraf presents (up telegraf alone too)
        to_thanos = thanos.telegraf_env(thanos_layout(settings), thanos_files(settings))
    elif settings.metrics_store == remote_store.STORE_NAME:  # a second output: remote write to the user's store
        argv += ["--config", str(settings.root / "telegraf" / "remote.conf")]
        to_thanos = remote_store.telegraf_env(settings)
    return Service("telegraf", argv, {
        **to_thanos,
        **_base_env(),
        "INFLUX_URL": settings.influx_url,
        "INFLUX_USER": settings.influx_write_user,
        "INFLUX_PASSWORD": settings.influx_write_password,
        "SPARKSCOPE_DB": settings.database,
        "SPARKSCOPE_UNREAD_METRICS": settings.unread_metrics,
        "GRAPHITE_LISTEN": f"{settings.graphite_bind}:{settings.graphite_port}",
        "EVENTS_LISTEN": f"{settings.graphite_bind}:{settings.events_port}",
        "TELEGRAF_BUFFER_LIMIT": str(settings.telegraf_buffer_limit),
        "TELEGRAF_BUFFER_STRATEGY": settings.telegraf_buffer_strategy,
        "TELEGRAF_BUFFER_DIR": str(settings.state_dir / "telegraf" / "buffer"),
        "SPARKSCOPE_NO_END_GRACE_S": str(settings.no_end_grace_s),
        "SPARKSCOPE_RETENTION": settings.retention,  # the ingest guard refuses older points
        # Basic auth on the events listener when EVENTS_AUTH asks for it; both empty: none.
        **dict(zip(("EVENTS_USER", "EVENTS_PASSWORD"), settings.events_credentials or ("", ""))),
    }, dirs=[settings.state_dir / "telegraf" / "buffer"])


def local_grafana(settings: Settings) -> Optional[LocalGrafana]:
    try:
        return find_grafana(settings.grafana_home)
    except GrafanaNotFound as err:
        raise StackError(str(err)) from err


# Provisioning files of the Thanos store only (its Prometheus datasource and
# the PromQL dashboards' provider), laid out as Grafana's provisioning folder.
THANOS_PROVISIONING = Path("grafana") / "thanos"
# The end of a name in grafana/thanos that replaces grafana/provisioning's file of the same
# folder and name without it.
PROMETHEUS_VARIANT = "-prometheus.yaml"


def grafana_provisioning(settings: Settings) -> Path:
    """Grafana's provisioning folder: grafana/provisioning as it is; with the
    Thanos store, <state>/grafana/provisioning, remade at each start, linking
    every file of grafana/provisioning and of grafana/thanos, but those a file
    of grafana/thanos replaces: <name>-prometheus.yaml in the same folder
    stands for <name>.yaml (the alert rules with those on Spark's metrics in
    PromQL, alerts/generate.py: the same uids, which Grafana refuses to see
    provisioned twice). Grafana reads one provisioning folder; links keep the
    repository's files the only copy."""
    repo = settings.root / "grafana" / "provisioning"
    if settings.metrics_store not in (thanos.STORE_NAME, remote_store.STORE_NAME):
        return repo
    out = settings.state_dir / "grafana" / "provisioning"
    staging = out.with_name(".provisioning.new")
    shutil.rmtree(staging, ignore_errors=True)
    replaced = {repo / path.relative_to(settings.root / THANOS_PROVISIONING).with_name(
                    path.name[:-len(PROMETHEUS_VARIANT)] + ".yaml")
                for path in (settings.root / THANOS_PROVISIONING).rglob(f"*{PROMETHEUS_VARIANT}")}
    for source in (repo, settings.root / THANOS_PROVISIONING):
        for path in sorted(source.rglob("*")):
            link = staging / path.relative_to(source)
            if path in replaced:
                continue
            if path.is_dir():
                link.mkdir(parents=True, exist_ok=True)
            elif link.exists():
                raise StackError(f"{path} and {repo} both provide {link.relative_to(staging)}: rename one")
            else:
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(path)
    shutil.rmtree(out, ignore_errors=True)
    staging.rename(out)
    return out


def thanos_datasource_env(settings: Settings) -> dict[str, str]:
    """What grafana/thanos/datasources/thanos.yaml reads: Query's URL and Basic auth (with
    the remote store: the user's query URL and credentials, from .env). The password
    reaches Grafana in its environment only, from the store's own 0600 file."""
    dashboards = {"SPARKSCOPE_PROMETHEUS_DASHBOARDS_DIR": str(settings.root / thanos.PROMETHEUS_DASHBOARDS_DIR)}
    if settings.metrics_store == remote_store.STORE_NAME:
        # The same datasource (the PromQL dashboards name its uid) on the user's store, with
        # the user's credentials; a private CA must be in the system's store for Grafana.
        return {"THANOS_QUERY_URL": settings.remote_query_url, "THANOS_USER": settings.remote_user,
                "THANOS_PASSWORD": settings.remote_password,
                "THANOS_TENANT_HEADER": settings.remote_tenant_header if settings.remote_tenant else "",
                "THANOS_TENANT": settings.remote_tenant, **dashboards}
    if settings.metrics_store != thanos.STORE_NAME:
        return {}
    files = thanos_files(settings)
    if not files.password_file.is_file():
        raise StackError(f"Grafana reads the Thanos store with its password, and {files.password_file} "
                         "does not exist yet: start the store first (./sparkscope up)")
    return {"THANOS_QUERY_URL": thanos_layout(settings).query.http_url, "THANOS_USER": thanos.USER,
            "THANOS_PASSWORD": files.password(), "THANOS_TENANT_HEADER": "", "THANOS_TENANT": "", **dashboards}


def grafana_service(settings: Settings, progress: Progress) -> Service:
    grafana = local_grafana(settings)
    if grafana is None:
        raise StackError(HOW_TO_GET)
    root, state = settings.root, settings.state_dir / "grafana"
    return Service("grafana", grafana.argv(root / "grafana" / "grafana.ini"), {
        **_base_env(),
        "INFLUX_URL": settings.influx_url,
        "INFLUX_USER": settings.influx_read_user,
        "INFLUX_PASSWORD": settings.influx_read_password,
        "SPARKSCOPE_DB": settings.database,
        "GF_PATHS_DATA": str(state / "data"),
        "GF_PATHS_LOGS": str(state / "logs"),
        "GF_PATHS_PLUGINS": str(state / "plugins"),
        "GF_PATHS_PROVISIONING": str(grafana_provisioning(settings)),
        **thanos_datasource_env(settings),
        "GF_SERVER_HTTP_ADDR": settings.http_bind,
        "GF_SERVER_HTTP_PORT": str(settings.grafana_port),
        "GF_SECURITY_ADMIN_USER": settings.grafana_user,
        "GF_SECURITY_ADMIN_PASSWORD": settings.grafana_password,
        "SPARKSCOPE_DASHBOARDS_DIR": str(root / "dashboards"),
        "GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH": str(root / "dashboards" / "spark-executors.json"),
        # Where alerts go (.env ALERT_*): the contact points file names these variables.
        **contact_points.grafana_env(dict(settings.alert_contacts)),
    }, dirs=[state / "data", state / "logs", state / "plugins"])


BLOCKPROBE = "blockprobe"
BLOCKPROBE_ATTACH_S = 30.0  # bpftrace compiles and attaches in 1-3 s; more on a loaded machine

THREADPROBE = "threadprobe"
THREADPROBE_START_S = 15.0  # it says it started before its first /proc scan

def thanos_files(settings: Settings) -> thanos.Files:
    return thanos.Files(settings.state_dir / "thanos")


def prepare_thanos(settings: Settings, progress: Progress) -> Path:
    """The thanos binary (built once), and the files every Thanos process reads:
    the stack's CA and certificate, the password and its web config, the
    hashring, the bucket's objstore config. Returns the binary."""
    binary = ensure_thanos(settings.cache_dir, progress)
    files, plan = thanos_files(settings), thanos_layout(settings)
    try:
        thanos.ensure_password(files, binary.with_name("bcrypt-hash"))
        thanos.ensure_tls(files, plan.router.host)
        thanos.write_hashring(files, plan)
        thanos.write_objstore_config(files)
    except (thanos.ThanosConfigError, OSError) as err:
        raise StackError(f"the Thanos store cannot start: {err}") from err
    return binary


def thanos_service(settings: Settings, name: str, progress: Progress) -> Service:
    binary = prepare_thanos(settings, progress)
    files, plan = thanos_files(settings), thanos_layout(settings)
    process = plan.by_name(name)
    if process is plan.query:
        return Service(name, thanos.query_argv(binary, plan, files), _base_env())
    if process is plan.store:
        argv = thanos.store_argv(binary, plan, files)
    elif process is plan.compact:
        argv = thanos.compact_argv(binary, plan, files, settings.thanos_retention_raw,
                                   settings.thanos_retention_5m, settings.thanos_retention_1h)
    else:
        argv = thanos.receive_argv(binary, plan, process, files, settings.thanos_receive_retention)
    # Every process but Query reads or writes the bucket (the router's uploads: none, its TSDB is empty);
    # as root it is handed to the service user with their data. Not a folder: left as it is (up warned).
    bucket = [files.bucket] if files.bucket.is_dir() else []
    return Service(name, argv, _base_env(), dirs=[files.data(name), *bucket])


SERVICES = {"influxdb": influxdb_service, "telegraf": telegraf_service, "grafana": grafana_service}


def _user_name(uid: int) -> Optional[str]:
    """The login name of uid, or None where the host has no entry for it (a container's uid)."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


class NativeBackend(Backend):
    name = "native"
    runs_thanos = True

    def supervise_path(self, name: str) -> Path:
        return self.settings.state_dir / "pids" / f"{name}.supervise.json"

    def log_path(self, name: str) -> Path:
        return self.settings.state_dir / "logs" / f"{name}.log"

    def log_hint(self, name: str) -> str:
        return f"log: {self.log_path(name)}"

    def log_excerpt(self, name: str) -> str:
        return f"last log lines ({self.log_path(name)}):\n{log_tail(self.log_path(name))}"

    def started_at(self, name: str) -> Optional[datetime]:
        pid = PidFile(self.settings.state_dir, name).running_pid()
        return process_started_at(pid) if pid else None

    def recent_log(self, name: str, seconds: float) -> list[str]:
        # The log's last 256 KiB: minutes of Telegraf's lines, at most a few ms to read.
        try:
            with open(self.log_path(name), "rb") as log:
                log.seek(max(0, log.seek(0, os.SEEK_END) - 256 * 1024))
                return log.read().decode(errors="replace").splitlines()
        except OSError:
            return []

    def processes(self) -> dict[str, Optional[str]]:
        pids = {name: PidFile(self.settings.state_dir, name).running_pid() for name in service_names(self.settings)}
        return {name: f"pid {pid}" if pid else None for name, pid in pids.items()}

    def plugin_install_hint(self) -> str:
        # The native Grafana reads its plugins from the state dir (GF_PATHS_PLUGINS below).
        return f" --pluginsDir {self.settings.state_dir / 'grafana' / 'plugins'}"

    def versions(self) -> dict[str, str]:
        # What runs says its own version (InfluxDB's ping header, Grafana's health);
        # these stand in while it does not answer. Telegraf never says.
        return {"influxdb": self.settings.influxd_binary or INFLUXD_VERSION, "telegraf": TELEGRAF_VERSION,
                **{name: THANOS_VERSION for name in service_names(self.settings) if name.startswith("thanos")}}

    def _start(self, names: tuple[str, ...], progress: Progress) -> dict[str, str]:
        labels = {}
        for name in names:
            if name == "influxdb":
                # InfluxDB 1.13 starts on a read-only disk and refuses every write
                # (1.8 exited at once): not started at all, with the reason.
                problem = influx_disk_problem(self.settings)
                if problem:
                    raise StackError(f"influxdb not started: {problem}")
            service = (SERVICES[name](self.settings, progress) if name in SERVICES
                       else thanos_service(self.settings, name, progress))
            program, untrusted = next(((p, why) for p in [Path(service.argv[0]), *service.programs]
                                       if (why := why_untrusted(p))), (None, None))
            if untrusted:
                raise StackError(f"{name}: not started as root from {program}: {untrusted}. Run "
                                 f"./sparkscope as the user who owns it, or keep the cache dir "
                                 f"(SPARKSCOPE_CACHE_DIR) root's own")
            for directory in service.dirs:
                directory.mkdir(parents=True, exist_ok=True)
                self._refuse_others_data(name, directory)
                if directory.stat().st_mode & 0o077:
                    directory.chmod(0o700)  # InfluxDB's meta.db holds the users' password hashes
            for stale in service.pre_start:
                stale.unlink(missing_ok=True)
            user = self.service_user()
            if user is not None:
                self._hand_over(name, service, user)
            # Under a supervisor that starts it again when it dies (natively nothing else would).
            argv = python_module_argv("sparkscope.stack.supervise", "--status", str(self.supervise_path(name)),
                                      *(["--user", f"{user[0]}:{user[1]}"] if user else []), "--", *service.argv)
            proc = start_group(argv, self.log_path(name), env=service.env, cwd=self.settings.state_dir)
            PidFile(self.settings.state_dir, name).write(proc.pid)
            labels[name] = f"pid {proc.pid}" + (f" as {user[2]}" if user else "")
        return labels

    def _refuse_others_data(self, name: str, directory: Path) -> None:
        """Not as root, a data dir another user owns (a root `up` handed it to its service
        user) would fail the service with a bare "permission denied" in its log: say whose
        it is and the two ways out instead."""
        if os.geteuid() == 0:
            return
        owner, uid = directory.stat().st_uid, os.geteuid()
        if owner == uid:
            return
        who, mine = _user_name(owner), _user_name(uid)
        who = who or f"uid {owner}"
        me = f"{mine}:" if mine else str(uid)
        raise StackError(f"{name} not started: its data in {directory} belongs to {who}, not to you (a root "
                         f"`up` runs the services as SPARKSCOPE_SERVICE_USER, and hands their data to it). "
                         f"Run `sudo ./sparkscope up` as before, or take the data over: "
                         f"sudo chown -R {me} {directory}")

    def service_user(self) -> Optional[tuple[int, int, str]]:
        """As root, who the services run as: only the probes need root, and these
        three parse what the network sends. SPARKSCOPE_SERVICE_USER, else the
        user who ran sudo, else nobody; "root" (said in up's output) keeps root."""
        if os.geteuid() != 0:
            return None
        name = self.settings.service_user or os.environ.get("SUDO_USER") or "nobody"
        if name in ("root", "0"):
            return None
        try:
            entry = pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
        except (KeyError, ValueError):
            raise StackError(f"SPARKSCOPE_SERVICE_USER={name}: no such user on this host; name one (the services "
                             f"run as it when up runs as root), or root to keep them root") from None
        return entry.pw_uid, entry.pw_gid, entry.pw_name

    def _hand_over(self, name: str, service: Service, user: tuple[int, int, str]) -> None:
        """Its data dirs become the user's own and private (0700: InfluxDB's meta.db
        holds the users' password hashes); every file it reads must be within reach."""
        uid, gid, username = user
        for top in service.dirs:
            for directory, dirs, files in os.walk(top):
                for entry in [directory, *(os.path.join(directory, f) for f in dirs + files)]:
                    os.lchown(entry, uid, gid)
        ours = [value for key, value in service.env.items() if os.environ.get(key) != value]  # not inherited
        # Files in argv out of its reach are passed as descriptors by the supervisor;
        # folders and the paths in its environment must be within reach.
        reads = [arg for arg in service.argv[1:] if arg.startswith("/") and os.path.isdir(arg)] + \
                [arg for arg in ours if arg.startswith("/") and os.path.exists(arg)]
        check = 'for p; do [ -r "$p" ] && { [ ! -d "$p" ] || [ -x "$p" ]; } || echo "$p"; done'
        out = subprocess.run(["sh", "-c", check, "sh", *reads], user=uid, group=gid, extra_groups=[],
                             capture_output=True, text=True).stdout.split()
        if out:
            raise StackError(f"{name}: as root, up runs it as {username} (SPARKSCOPE_SERVICE_USER), who cannot read "
                             f"{', '.join(out[:3])}. Keep the checkout and SPARKSCOPE_STATE_DIR where {username} "
                             f"can read them (e.g. under /opt, chmod o+x on the folders above), name another user, "
                             f"or SPARKSCOPE_SERVICE_USER=root to run it as root")

    def _stop(self, names: tuple[str, ...], progress: Progress, everything: bool = False) -> None:
        for name in names:
            pidfile = PidFile(self.settings.state_dir, name)
            pid = pidfile.running_pid()
            if pid is not None:
                stop_group(pid)
            pidfile.clear()

    # The block I/O probe: optional, started after Telegraf when this machine
    # allows eBPF, never a reason for `up` to fail.
    def prepare(self, names: tuple[str, ...], progress: Progress) -> None:
        # Builds run before any start, so a first run's build time never eats a service's health deadline.
        if "influxdb" in names:
            influxd_binary(self.settings, progress)
        if "telegraf" in names:
            ensure_telegraf(self.settings.cache_dir, progress)
        if any(name not in SERVICES for name in names):
            prepare_thanos(self.settings, progress)
            problem = thanos.bucket_problem(thanos_files(self.settings).bucket)
            if problem:  # the store runs, serving what it holds; said once, here and in status
                progress(f"  warning: {problem}")

    def refuse_untrusted_state_dir(self) -> None:
        """As root, up and down signal the pids recorded in the state dir and append
        to its logs: a user who may write there could plant a pid file (root then
        kills their pick) or a log symlink. Such a state dir is refused."""
        state = self.settings.state_dir
        for directory in (state, state / "pids", state / "logs"):
            reason = why_untrusted(directory) if directory.exists() else None
            if reason:
                raise StackError(f"state dir {state}: {reason}; as root sparkscope signals the pids and appends "
                                 f"to the logs kept there. Make it root's own (chown -R root: {directory}; "
                                 f"chmod go-w {directory}), or set SPARKSCOPE_STATE_DIR to a directory of root's")

    def up(self, only: tuple[str, ...] = SERVICE_NAMES, progress: Progress = print) -> None:
        self.refuse_untrusted_state_dir()
        only = wanted_services(self.settings, only)  # the whole stack takes the metrics store's processes along
        if "grafana" in only and local_grafana(self.settings) is None:
            progress(f"grafana   not started: {HOW_TO_GET}")
            only = tuple(name for name in only if name != "grafana")
        super().up(only, progress)
        if "telegraf" in only:
            self.start_blockprobe(progress)
            self.start_threadprobe(progress)

    def down(self, only: tuple[str, ...] = SERVICE_NAMES, progress: Progress = print) -> None:
        self.refuse_untrusted_state_dir()
        if "telegraf" in only:
            self.stop_blockprobe(progress)
            self.stop_probe(THREADPROBE, progress)
        super().down(only, progress)

    def probe_env(self, prefix: str) -> dict[str, str]:
        """<prefix>* settings from .env (as compose reads them there), the environment first."""
        user, password = self.settings.events_credentials or ("", "")
        return {**{k: v for k, v in read_env_file(self.settings.root / ".env").items() if k.startswith(prefix)},
                **os.environ, http.EVENTS_USER_ENV: user, http.EVENTS_PASSWORD_ENV: password}

    @staticmethod
    def why_untrusted_python() -> Optional[str]:
        """As root, the probes run this Python and sparkscope's modules: only from
        where nobody but root could have changed them (process.why_untrusted)."""
        import sparkscope
        for path in (Path(sys.executable), Path(sparkscope.__file__).parent):
            reason = why_untrusted(path)
            if reason:
                return (f"as root it would run {path}, but {reason}; run it as that user "
                        f"(the probes then do what that user may), or from a root-owned checkout")
        return None

    def _start_probe(self, name: str, module: str, started_marker: str, deadline_s: float, failure: str,
                     progress: Progress, why_not: Callable[[], Optional[str]] = lambda: None,
                     why_not_means: str = "") -> tuple[bool, Optional[int], dict[str, str]]:
        """Start `python -m module` in its own process group unless it runs
        already or its settings (<NAME>_ENABLED) or why_not() say no; wait
        until its log says started_marker. (running, pid if started now, env)."""
        pidfile = PidFile(self.settings.state_dir, name)
        prefix = name.upper() + "_"
        env = self.probe_env(prefix)
        if pidfile.running_pid() is not None:
            progress(f"{name} already running  pid {pidfile.running_pid()}")
            return True, None, env
        if not switched_on(prefix + "ENABLED", env):
            progress(f"{name} off ({prefix}ENABLED={env[prefix + 'ENABLED']})")
            return False, None, env
        reason = why_not() or self.why_untrusted_python()
        if reason:
            progress(f"{name} not started ({why_not_means}): {reason}")
            return False, None, env
        log = self.log_path(name)
        size = log.stat().st_size if log.exists() else 0
        # From / (root's), and without the cwd on sys.path: nothing of the state dir is imported.
        proc = start_group(python_module_argv(module, "--url", self.settings.events_url),
                           log, env=env, cwd=Path("/"))
        pidfile.write(proc.pid)
        started = wait_until(lambda: started_marker in log.read_text(errors="replace")[size:]
                             or proc.poll() is not None, deadline_s) and proc.poll() is None
        if not started:
            self.stop_probe(name)
            progress(f"{name} not started: {failure}; {self.log_excerpt(name)}")
            return False, None, env
        return True, proc.pid, env

    def start_blockprobe(self, progress: Progress = print) -> bool:
        running, pid, _ = self._start_probe(
            BLOCKPROBE, "sparkscope.probes.blockprobe", ATTACHED, BLOCKPROBE_ATTACH_S,
            f"bpftrace did not attach within {BLOCKPROBE_ATTACH_S:.0f} s", progress,
            why_not=lambda: why_not_traceable(mount=True),
            why_not_means="disk latency heatmap, percentiles and outliers stay empty")
        if pid is not None:
            progress(f"{BLOCKPROBE:9} up  pid {pid}{' as root' if os.geteuid() == 0 else ''}  "
                     f"block I/O latency per device -> {self.settings.events_url}")
        return running

    def stop_blockprobe(self, progress: Progress = lambda _: None) -> None:
        self.stop_probe(BLOCKPROBE, progress)

    def stop_probe(self, name: str, progress: Progress = lambda _: None) -> None:
        pidfile = PidFile(self.settings.state_dir, name)
        pid = pidfile.running_pid()
        if pid is not None:
            stop_group(pid)
            progress(f"{name} stopped (pid {pid})")
        pidfile.clear()

    # The thread sampler: thread states of every Spark JVM on this host from
    # /proc. Needs no privilege for states; root adds kernel stacks and py-spy.
    def start_threadprobe(self, progress: Progress = print) -> bool:
        running, pid, env = self._start_probe(
            THREADPROBE, "sparkscope.probes.threadprobe", THREADPROBE_STARTED, THREADPROBE_START_S,
            "the sampler did not start (thread state panels stay empty)", progress)
        if pid is not None:
            extras = [f"{what} off: {reason}" for what, reason, key in (
                ("kernel stacks", why_no_kernel_stacks(), "THREADPROBE_KERNEL_STACKS"),
                ("PySpark worker profiles", why_no_py_spy(), "THREADPROBE_PYSPY"))
                if reason and switched_on(key, env)]
            progress(f"{THREADPROBE:9} up  pid {pid}{' as root' if os.geteuid() == 0 else ''}  "
                     f"thread states of Spark JVMs -> {self.settings.events_url}"
                     + "".join(f"\n          {extra}" for extra in extras))
        return running

    def status(self) -> list[ServiceStatus]:
        rows = super().status()
        for row in rows:
            supervised = read_supervise_status(self.supervise_path(row.name)) if row.process != "-" else None
            if supervised and supervised.get("restarts"):
                when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(supervised.get("last_exit_at") or 0))
                row.detail += (("\n" if row.detail else "") + f"restarted {supervised['restarts']} times by its "
                               f"supervisor, last exit code {supervised.get('last_exit')} at {when}; "
                               f"{self.log_hint(row.name)}")
            if row.name == "grafana" and row.state == "down" and local_grafana(self.settings) is None:
                row.state, row.detail = "not installed", HOW_TO_GET
            if row.name == "influxdb" and row.state == "down":
                problem = influx_disk_problem(self.settings)  # why it cannot start
                row.detail += f"\n{problem}" if problem else ""
            if row.name == "telegraf" and row.state == "up":  # the optional probe feeds Telegraf
                pid = PidFile(self.settings.state_dir, BLOCKPROBE).running_pid()
                row.detail += (f"\n{BLOCKPROBE}: pid {pid}, block I/O latency per device" if pid else
                               f"\n{BLOCKPROBE}: not running (disk latency panels stay empty; "
                               f"./sparkscope up starts it as root, {self.log_hint(BLOCKPROBE)})")
                pid = PidFile(self.settings.state_dir, THREADPROBE).running_pid()
                row.detail += (f"\n{THREADPROBE}: pid {pid}, thread states of Spark JVMs" if pid else
                               f"\n{THREADPROBE}: not running (thread state panels stay empty; "
                               f"./sparkscope up starts it unless THREADPROBE_ENABLED=false, "
                               f"{self.log_hint(THREADPROBE)})")
        return rows
