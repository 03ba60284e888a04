"""`./sparkscope test [pytest args]`: the builds the suite needs, with progress
on the terminal, then pytest with two workers. The launcher runs it as
`python -m sparkscope_dev`; every argument is pytest's (`./sparkscope test -h`
is pytest's help)."""

from __future__ import annotations

import os
import subprocess
import sys

from sparkscope.cli import ensure_each, install_all
from sparkscope.errors import SparkscopeError
from sparkscope.provision.annotator_jar import ensure_annotator_jar
from sparkscope.settings import load_settings
from sparkscope_dev.chromium import ensure_chromium
from sparkscope_dev.kubeconform import ensure_schemas
from sparkscope_dev.prebuild import suite_tool_steps
from sparkscope_dev.test_tools import ensure_test_packages

# pytest's option of the tier plugin (src/sparkscope_testkit/tiers.py), passed on as it is.
FAST_TIER = "--fast"


def run_suite(pytest_args: list[str]) -> int:
    settings = load_settings()
    # The fast tier starts no stack, Spark or browser, so it needs none of the
    # builds below; its few tools (the dashboard checker, helm) come from the
    # fixtures that use them, cached.
    if FAST_TIER not in pytest_args:
        # Builds happen here, with progress on the terminal, rather than silently
        # inside a test fixture. No Grafana runs in the tests: dashboards are
        # checked against Grafana 12's rules (src/sparkscope_testkit/grafana12.py, tools/dashcheck).
        install_all(settings)
        print(f"annotator: {ensure_annotator_jar(settings.root)}")
        ensure_each(suite_tool_steps(settings.cache_dir) + [
            ("kubernetes schemas", lambda: ensure_schemas(settings.cache_dir)),
            ("chromium", ensure_chromium),  # our own pages: the report, the flame graph
            ("test tools", ensure_test_packages)])
    return subprocess.call([sys.executable, "-m", "pytest", *pytest_workers(pytest_args), *pytest_args],
                           cwd=settings.root)


def pytest_workers(pytest_args: list[str]) -> list[str]:
    """Two workers by default (SPARKSCOPE_TEST_WORKERS; 1: one process), a test
    file to a worker, so a file's module fixtures (its Spark runs) run once;
    nothing when the caller chose (-n, -p no:xdist)."""
    workers = os.environ.get("SPARKSCOPE_TEST_WORKERS", "2").strip()
    chosen = any(a.startswith(("-n", "--numprocesses", "--dist")) or a == "no:xdist" for a in pytest_args)
    if chosen or workers in ("", "0", "1"):
        return []
    return ["-n", workers, "--dist", "loadfile"]


def main(argv: list[str] | None = None) -> int:
    try:
        return run_suite(sys.argv[1:] if argv is None else argv)
    except SparkscopeError as err:
        print(f"sparkscope test: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nsparkscope test: interrupted", file=sys.stderr)
        return 130
