"""A throwaway stack on free loopback ports in its own state directory, for
the tests and the benchmarks: it never touches the user's stack or ports."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import threading
from pathlib import Path
from typing import Iterator

from sparkscope.process import quiet
from sparkscope.stack import SERVICE_NAMES, thanos
from sparkscope.stack.native import NativeBackend
from sparkscope.settings import ROOT, Settings, load_settings
from sparkscope_testkit.tiers import refuse_in_fast_tier


def free_port(pair_offset: int | None = None) -> int:
    """A free loopback port (and port+offset free too, for InfluxDB's RPC port)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if pair_offset is None:
            return port
        if port + pair_offset > 65535:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + pair_offset))
                return port
            except OSError:
                continue
    raise RuntimeError("no free port pair on 127.0.0.1")


def ephemeral_ports_start(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> int:
    """The first port the kernel hands out on its own (32768 when it cannot be read)."""
    try:
        return int(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_base_port(processes: int) -> int:
    """A base port whose whole block of ports (thanos.layout) is free on 127.0.0.1 now.
    The search starts at a random block: two test runs on one machine (each checking,
    then starting a moment later) would otherwise both take the first free one. Blocks
    stay below the kernel's ephemeral range (ip_local_port_range): a port there can be
    handed to any connecting or port-0 socket of a test beside this one between the
    check and Thanos' bind (seen: the compactor's port taken, "address already in use")."""
    low, step = 10000, 97
    high = ephemeral_ports_start() - step
    first = low + step * secrets.randbelow(max(1, (high - low) // step))
    for base in [*range(first, high, step), *range(low, first, step)]:
        ports = [p for proc in thanos.layout(base, processes, replication_factor=1).processes for p in proc.ports()]
        try:
            sockets = []
            for port in ports:
                s = socket.socket()
                sockets.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise RuntimeError("no free block of ports for Thanos")


def isolated_settings(state_dir: Path, unread_metrics: str = "drop", **settings: str) -> Settings:
    """unread_metrics: SPARKSCOPE_UNREAD_METRICS, drop (the shipped default) or pass;
    settings: further .env keys (TELEGRAF_BUFFER_STRATEGY="disk" ...)."""
    env = {
        "GRAFANA_ADMIN_USER": "admin",
        "GRAFANA_ADMIN_PASSWORD": "test-" + secrets.token_hex(8),
        "SPARKSCOPE_HTTP_BIND": "127.0.0.1",
        "GRAPHITE_BIND": "127.0.0.1",
        "GRAFANA_PORT": str(free_port()),
        "INFLUXDB_PORT": str(free_port(pair_offset=2)),
        "GRAPHITE_PORT": str(free_port()),
        "EVENTS_PORT": str(free_port()),
        "SPARKSCOPE_DB": "spark",
        "SPARKSCOPE_RETENTION": "7d",
        "SPARKSCOPE_STATE_DIR": str(state_dir),
        "SPARKSCOPE_UNREAD_METRICS": unread_metrics,
        # InfluxDB's users, as ./sparkscope up would write them to .env.
        "INFLUXDB_ADMIN_PASSWORD": "admin-" + secrets.token_hex(8),
        "INFLUXDB_WRITE_PASSWORD": "writer-" + secrets.token_hex(8),
        "INFLUXDB_READ_PASSWORD": "reader-" + secrets.token_hex(8),
        "EVENTS_PASSWORD": "events-" + secrets.token_hex(8),
        # As root the services would run as nobody, who cannot reach pytest's tmp dirs
        # (root's, 0700): tests keep them root unless they test that (test_host_trust.py).
        "SPARKSCOPE_SERVICE_USER": "root",
    }
    if os.environ.get("SPARKSCOPE_CACHE_DIR"):
        env["SPARKSCOPE_CACHE_DIR"] = os.environ["SPARKSCOPE_CACHE_DIR"]
    env.update(settings)  # the caller's keys win, the cache dir among them
    # Not the checkout's .env: a developer's INFLUXDB_BIND=0.0.0.0 or alert contacts are not the test's.
    return load_settings(ROOT, env, dotenv=False)


def reader_http(settings):
    """Grafana 12's InfluxDB requests (sparkscope_testkit/grafana12.py), as the datasource's read-only user."""
    from sparkscope_testkit.grafana12 import influx_http
    return influx_http(settings.influx_url, settings.database, settings.influx_read_user,
                       settings.influx_read_password)


def settings_environ(settings) -> dict[str, str]:
    """The settings as the environment of a CLI subprocess (./sparkscope ...)."""
    return settings.as_env()


@contextlib.contextmanager
def terminated_as_exit() -> Iterator[None]:
    """Within it, SIGTERM (kill PID, a CI's timeout) raises SystemExit(143) in the
    main thread instead of ending the process at once, so the `finally` blocks
    run: a bench killed mid-run stops the stack it started rather than leaving
    InfluxDB, Telegraf and the probes loading the machine. Leaves a handler
    someone else installed alone."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def exit_on_term(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, exit_on_term)
    try:
        yield
    finally:
        if threading.current_thread() is threading.main_thread():  # only there may it be set
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextlib.contextmanager
def throwaway_stack(state_dir: Path, only: tuple[str, ...] = SERVICE_NAMES,
                    unread_metrics: str = "drop", **env_settings: str) -> Iterator[Settings]:
    refuse_in_fast_tier("a throwaway stack")
    settings = isolated_settings(state_dir, unread_metrics, **env_settings)
    backend = NativeBackend(settings)
    with terminated_as_exit():
        try:
            backend.up(only=only, progress=quiet)
            yield settings
        finally:
            backend.down(progress=quiet)


_readable_source: list[Path] = []


def readable_source() -> Path:
    """A PYTHONPATH holding a copy of the sparkscope package that any user may
    read, for a test that runs a probe as an unprivileged user: the checkout
    itself may sit in a folder only its owner may enter (a 0700 home folder,
    as Debian makes them). Made once per process, removed at its exit."""
    if not _readable_source:
        import atexit
        import shutil
        import tempfile
        top = Path(tempfile.mkdtemp(prefix="sparkscope-readable-src-"))
        shutil.copytree(ROOT / "src" / "sparkscope", top / "sparkscope",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for folder, _, files in os.walk(top):
            os.chmod(folder, 0o755)
            for name in files:
                os.chmod(os.path.join(folder, name), 0o644)
        atexit.register(shutil.rmtree, top, True)
        _readable_source.append(top)
    return _readable_source[0]
