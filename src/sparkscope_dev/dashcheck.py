"""dashcheck (tools/dashcheck/): decodes dashboard JSON strictly against
Grafana 12's models (grafana-foundation-sdk), so a field Grafana 12 does not
know, or a value of the wrong type, is found without running Grafana; with
grafana13=True it converts each dashboard as Grafana 13 does on load (v1 to the
v2 schema), decodes that with the SDK's v2 models and reports what the
conversion loses.

The binary is cached under <cache>/bin/dashcheck-<hash of its sources>/, so an
edit of tools/dashcheck/ builds a new one and an unchanged tree reuses it.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from typing import Iterable

from sparkscope.provision import BuildError
from sparkscope.provision.go import go_build
from sparkscope.process import Progress
from sparkscope.settings import ROOT

SOURCE_DIR = ROOT / "tools" / "dashcheck"
# Everything the binary is built from: go.sum pins the SDK, so a new SDK version is a new hash.
# alerting.go: the alerting mode (dashcheck -alerting), for grafana/provisioning/alerting/.
# v2.go: Grafana 13's conversion to the v2 schema (dashcheck -grafana13).
SOURCES = ("go.mod", "go.sum", "main.go", "alerting.go", "v2.go")


def source_digest(source_dir: Path = SOURCE_DIR) -> str:
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update((source_dir / name).read_bytes())
    return digest.hexdigest()[:12]


def ensure_dashcheck(cache_dir: Path, progress: Progress = print) -> Path:
    """The dashcheck binary, built with `go build` on first use (atomically); returns its path."""
    # -buildvcs=false: the binary must not depend on the state of the work tree's git.
    return go_build(["go", "build", "-trimpath", "-buildvcs=false", "-o", "{out}", "."], "dashcheck",
                    cache_dir / "bin" / f"dashcheck-{source_digest()}", progress,
                    "dashcheck, the strict dashboard checker (first run only, under a minute)",
                    needs="It needs Go 1.21+ and, the first time, the Go module proxy (GOPROXY) to download "
                          "github.com/grafana/grafana-foundation-sdk/go. ", cwd=SOURCE_DIR)


def check_dashboards(paths: Iterable[Path], cache_dir: Path, progress: Progress = print,
                     grafana13: bool = False) -> list[str]:
    """The problems dashcheck finds in the dashboards, one line each (`<file>: <problem>`);
    empty when every one decodes strictly (as Grafana 12's v1 models, or with grafana13
    after Grafana 13's conversion, as its v2 models)."""
    binary = ensure_dashcheck(cache_dir, progress)
    argv = [str(binary), *(["-grafana13"] if grafana13 else []), *(str(p) for p in paths)]
    done = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    if done.returncode == 0:
        return []
    if done.returncode == 1 and lines:
        return lines
    # 2: usage or a file it could not read; anything else: it crashed.
    raise BuildError(f"dashcheck could not check the dashboards (exit {done.returncode}):\n"
                     f"    {done.stderr.strip() or done.stdout.strip()}\n"
                     f"  Check that every path exists and is readable: {' '.join(argv[1:])}")
