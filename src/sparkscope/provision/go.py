"""InfluxDB and Telegraf for the native stack, built from source with `go install`.

Each binary is cached under <cache>/bin/<name>-<version>[-<tags hash>]/ and
moved there only once the build succeeded, so an interrupted build is simply
redone and a second `up` starts in seconds.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

from sparkscope.provision import BuildError, build_once
from sparkscope.process import Progress, log_tail, run_logged

INFLUXD_MODULE = "github.com/influxdata/influxdb/cmd/influxd"
INFLUXD_VERSION = "v1.8.10"
TELEGRAF_MODULE = "github.com/influxdata/telegraf/cmd/telegraf"
TELEGRAF_VERSION = "v1.37.2"
# Telegraf is built with only the plugins telegraf/telegraf.conf uses: a plugin
# added there must be added here, or Telegraf refuses the config at start
# (tests/test_build.py compares the two).
TELEGRAF_PLUGINS = (
    "inputs.socket_listener",
    "inputs.influxdb_listener",
    "inputs.cpu",
    "inputs.mem",
    "inputs.diskio",
    "inputs.kernel",
    "inputs.net",
    "inputs.internal",
    "processors.starlark",
    "processors.filter",
    "outputs.influxdb",
    "parsers.graphite",
    "parsers.influx",
)
# data_format values of telegraf.conf's inputs -> the parser plugin each needs.
# inputs.influxdb_listener parses line protocol itself, with parsers.influx.
PARSERS = {"graphite": "parsers.graphite", "influx": "parsers.influx"}


def go_env(cgo: bool = False) -> dict[str, str]:
    """The environment of every Go build here; the user's GOPROXY, GOFLAGS, GOCACHE are kept."""
    if shutil.which("go") is None:
        raise BuildError(
            "Go is not installed (needed once, to build InfluxDB, Telegraf and Grafana natively). "
            "Install Go 1.21+ (1.26 is known to work) from https://go.dev/dl/ or your package manager, "
            "add its bin directory to PATH and run again; or use Docker: ./sparkscope up --backend compose"
        )
    env = dict(os.environ)
    # Never fetch another toolchain because of a go.mod's go/toolchain line.
    env["GOTOOLCHAIN"] = "local"
    # A go.work above the cache dir must not pull the build into someone's workspace.
    env["GOWORK"] = "off"
    if not cgo:  # InfluxDB and Telegraf are pure Go; Grafana needs cgo for sqlite
        env["CGO_ENABLED"] = "0"
    return env


def go_build(cmd: list[str], binary: str, dest: Path, progress: Progress, what: str, needs: str = "",
             env: dict[str, str] | None = None, cwd: Path | None = None) -> Path:
    """A Go build (`go install` into $GOBIN, or `go build -o`) of one binary
    into dest, once (build_once); returns the binary's path. {out} in cmd is
    where the binary goes; needs says what the build needs, for its error."""
    target = dest / binary
    if target.is_file():
        return target
    env = dict(env or go_env())
    progress(f"building {what}")

    def build(staging: Path) -> None:
        env["GOBIN"] = str(staging)
        log = dest.parent / f"{dest.name}.build.log"
        verb = cmd[1] if len(cmd) > 1 else "build"
        done = run_logged([part.replace("{out}", str(staging / binary)) for part in cmd], log,
                          f"go {verb} {binary}", progress, env=env, cwd=cwd)
        if done.returncode != 0:
            raise BuildError(f"go {verb} {binary} failed (exit {done.returncode}) after {done.seconds:.0f} s:\n"
                             f"{log_tail(log)}\n  Full log: {log}. {needs}Fix the cause and run again.")
        if not (staging / binary).is_file():
            raise BuildError(f"go {verb} finished but {staging / binary} is missing; see {log}")

    build_once(dest, build, waiting=lambda: progress(
        f"  another sparkscope run is building {binary}; waiting for it (its log: "
        f"{dest.parent / f'{dest.name}.build.log'})"))
    return target


def go_install(package: str, version: str, binary: str, dest: Path, progress: Progress,
               tags: tuple[str, ...] = (), flags: tuple[str, ...] = (), what: str = "",
               needs: str = "") -> Path:
    """`go install package@version` into dest (atomically); returns the binary path."""
    cmd = ["go", "install", *(["-tags", ",".join(tags)] if tags else []), *flags, f"{package}@{version}"]
    return go_build(cmd, binary, dest, progress,
                    what or f"{binary} {version} from source (first run only, one or two minutes)", needs)


def ensure_influxd(cache_dir: Path, progress: Progress = print) -> Path:
    return go_install(INFLUXD_MODULE, INFLUXD_VERSION, "influxd",
                      cache_dir / "bin" / f"influxd-{INFLUXD_VERSION}", progress)


def ensure_telegraf(cache_dir: Path, progress: Progress = print) -> Path:
    tags = ("custom",) + TELEGRAF_PLUGINS
    digest = hashlib.sha256(",".join(tags).encode()).hexdigest()[:8]
    return go_install(TELEGRAF_MODULE, TELEGRAF_VERSION, "telegraf",
                      cache_dir / "bin" / f"telegraf-{TELEGRAF_VERSION}-{digest}", progress, tags)


def plugins_in_config(conf_text: str) -> set[str]:
    """The Telegraf plugins a telegraf.conf needs: its [[kind.name]] sections and
    the parsers of their data_format."""
    plugins = {f"{kind}.{name}" for kind, name in
               re.findall(r"^\s*\[\[(inputs|outputs|processors|aggregators)\.(\w+)\]\]", conf_text, re.M)}
    for data_format in re.findall(r'^\s*data_format\s*=\s*"(\w+)"', conf_text, re.M):
        plugins.add(PARSERS.get(data_format, f"parsers.{data_format}"))
    if "inputs.influxdb_listener" in plugins:
        plugins.add(PARSERS["influx"])
    return plugins
