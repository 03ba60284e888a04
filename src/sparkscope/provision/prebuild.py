"""The builds a first run needs, started by the launcher (./sparkscope) beside
pip while it prepares the venv: pip spends its minutes downloading pyspark
and writing its wheel, the Go and Maven builds spend theirs on the CPU.

    python -m sparkscope.provision.prebuild

Run by the system's Python with src/ on the path, so everything it imports is
the standard library's. It builds what `./sparkscope install` builds
(InfluxDB, Telegraf, the annotator jar), one after another, into the same
cache and under the same locks as the foreground (build_once): the command
that follows finds them built, or waits for the one in progress. Its output
goes to <cache>/prebuild.log; a build that fails here is simply made again in
the foreground, which reports the error. The test suite's first run adds its
own tools (python -m sparkscope_dev.prebuild, which runs these through
run_beside_pip)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Callable


Steps = list[tuple[str, Callable[[], object]]]  # (name, build): what the build returns is printed


def native_steps(cache_dir: Path, metrics_store: str = "influxdb") -> Steps:
    """The native stack's builds (`./sparkscope install`, `up`, the test command);
    Thanos too where the settings choose it (SPARKSCOPE_METRICS_STORE=thanos)."""
    from sparkscope.provision.go import ensure_influxd, ensure_telegraf, ensure_thanos

    steps: Steps = [("influxd", lambda: ensure_influxd(cache_dir)), ("telegraf", lambda: ensure_telegraf(cache_dir))]
    return steps + ([("thanos", lambda: ensure_thanos(cache_dir))] if metrics_store == "thanos" else [])


def builds(cache_dir: Path, root: Path, metrics_store: str = "influxdb") -> Steps:
    """What `./sparkscope install` builds: the native stack and the annotator jar."""
    from sparkscope.provision.annotator_jar import ensure_annotator_jar

    return native_steps(cache_dir, metrics_store) + [("annotator", lambda: ensure_annotator_jar(root))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sparkscope.provision.prebuild", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args(argv)
    return run_beside_pip(lambda settings: builds(settings.cache_dir, settings.root, settings.metrics_store))


def run_beside_pip(steps_for: Callable[..., Steps]) -> int:
    """Run steps_for(settings)'s builds one after another, their output in
    <cache>/prebuild.log; 1 when one failed (the foreground builds it again)."""
    # The launcher stops it with SIGTERM (pip failed, or was interrupted): as
    # KeyboardInterrupt, run_logged stops the build's own process group too.
    signal.signal(signal.SIGTERM, _interrupted)
    from sparkscope.settings import load_settings

    try:
        settings = load_settings()
    except Exception as err:  # the foreground reads the settings again and says what is wrong
        print(f"sparkscope: no builds beside pip ({err})", file=sys.stderr, flush=True)
        return 1
    steps = steps_for(settings)
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
