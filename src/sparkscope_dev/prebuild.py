"""The test suite's first-run builds, started by the launcher (./sparkscope
test) beside pip while it prepares the venv: what `./sparkscope install`
builds (sparkscope.provision.prebuild), then the suite's Go tools.

    python -m sparkscope_dev.prebuild

Run by the system's Python with src/ on the path, like the product's
prebuild: everything it imports is the standard library's."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sparkscope.provision.prebuild import Steps, builds, run_beside_pip


def suite_tool_steps(cache_dir: Path) -> Steps:
    """The suite's Go tools. Its other needs (Kubernetes' schemas from a pip
    package, Chromium and apt's tools) are not builds and come after pip."""
    from sparkscope.provision.go import ensure_previous_influxd, ensure_thanos
    from sparkscope_dev.dashcheck import ensure_dashcheck
    from sparkscope_dev.helm import ensure_helm
    from sparkscope_dev.kubeconform import ensure_kubeconform

    return [("dashboard checker", lambda: ensure_dashcheck(cache_dir)),
            ("helm", lambda: ensure_helm(cache_dir)),  # the chart's tests (tests/test_chart.py)
            ("kubeconform", lambda: ensure_kubeconform(cache_dir)),  # ... with Kubernetes' schemas
            ("InfluxDB to upgrade from", lambda: ensure_previous_influxd(cache_dir)),  # tests/test_upgrade.py
            ("thanos", lambda: ensure_thanos(cache_dir))]  # the Thanos store's tests (tests/test_thanos.py)


def suite_builds(cache_dir: Path, root: Path) -> Steps:
    return builds(cache_dir, root) + suite_tool_steps(cache_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sparkscope_dev.prebuild", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args(argv)
    return run_beside_pip(lambda settings: suite_builds(settings.cache_dir, settings.root))


if __name__ == "__main__":
    sys.exit(main())
