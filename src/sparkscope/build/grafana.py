"""Build Grafana's backend natively from the Go module proxy, and cache it.

The module proxy refuses every Grafana release tag (403); the one version it
serves is a pseudo-version of the main branch (2023-06-09).  There is no
frontend build, so the result serves the HTTP API (health, provisioning,
dashboards, /api/ds/query, annotations) but not the web UI.

Run as a module to build into a cache dir and print the homepath:

    .venv/bin/python -m sparkscope.build.grafana [CACHE_DIR]
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

from sparkscope.build import BuildError
from sparkscope.build.go import go_env
from sparkscope.process import Progress, log_tail, run_logged

GRAFANA_MODULE = "github.com/grafana/grafana"
GRAFANA_MODULE_VERSION = "v1.9.2-0.20230609164553-81d85ce8028d"

# The wire version pinned in Grafana's go.mod (v0.5.0) crashes on current Go.
WIRE = "github.com/google/wire/cmd/wire@v0.7.0"
HEARTBEAT_SECONDS = 30.0
MARKER = ".sparkscope-complete"


def grafana_home(cache_dir: pathlib.Path) -> pathlib.Path:
    return cache_dir / f"grafana-{GRAFANA_MODULE_VERSION}"


def build_log_path(cache_dir: pathlib.Path) -> pathlib.Path:
    return cache_dir / f"grafana-{GRAFANA_MODULE_VERSION}-build.log"


def is_complete(home: pathlib.Path) -> bool:
    # The marker is written last, so its presence means everything else is there.
    return (home / MARKER).is_file() and (home / "bin" / "grafana").is_file()


def grafana_command(home: pathlib.Path, config: pathlib.Path) -> list[str]:
    """argv that starts the server with this homepath and grafana.ini."""
    home = home.absolute()
    return [
        str(home / "bin" / "grafana"),
        "server",
        "--homepath",
        str(home),
        "--config",
        str(config.absolute()),
    ]


def ensure_grafana(cache_dir: pathlib.Path, progress: Progress = print) -> pathlib.Path:
    """Return a Grafana homepath under cache_dir, building it first if needed."""
    home = grafana_home(cache_dir)
    if is_complete(home):
        return home
    cache_dir.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(cache_dir / f".grafana-{GRAFANA_MODULE_VERSION}.lock", progress):
        if is_complete(home):  # another process finished it while we waited
            return home
        # Holding the lock means any build dir left over was abandoned (killed build).
        for stale in cache_dir.glob(f".grafana-{GRAFANA_MODULE_VERSION}.building-*"):
            rmtree(stale)
        env = go_env(cgo=True)
        log_path = build_log_path(cache_dir)
        work = pathlib.Path(
            tempfile.mkdtemp(prefix=f".grafana-{GRAFANA_MODULE_VERSION}.building-", dir=cache_dir)
        )
        started = time.monotonic()
        progress(f"Building Grafana {GRAFANA_MODULE}@{GRAFANA_MODULE_VERSION} (about 8 min cold)")
        progress(f"  full build output: {log_path}")
        try:
            log_path.write_text("", encoding="utf-8")
            with sigterm_as_interrupt():
                staged = _build(env, work, log_path, progress)
            if home.exists():  # a homepath without marker: not ours to trust
                rmtree(home)
            # Same filesystem, so the cache appears complete or not at all.
            os.rename(staged, home)
        finally:
            rmtree(work)
        progress(f"Grafana built in {_fmt(time.monotonic() - started)}: {home}")
    return home


def _build(env: dict[str, str], work: pathlib.Path, log_path: pathlib.Path, progress: Progress) -> pathlib.Path:
    progress("[1/5] fetching the Grafana module from the Go module proxy")
    module = download_module(env, work, log_path, progress)

    progress("[2/5] copying the module sources out of the read-only module cache")
    src = work / "src"
    shutil.copytree(str(module), src, symlinks=True)
    make_writable(src)

    progress("[3/5] downloading Grafana's Go dependencies")
    _run(["go", "mod", "download"], src, env, log_path, progress, "go mod download")

    progress("[4/5] generating dependency injection code (wire)")
    _run(["go", "run", WIRE, "gen", "-tags", "oss", "./pkg/server"], src, env, log_path, progress, "wire gen")

    progress("[5/5] compiling the grafana binary (the long step)")
    home = work / "home"
    (home / "bin").mkdir(parents=True)
    _run(["go", "build", "-tags", "oss", "-ldflags", _ldflags(src), "-o",
          str(home / "bin" / "grafana"), "./pkg/cmd/grafana"],
         src, env, log_path, progress, "go build")

    progress("assembling the homepath (conf, emails, core plugin manifests)")
    _assemble(src, home)
    (home / MARKER).write_text(
        json.dumps({"module": GRAFANA_MODULE, "version": GRAFANA_MODULE_VERSION,
                    "go": _go_env_value(env, "GOVERSION"), "built": time.time()}) + "\n",
        encoding="utf-8",
    )
    return home


def download_module(env: dict[str, str], work: pathlib.Path, log_path: pathlib.Path,
                    progress: Progress) -> pathlib.Path:
    """The Grafana module's source dir in the Go module cache (read-only); the
    backend and the web UI are both built from a copy of it."""
    spec = f"{GRAFANA_MODULE}@{GRAFANA_MODULE_VERSION}"
    info_path = work / "download.json"
    with info_path.open("w", encoding="utf-8") as info_out:
        rc = _run(["go", "mod", "download", "-json", spec], work, env, log_path, progress,
                  "go mod download (grafana)", stdout=info_out, check=False)
    info = _parse_download(info_path.read_text(encoding="utf-8"))
    with log_path.open("a", encoding="utf-8") as log:
        log.write(json.dumps(info, indent=1) + "\n")
    if rc != 0 or info.get("Error") or not info.get("Dir"):
        raise BuildError(
            f"!!! The Go module proxy did not serve {spec} !!!\n"
            f"  go said: {info.get('Error') or 'exit status ' + str(rc)}\n"
            f"  GOPROXY={env.get('GOPROXY') or _go_env_value(env, 'GOPROXY')}\n"
            "The proxy refuses every Grafana release tag (403); this pseudo-version is the "
            "only one known to download. If it is gone, Grafana cannot be built natively here: "
            "run Grafana another way (e.g. the grafana/grafana-oss image) and check the "
            "dashboards' queries straight against InfluxDB.\n"
            f"Full output: {log_path}"
        )
    return pathlib.Path(info["Dir"])


def _assemble(src: pathlib.Path, home: pathlib.Path) -> None:
    shutil.copytree(src / "conf", home / "conf")
    shutil.copytree(src / "public" / "emails", home / "public" / "emails")
    # Without it /api/dashboards/home answers 500.
    shutil.copytree(src / "public" / "dashboards", home / "public" / "dashboards")
    # The avatar service logs an error at startup without it.
    (home / "public" / "img").mkdir(parents=True)
    shutil.copy2(src / "public" / "img" / "user_profile.png", home / "public" / "img")
    # Grafana warns when its bundled-plugins dir is missing; this build bundles none.
    (home / "plugins-bundled").mkdir()
    # Core plugins (the influxdb datasource among them) are registered from their
    # plugin.json files; the frontend code next to them is useless without a UI build.
    plugins = src / "public" / "app" / "plugins"
    for manifest in plugins.rglob("plugin.json"):
        target = home / manifest.parent.relative_to(src)
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy2(manifest, target / "plugin.json")
        if (manifest.parent / "img").is_dir():
            shutil.copytree(manifest.parent / "img", target / "img")


def _ldflags(src: pathlib.Path) -> str:
    # Grafana's own build stamps the version from package.json; unstamped the
    # binary claims to be 9.2.0.  -w drops DWARF, as upstream does.
    version = json.loads((src / "package.json").read_text(encoding="utf-8"))["version"]
    commit = GRAFANA_MODULE_VERSION.rsplit("-", 1)[1]
    return (f"-w -X main.version={version} -X main.commit={commit} "
            f"-X main.buildBranch=main -X main.buildstamp={int(time.time())}")


def _run(args: list[str], cwd: pathlib.Path, env: dict[str, str], log_path: pathlib.Path,
         progress: Progress, label: str, *, stdout: Any = None, check: bool = True) -> int:
    done = run_logged(args, log_path, label, progress, env=env, cwd=cwd, stdout=stdout,
                      heartbeat_s=HEARTBEAT_SECONDS)
    if done.returncode != 0 and check:
        raise BuildError(
            f"Building Grafana failed: `{' '.join(args[1:4])} ...` exited with status {done.returncode}.\n"
            f"{_hint(log_path)}"
            f"Last lines of the log:\n{log_tail(log_path, indent='  ')}\n"
            f"Full output: {log_path}. Fix the cause and run again; the Go build cache "
            "keeps finished work, so a retry is faster."
        )
    return done.returncode


def _hint(log_path: pathlib.Path) -> str:
    text = log_tail(log_path, 200)
    if "C compiler" in text or "cgo:" in text:
        return "Grafana needs cgo (sqlite): install gcc and keep CGO_ENABLED=1.\n"
    if "403 Forbidden" in text or "dial tcp" in text or "proxyconnect" in text:
        return "A dependency could not be downloaded: check GOPROXY and network access.\n"
    return ""


def _parse_download(text: str) -> dict[str, Any]:
    # go prints one JSON object, even on failure ("Error" is set then).
    try:
        info = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError:
        return {"Error": text.strip()}
    return info if isinstance(info, dict) else {}


def _go_env_value(env: dict[str, str], name: str) -> str:
    out = subprocess.run(["go", "env", name], capture_output=True, text=True, env=env)
    return out.stdout.strip()


def make_writable(root: pathlib.Path) -> None:
    # The module cache is read-only and copytree copies the modes; wire must
    # write pkg/server/wire_gen.go and we must be able to delete the copy.
    for dirpath, _dirnames, filenames in os.walk(root):
        os.chmod(dirpath, 0o755)
        for name in filenames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode | 0o200)


def rmtree(path: pathlib.Path) -> None:
    if path.exists():
        make_writable(path)
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    # Plain SIGTERM would kill Python without unwinding, leaving go running in its
    # own process group and the build dir behind; turn it into KeyboardInterrupt.
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt("SIGTERM")
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


@contextlib.contextmanager
def exclusive_lock(path: pathlib.Path, progress: Progress) -> Iterator[None]:
    # Two test runs starting together must not both spend 8 minutes building.
    with path.open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(f"Another process is building Grafana (lock {path}); waiting for it")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _fmt(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{seconds:.1f}s"


def main(argv: list[str]) -> int:
    default = pathlib.Path.home() / ".cache" / "sparkscope"
    cache_dir = pathlib.Path(argv[1]).expanduser() if len(argv) > 1 else default

    # Progress goes to stderr so stdout is only the homepath: GF_HOME=$(python3 grafana_build.py)
    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        home = ensure_grafana(cache_dir, progress)
    except BuildError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: nothing was cached, the next run starts over", file=sys.stderr)
        return 130
    print(home)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
