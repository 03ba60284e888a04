"""Installs the native stack's binaries, built from source with `go install`.

Each binary is cached under <cache>/bin/<name>-<version>[-<tags hash>]/ and
moved there only once the build succeeded, so an interrupted build is simply
redone and a second `up` starts in seconds.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

Progress = Callable[[str], None]

INFLUXD_MODULE = "github.com/influxdata/influxdb/cmd/influxd"
INFLUXD_VERSION = "v1.8.10"
TELEGRAF_MODULE = "github.com/influxdata/telegraf/cmd/telegraf"
TELEGRAF_VERSION = "v1.37.2"
# Telegraf is built with only the plugins telegraf/telegraf.conf uses: a plugin
# added there must be added here, or Telegraf refuses the config at start.
TELEGRAF_PLUGINS = (
    "inputs.socket_listener",
    "inputs.influxdb_listener",
    "inputs.cpu",
    "inputs.mem",
    "inputs.diskio",
    "inputs.net",
    "inputs.procstat",
    "processors.starlark",
    "outputs.influxdb",
    "parsers.graphite",
    "parsers.influx",
)
HEARTBEAT_SECONDS = 20.0


class InstallError(RuntimeError):
    """A component could not be installed; the message says what to do next."""


def run_with_progress(cmd: list[str], log_path: Path, label: str, progress: Progress,
                      env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
    """Run a long command, its output to log_path, a heartbeat line to progress."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    done = threading.Event()

    def heartbeat() -> None:
        while not done.wait(HEARTBEAT_SECONDS):
            progress(f"  {label}: still working, {time.monotonic() - started:.0f} s (log: {log_path})")

    beat = threading.Thread(target=heartbeat, daemon=True)
    beat.start()
    try:
        with open(log_path, "ab") as log:
            log.write(f"\n$ {' '.join(cmd)}\n".encode())
            log.flush()
            result = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd)
    finally:
        done.set()
    if result.returncode != 0:
        tail = log_path.read_text(errors="replace").splitlines()[-15:]
        raise InstallError(
            f"{label} failed (exit {result.returncode}) after {time.monotonic() - started:.0f} s.\n"
            + "\n".join("    " + line for line in tail)
            + f"\n  Full log: {log_path}"
        )
    progress(f"  {label}: done in {time.monotonic() - started:.0f} s")


def go_env() -> dict[str, str]:
    if shutil.which("go") is None:
        raise InstallError(
            "Go is not installed (needed once, to build InfluxDB, Telegraf and Grafana natively). "
            "Install Go 1.21+ from https://go.dev/dl/ or your package manager, or use Docker: "
            "docker compose up -d"
        )
    env = dict(os.environ)
    env.setdefault("GOTOOLCHAIN", "local")
    env.setdefault("CGO_ENABLED", "0")
    return env


def go_install(package: str, version: str, binary: str, dest: Path, progress: Progress,
               tags: tuple[str, ...] = ()) -> Path:
    """`go install package@version` into dest (atomically); returns the binary path."""
    target = dest / binary
    if target.is_file():
        return target
    dest.parent.mkdir(parents=True, exist_ok=True)
    progress(f"building {binary} {version} from source (first run only, about a minute)")
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    try:
        env = go_env()
        env["GOBIN"] = str(staging)
        cmd = ["go", "install"]
        if tags:
            cmd += ["-tags", ",".join(tags)]
        cmd.append(f"{package}@{version}")
        run_with_progress(cmd, dest.parent / f"{dest.name}.build.log", f"go install {binary}", progress, env=env)
        if not (staging / binary).is_file():
            raise InstallError(f"go install finished but {staging / binary} is missing")
        os.replace(staging, dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def ensure_influxd(cache_dir: Path, progress: Progress = print) -> Path:
    return go_install(INFLUXD_MODULE, INFLUXD_VERSION, "influxd",
                      cache_dir / "bin" / f"influxd-{INFLUXD_VERSION}", progress)


def ensure_telegraf(cache_dir: Path, progress: Progress = print) -> Path:
    tags = ("custom",) + TELEGRAF_PLUGINS
    digest = hashlib.sha256(",".join(tags).encode()).hexdigest()[:8]
    return go_install(TELEGRAF_MODULE, TELEGRAF_VERSION, "telegraf",
                      cache_dir / "bin" / f"telegraf-{TELEGRAF_VERSION}-{digest}", progress, tags)


def ensure_grafana(cache_dir: Path, progress: Progress = print) -> Path:
    """Grafana's homepath (bin/grafana, conf/, public/ plugin metadata)."""
    from sparkscope import grafana_build

    try:
        return grafana_build.ensure_grafana(cache_dir, progress)
    except grafana_build.GrafanaBuildError as err:
        raise InstallError(str(err)) from err


def ensure_compose_validator(progress: Progress = print) -> list[str]:
    """A docker compose that can run `config -q` offline (no engine needed)."""
    for candidate in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(candidate[0]) is None:
            continue
        probe = subprocess.run(candidate + ["version"], capture_output=True)
        if probe.returncode == 0:
            return candidate
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        raise InstallError(
            "no docker compose to validate docker-compose.yml: install the compose plugin "
            "or Debian's docker-compose package (apt-get install docker-compose)"
        )
    progress("installing Debian's docker-compose (to validate docker-compose.yml offline)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    log = Path(tempfile.gettempdir()) / "sparkscope-apt.log"
    run_with_progress(["apt-get", "update", "-q"], log, "apt-get update", progress, env=env)
    run_with_progress(["apt-get", "install", "-y", "-q", "--no-install-recommends", "docker-compose"],
                      log, "apt-get install docker-compose", progress, env=env)
    return ["docker-compose"]
