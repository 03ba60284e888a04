"""Copies of the stack's config files inside the Helm chart.

Helm reads no file outside the chart directory, so charts/sparkscope/files/
holds copies of the files compose and the native runner read (the same
relative paths under files/): the dashboards, InfluxDB's config, setup script
and rollups, Telegraf's configs, Grafana's settings and provisioning (the
Thanos store's too, with the PromQL dashboards), and spark-defaults.conf.
The chart renders them as they are; the copies are never edited by hand.

    python -m sparkscope.chart           # write the copies (after changing a source)
    python -m sparkscope.chart --check   # exit 1 and list what differs

python -m sparkscope.generate runs this last, after the generators of the
files it copies.

tests/test_chart.py fails while a copy differs from its source.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sparkscope.settings import ROOT

CHART_DIR = Path("charts") / "sparkscope"
FILES_DIR = CHART_DIR / "files"
# Sources by path from the repository root; dashboards/*.json and dashboards-prometheus/*.json
# are added as found.
SOURCES = (
    "influxdb/influxdb.conf",
    "influxdb/setup.sh",
    "influxdb/first-admin.sh",
    "influxdb/rollups.setup",
    "telegraf/telegraf.conf",
    "telegraf/remote.conf",
    "telegraf/thanos.conf",
    "grafana/grafana.ini",
    "grafana/provisioning/datasources/influxdb.yaml",
    "grafana/provisioning/dashboards/sparkscope.yaml",
    "grafana/provisioning/alerting/sparkscope-rules.yaml",
    "grafana/thanos/datasources/thanos.yaml",
    "grafana/thanos/dashboards/sparkscope-thanos.yaml",
    "grafana/thanos/alerting/sparkscope-rules-prometheus.yaml",
    "spark-conf/spark-defaults.conf",
)


def sources(root: Path = ROOT) -> list[str]:
    """Every file the chart carries a copy of, relative to root."""
    dashboards = sorted(p.relative_to(root).as_posix() for folder in ("dashboards", "dashboards-prometheus")
                        for p in (root / folder).glob("*.json"))
    return dashboards + list(SOURCES)


def differences(root: Path = ROOT) -> list[str]:
    """One line per copy that is missing, differs from its source, or has no source any more."""
    wanted = sources(root)
    files = root / FILES_DIR
    problems = []
    for rel in wanted:
        copy = files / rel
        if not copy.is_file():
            problems.append(f"{FILES_DIR / rel}: missing (copy of {rel})")
        elif copy.read_bytes() != (root / rel).read_bytes():
            problems.append(f"{FILES_DIR / rel}: differs from {rel}")
    if files.is_dir():
        for path in sorted(p for p in files.rglob("*") if p.is_file()):
            rel = path.relative_to(files).as_posix()
            if rel not in wanted:
                problems.append(f"{FILES_DIR / rel}: no such source file {rel} (left over)")
    return problems


def write_copies(root: Path = ROOT) -> list[str]:
    """Bring files/ in line with the sources; returns what it changed, one line each."""
    wanted = sources(root)
    files = root / FILES_DIR
    changed = []
    for rel in wanted:
        data = (root / rel).read_bytes()
        copy = files / rel
        if copy.is_file() and copy.read_bytes() == data:
            continue
        copy.parent.mkdir(parents=True, exist_ok=True)
        staging = copy.with_name(f".{copy.name}.tmp")
        staging.write_bytes(data)
        staging.replace(copy)
        changed.append(f"wrote {FILES_DIR / rel}")
    for path in sorted(p for p in files.rglob("*") if p.is_file()):
        rel = path.relative_to(files).as_posix()
        if rel not in wanted:
            path.unlink()
            changed.append(f"removed {FILES_DIR / rel} (its source is gone)")
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sparkscope.chart", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only compare: exit 1 when a copy differs")
    args = parser.parse_args(argv)
    if args.check:
        problems = differences()
        for line in problems:
            print(line)
        if problems:
            print("run: .venv/bin/python -m sparkscope.chart", file=sys.stderr)
        return 1 if problems else 0
    for line in write_copies() or ["charts/sparkscope/files/ is up to date"]:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
