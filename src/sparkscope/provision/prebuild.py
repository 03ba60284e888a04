"""The builds a first run needs, started by the launcher (./sparkscope) beside
pip while it prepares the venv: pip spends its minutes downloading pyspark
and writing its wheel, the Go and Maven builds spend theirs on the CPU.

    python -m sparkscope.provision.prebuild [--for-tests]

Run by the system's Python with src/ on the path, so everything it imports is
the standard library's. It builds what `./sparkscope install` builds
(InfluxDB, Telegraf, the annotator jar) and, --for-tests, the test command's
Go tools (the dashboard checker, helm, kubeconform), one after another, into
the same cache and under the same locks as the foreground (build_once): the
command that follows finds them built, or waits for the one in progress. Its
output goes to <cache>/prebuild.log; a build that fails here is simply made
again in the foreground, which reports the error."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Callable


Steps = list[tuple[str, Callable[[], object]]]  # (name, build): what the build returns is printed


def native_steps(cache_dir: Path) -> Steps:
    """The native stack's builds (`./sparkscope install`, `up`, the test command)."""
    from sparkscope.provision.go import ensure_influxd, ensure_telegraf

    return [("influxd", lambda: ensure_influxd(cache_dir)), ("telegraf", lambda: ensure_telegraf(cache_dir))]


def test_tool_steps(cache_dir: Path) -> Steps:
    """The test command's Go tools. Its other needs (Kubernetes' schemas from a
    pip package, Chromium and apt's tools) are not builds and come after pip."""
    from sparkscope.provision.dashcheck import ensure_dashcheck
    from sparkscope.provision.go import ensure_previous_influxd
    from sparkscope.provision.helm import ensure_helm
    from sparkscope.provision.kubeconform import ensure_kubeconform

    return [("dashboard checker", lambda: ensure_dashcheck(cache_dir)),
            ("helm", lambda: ensure_helm(cache_dir)),  # the chart's tests (tests/test_chart.py)
            ("kubeconform", lambda: ensure_kubeconform(cache_dir)),  # ... with Kubernetes' schemas
            ("InfluxDB to upgrade from", lambda: ensure_previous_influxd(cache_dir))]  # tests/test_upgrade.py


def builds(for_tests: bool, cache_dir: Path, root: Path) -> Steps:
    from sparkscope.provision.annotator_jar import ensure_annotator_jar

    steps = native_steps(cache_dir) + [("annotator", lambda: ensure_annotator_jar(root))]
    return steps + (test_tool_steps(cache_dir) if for_tests else [])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sparkscope.provision.prebuild", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--for-tests", action="store_true", help="the test command's tools too")
    args = parser.parse_args(argv)
    # The launcher stops it with SIGTERM (pip failed, or was interrupted): as
    # KeyboardInterrupt, run_logged stops the build's own process group too.
    signal.signal(signal.SIGTERM, _interrupted)
    from sparkscope.settings import load_settings

    try:
        settings = load_settings()
    except Exception as err:  # the foreground reads the settings again and says what is wrong
        print(f"sparkscope: no builds beside pip ({err})", file=sys.stderr, flush=True)
        return 1
    steps = builds(args.for_tests, settings.cache_dir, settings.root)
    log = settings.cache_dir / "prebuild.log"
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        out = open(log, "w")
    except OSError as err:
        print(f"sparkscope: no builds beside pip ({err})", file=sys.stderr, flush=True)
        return 1
    print(f"sparkscope: meanwhile building {', '.join(name for name, _ in steps)} (log: {log})",
          file=sys.stderr, flush=True)
    with out:
        os.dup2(out.fileno(), 1)
        os.dup2(out.fileno(), 2)
        failed = []
        for name, build in steps:
            try:
                print(f"{name}: {build()}", flush=True)
            except KeyboardInterrupt:
                print(f"{name}: stopped", flush=True)
                return 130
            except Exception as err:  # noqa: BLE001 - any failure is the foreground's to report
                failed.append(name)
                print(f"{name}: not built here ({type(err).__name__}: {err}); the command builds it again",
                      flush=True)
    return 1 if failed else 0


def _interrupted(*_) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
