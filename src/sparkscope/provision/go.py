"""InfluxDB and Telegraf for the native stack, built from source with `go install`.

Each binary is cached under <cache>/bin/<name>-<version>[-<tags hash>]/ and
moved there only once the build succeeded, so an interrupted build is simply
redone and a second `up` starts in seconds.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from sparkscope import versions
from sparkscope.provision import BuildError, build_once
from sparkscope.process import Progress, log_tail, run_logged

INFLUXD_MODULE = "github.com/influxdata/influxdb/cmd/influxd"
INFLUXD_VERSION = f"v{versions.INFLUXDB}"
PKG_CONFIG_MODULE = "github.com/influxdata/pkg-config"
TELEGRAF_MODULE = "github.com/influxdata/telegraf/cmd/telegraf"
TELEGRAF_VERSION = f"v{versions.TELEGRAF}"
# Telegraf is built with only the plugins its configs use (telegraf/telegraf.conf,
# and telegraf/thanos.conf for the Thanos store): a plugin added there must be
# added here, or Telegraf refuses the config at start (tests/test_build.py
# compares the two).
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
    "outputs.http",
    "parsers.graphite",
    "parsers.influx",
    "serializers.prometheusremotewrite",
)
# data_format values of telegraf.conf's inputs -> the parser plugin each needs.
# inputs.influxdb_listener parses line protocol itself, with parsers.influx.
PARSERS = {"graphite": "parsers.graphite", "influx": "parsers.influx"}


def go_env(cgo: bool = False) -> dict[str, str]:
    """The environment of every Go build here; the user's GOPROXY, GOFLAGS, GOCACHE are kept."""
    if shutil.which("go") is None:
        raise BuildError(
            "Go is not installed (needed once, to build InfluxDB and Telegraf natively). "
            "Install Go 1.26+ from https://go.dev/dl/ or your package manager, "
            "add its bin directory to PATH and run again; or use Docker: ./sparkscope up --backend compose"
        )
    env = dict(os.environ)
    # Never fetch another toolchain because of a go.mod's go/toolchain line.
    env["GOTOOLCHAIN"] = "local"
    # A go.work above the cache dir must not pull the build into someone's workspace.
    env["GOWORK"] = "off"
    # Telegraf and the test tools are pure Go; InfluxDB needs cgo for Flux's Rust library.
    env["CGO_ENABLED"] = "1" if cgo else "0"
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


RUST_HOW = ("Install Rust with rustup (https://rustup.rs: `curl --proto '=https' -sSf https://sh.rustup.rs | sh`, "
            "then open a new shell), or use Docker: ./sparkscope up --backend compose")


def rust_env(cwd: Path = Path("/")) -> dict[str, str]:
    """What cargo needs to build libflux here, or a BuildError saying what to install.

    Flux pins its toolchain in rust-toolchain.toml (1.83), which rustup would
    download; RUSTUP_TOOLCHAIN names the one installed instead (any rustc from
    RUST_FOR_FLUX on builds it). Flux's crates deny warnings by default, so a
    newer rustc's new lints could fail the build: --cap-lints=warn keeps them
    warnings."""
    if shutil.which("cargo") is None:
        raise BuildError(f"InfluxDB {versions.INFLUXDB} needs Rust (cargo) to build its Flux library, and "
                         f"cargo is not on PATH. {RUST_HOW}")
    try:  # run from / so that no rust-toolchain.toml above the caller's folder picks the toolchain
        out = subprocess.run(["rustc", "--version"], capture_output=True, text=True, cwd=cwd, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired) as err:
        raise BuildError(f"rustc --version failed ({err}). {RUST_HOW}") from err
    found = re.match(r"rustc (\d+)\.(\d+)\.(\d+)", out)
    if not found or tuple(map(int, found.groups()[:2])) < versions.RUST_FOR_FLUX:
        need = ".".join(map(str, versions.RUST_FOR_FLUX))
        raise BuildError(f"InfluxDB {versions.INFLUXDB}'s Flux library needs Rust {need} or newer; this machine "
                         f"has {out.strip() or 'no working rustc'} (Debian's apt cargo is too old). {RUST_HOW}")
    env = {"RUSTFLAGS": "--cap-lints=warn"}
    if shutil.which("rustup"):
        env["RUSTUP_TOOLCHAIN"] = ".".join(found.groups())
    return env


def ensure_influxd(cache_dir: Path, progress: Progress = print) -> Path:
    """influxd, built with cgo: Flux's libflux is a Rust static library that
    InfluxData's pkg-config builds with cargo when cgo asks for it (no build
    tag leaves Flux out; influxdb.conf turns it off at run time)."""
    dest = cache_dir / "bin" / f"influxd-{INFLUXD_VERSION}"
    if (dest / "influxd").is_file():
        return dest / "influxd"
    env = go_env(cgo=True)
    if shutil.which(env.get("CC") or "gcc") is None:
        raise BuildError(f"InfluxDB {versions.INFLUXDB} is built with cgo and needs a C compiler: install gcc "
                         f"(Debian: apt-get install gcc), or use Docker: ./sparkscope up --backend compose")
    env.update(rust_env())
    pkg_config = go_install(PKG_CONFIG_MODULE, f"v{versions.INFLUX_PKG_CONFIG}", "pkg-config",
                            cache_dir / "bin" / f"pkg-config-v{versions.INFLUX_PKG_CONFIG}", progress,
                            what=f"InfluxData's pkg-config v{versions.INFLUX_PKG_CONFIG} (for InfluxDB's Flux library)")
    env["PKG_CONFIG"] = str(pkg_config)
    # main.version is what influxd reports in its X-Influxdb-Version header and
    # `influxd version` (InfluxData's release builds set it the same way), so
    # `status` shows the running server's own version, not "unknown".
    return go_build(["go", "install", f"-ldflags=-X main.version={versions.INFLUXDB}",
                     f"{INFLUXD_MODULE}@{INFLUXD_VERSION}"], "influxd", dest, progress,
                    f"InfluxDB {INFLUXD_VERSION} from source with its Rust Flux library (first run only, "
                    f"about 6 minutes of CPU)",
                    needs="It needs Go, a C compiler (gcc), Rust (cargo) and, the first time, the Go module "
                          "proxy and crates.io. ", env=env)


def ensure_telegraf(cache_dir: Path, progress: Progress = print) -> Path:
    tags = ("custom",) + TELEGRAF_PLUGINS
    digest = hashlib.sha256(",".join(tags).encode()).hexdigest()[:8]
    return go_install(TELEGRAF_MODULE, TELEGRAF_VERSION, "telegraf",
                      cache_dir / "bin" / f"telegraf-{TELEGRAF_VERSION}-{digest}", progress, tags)


def plugins_in_config(conf_text: str) -> set[str]:
    """The Telegraf plugins a telegraf.conf needs: its [[kind.name]] sections,
    the parsers of their inputs' data_format and the serializers of their outputs'."""
    plugins, kind = set(), ""
    for line in conf_text.splitlines():
        section = re.match(r"^\s*\[\[(inputs|outputs|processors|aggregators)\.(\w+)\]\]", line)
        if section:
            kind = section.group(1)
            plugins.add(f"{kind}.{section.group(2)}")
        data_format = re.match(r'^\s*data_format\s*=\s*"(\w+)"', line)
        if data_format:
            name = data_format.group(1)
            plugins.add(f"serializers.{name}" if kind == "outputs" else PARSERS.get(name, f"parsers.{name}"))
    if "inputs.influxdb_listener" in plugins:
        plugins.add(PARSERS["influx"])
    return plugins


def ensure_previous_influxd(cache_dir: Path, progress: Progress = print) -> Path:
    """For the test command: the InfluxDB users upgrade from (versions.INFLUXDB_PREVIOUS,
    pure Go), which tests/test_upgrade.py fills a data directory with."""
    version = f"v{versions.INFLUXDB_PREVIOUS}"
    return go_install(INFLUXD_MODULE, version, "influxd", cache_dir / "bin" / f"influxd-{version}", progress,
                      what=f"InfluxDB {version}, the version users upgrade from, for the upgrade test (once)")


THANOS_MODULE = "github.com/thanos-io/thanos"
THANOS_VERSION = f"v{versions.THANOS}"
# slicelabels is not optional: Thanos' zero-copy label conversions assume
# Prometheus' slice-based labels, and without the tag `thanos receive` panics on
# the first StoreAPI call from `thanos query` (Thanos' own .promu.yml sets both).
THANOS_TAGS = ("netgo", "slicelabels")


# Thanos checks Basic auth passwords against bcrypt hashes only; this small
# program of ours makes them, built from Thanos' module (its golang.org/x/crypto).
BCRYPT_HASH_SOURCE = Path(__file__).with_name("bcrypt_hash") / "main.go"


def thanos_build_commands(source: Path, out: Path) -> list[list[str]]:
    """The go command lines that build Thanos and bcrypt-hash from Thanos'
    writable module copy at source into the folder out."""
    version_pkg = "github.com/prometheus/common/version"
    return [["go", "build", "-p", "1", "-tags", ",".join(THANOS_TAGS),
             f"-ldflags=-X {version_pkg}.Version={versions.THANOS} -X {version_pkg}.Branch=release",
             "-o", str(out / "thanos"), "./cmd/thanos"],
            ["go", "build", "-p", "1", "-o", str(out / "bcrypt-hash"), "./cmd/sparkscope-bcrypt-hash"]]


def ensure_thanos(cache_dir: Path, progress: Progress = print) -> Path:
    """thanos (and bcrypt-hash beside it), built from a writable copy of its module source.

    `go install thanos@version` is refused (its go.mod has replace directives,
    which only apply to the main module), so: `go mod download -json` names the
    module's folder in the module cache, a copy of it under <cache>/src is made
    writable and built there as the main module. The binary goes to
    <cache>/bin/thanos-<version>/ only once the build succeeded (build_once)."""
    dest = cache_dir / "bin" / f"thanos-{THANOS_VERSION}"
    if (dest / "thanos").is_file():
        return dest / "thanos"
    env = go_env()
    env["GOTOOLCHAIN"] = f"go{versions.THANOS_GO}"  # Thanos needs Go 1.26.10+; fetched once by the go command
    log = dest.parent / f"{dest.name}.build.log"
    source = cache_dir / "src" / f"thanos-{THANOS_VERSION}"  # one fixed place, so a rebuild hits Go's build cache
    needs = (f"It needs Go, the Go module proxy the first time (for the module and the go{versions.THANOS_GO} "
             "toolchain) and about 2 GB of memory. ")
    progress(f"building Thanos {THANOS_VERSION} from source (first run only, about 7 minutes of one core)")

    def failed(step: str, done) -> BuildError:
        return BuildError(f"{step} failed (exit {done.returncode}) after {done.seconds:.0f} s:\n{log_tail(log)}\n"
                          f"  Full log: {log}. {needs}Fix the cause and run again.")

    def build(staging: Path) -> None:
        listing = staging / "download.json"
        with open(listing, "w") as out:
            done = run_logged(["go", "mod", "download", "-json", f"{THANOS_MODULE}@{THANOS_VERSION}"], log,
                              "go mod download thanos", progress, env=env, cwd=staging, stdout=out)
        if done.returncode != 0:
            raise failed("go mod download", done)
        try:
            module_dir = Path(json.loads(listing.read_text())["Dir"])
        except (ValueError, KeyError, TypeError) as err:
            raise BuildError(f"go mod download -json said no module folder ({err}); see {listing}") from err
        listing.unlink()
        shutil.rmtree(source, ignore_errors=True)
        source.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(module_dir, source, symlinks=True)
        for folder, dirs, files in os.walk(source):  # the module cache is read-only; the copy must not be
            for name in dirs + files:
                path = Path(folder) / name
                if not path.is_symlink():
                    path.chmod(path.stat().st_mode | 0o200)
        source.chmod(source.stat().st_mode | 0o200)
        (source / "cmd" / "sparkscope-bcrypt-hash").mkdir()
        shutil.copyfile(BCRYPT_HASH_SOURCE, source / "cmd" / "sparkscope-bcrypt-hash" / "main.go")
        for cmd in thanos_build_commands(source, staging):
            done = run_logged(cmd, log, "go build thanos", progress, env=env, cwd=source)
            if done.returncode != 0:
                raise failed("go build thanos", done)
        for binary in ("thanos", "bcrypt-hash"):
            if not (staging / binary).is_file():
                raise BuildError(f"go build finished but {staging / binary} is missing; see {log}")

    try:
        build_once(dest, build, waiting=lambda: progress(
            f"  another sparkscope run is building thanos; waiting for it (its log: {log})"))
    finally:
        shutil.rmtree(source, ignore_errors=True)  # 64 MB of source; the next build copies it again
    return dest / "thanos"


# A small program of ours over Prometheus' tsdb package (Apache-2.0, the version
# Thanos THANOS_VERSION builds with): it writes TSDB blocks, with Thanos' meta.json
# section, for given series and times. The tests make blocks spanning days with it
# (Thanos downsamples blocks of 40 h and more), which no test could wait for.
TSDB_BLOCKS_SOURCE = Path(__file__).with_name("tsdb_blocks")


def ensure_tsdb_blocks(cache_dir: Path, progress: Progress = print) -> Path:
    """tsdb-blocks, built once per version of its source (main.go, go.mod, go.sum)."""
    digest = hashlib.sha256(b"".join((TSDB_BLOCKS_SOURCE / name).read_bytes()
                                     for name in ("main.go", "go.mod", "go.sum"))).hexdigest()[:12]
    return go_build(["go", "build", "-p", "1", "-o", "{out}", "."], "tsdb-blocks",
                    cache_dir / "bin" / f"tsdb-blocks-{digest}", progress,
                    "tsdb-blocks (writes TSDB blocks for the Thanos tests; once, about a minute)",
                    needs="It needs Go and, the first time, the Go module proxy. ", cwd=TSDB_BLOCKS_SOURCE)
