"""Every generated file of the repository, from one command, in the order
their inputs need:

    dashboards     dashboards/*.json, dashboards-prometheus/*.json   sparkscope.dashboards
    alerts         grafana/provisioning/alerting/...yaml, grafana/thanos/alerting/...yaml (Prometheus modes)
                                                           sparkscope.alerts (reads the live dashboard's panel ids)
    rollups        influxdb/rollups.setup                  sparkscope.stack.rollups
    telegraf       telegraf/telegraf.conf's GENERATED blocks: the ingest guard and "no end seen"
    spark-conf     spark-conf/*'s GENERATED block: the Graphite sink's filter  sparkscope.spark.conf
    java           the annotator's Schema.java             sparkscope.generate.java_schema
    chart          charts/sparkscope/files/                sparkscope.chart (copies all of the above)

Each step reads what the steps before it left, in memory: --check builds
everything without writing and lists each file that differs from what is
checked in; without it, the files that differ are written. tests/test_generated.py
runs the check.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable

from sparkscope import chart, dashboards, ingest_guard
from sparkscope.alerts import generate as alerts
from sparkscope.alerts.rules import PROMETHEUS_STORE
from sparkscope.generate import java_schema, no_end_seen
from sparkscope.settings import ROOT
from sparkscope.spark import conf as spark_conf
from sparkscope.stack import rollups

COMMAND = ".venv/bin/python -m sparkscope.generate"
LIVE_DASHBOARD = "dashboards/spark-executors.json"
RULES = "grafana/provisioning/alerting/" + alerts.RULES_FILE
PROMETHEUS_RULES = "grafana/thanos/alerting/" + alerts.PROMETHEUS_RULES_FILE
TELEGRAF_CONF = "telegraf/telegraf.conf"
# The Spark settings users attach, and how each spells the sink's filter.
SPARK_CONF = {"spark-conf/spark-defaults.conf": spark_conf.SINK_REGEX,
              "spark-conf/metrics.properties": spark_conf.SINK_REGEX.removeprefix("spark.metrics.conf.")}


class Tree:
    """The repository's files as the steps leave them: what they wrote, over what is on disk."""

    def __init__(self, root: Path):
        self.root = root
        self.written: dict[str, bytes] = {}
        self.removed: set[str] = set()

    def read(self, rel: str) -> bytes:
        return self.written[rel] if rel in self.written else (self.root / rel).read_bytes()

    def write(self, rel: str, data: str | bytes) -> None:
        self.written[rel] = data.encode() if isinstance(data, str) else data

    def remove(self, rel: str) -> None:
        self.removed.add(rel)

    def stale(self) -> list[str]:
        """Every file a step wrote that differs from disk, or that a step removed."""
        out = [rel for rel, data in self.written.items()
               if not (self.root / rel).is_file() or (self.root / rel).read_bytes() != data]
        return sorted(out + [rel for rel in self.removed if (self.root / rel).exists()])

    def save(self, rels: list[str]) -> None:
        for rel in rels:
            path = self.root / rel
            if rel in self.removed:
                path.unlink()
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            staging = path.with_name(f".{path.name}.tmp")
            staging.write_bytes(self.written[rel])
            staging.replace(path)


def _dashboards(tree: Tree) -> str:
    for name, board in dashboards.build().items():
        tree.write(f"dashboards/{name}", dashboards.render(board))
    for name, board in dashboards.build_prometheus().items():
        tree.write(f"{dashboards.PROMETHEUS_DIR}/{name}", dashboards.render(board))
    return f"dashboards/*.json, {dashboards.PROMETHEUS_DIR}/*.json"


def _alerts(tree: Tree) -> str:
    panels = alerts.panel_ids(json.loads(tree.read(LIVE_DASHBOARD)))
    tree.write(RULES, alerts.render(panels=panels))
    tree.write(PROMETHEUS_RULES, alerts.render(panels=panels, store=PROMETHEUS_STORE))
    return f"{RULES}, {PROMETHEUS_RULES}"


def _rollups(tree: Tree) -> str:
    tree.write(rollups.SETUP_FILE, rollups.setup_file_text())
    return rollups.SETUP_FILE


def _telegraf(tree: Tree) -> str:
    conf = tree.read(TELEGRAF_CONF).decode()
    tree.write(TELEGRAF_CONF, no_end_seen.with_block(ingest_guard.with_block(conf)))
    return f"{TELEGRAF_CONF} (ingest guard, no end seen)"


def _spark_conf(tree: Tree) -> str:
    for rel, key in SPARK_CONF.items():
        tree.write(rel, spark_conf.with_sink_regex(tree.read(rel).decode(), key))
    return "spark-conf/ (the sink's filter)"


def _java(tree: Tree) -> str:
    rel = java_schema.TARGET.relative_to(ROOT).as_posix()
    tree.write(rel, java_schema.render())
    return rel


def _chart(tree: Tree) -> str:
    wanted = chart.sources(tree.root)
    wanted += [rel for rel in tree.written if rel.startswith("dashboards/") and rel not in wanted]
    for rel in wanted:
        tree.write((chart.FILES_DIR / rel).as_posix(), tree.read(rel))
    files = tree.root / chart.FILES_DIR
    for path in sorted(p for p in files.rglob("*") if p.is_file()):
        if path.relative_to(files).as_posix() not in wanted:
            tree.remove(path.relative_to(tree.root).as_posix())
    return f"{chart.FILES_DIR}/"


# In order: each reads what the ones before it wrote.
STEPS: tuple[tuple[str, Callable[[Tree], str]], ...] = (
    ("dashboards", _dashboards), ("alerts", _alerts), ("rollups", _rollups), ("telegraf", _telegraf),
    ("spark-conf", _spark_conf), ("java", _java), ("chart", _chart))


def run(root: Path = ROOT, progress: Callable[[str], None] = lambda _: None) -> Tree:
    """Every step over the files under root, in memory; progress gets one line per step."""
    tree = Tree(root)
    for name, step in STEPS:
        before = set(tree.written)
        what = step(tree)
        changed = [rel for rel in tree.stale() if rel not in before]
        status = "" if what.startswith("skipped") else f": {len(changed)} stale" if changed else ": up to date"
        progress(f"{name:<11} {what}{status}")
    return tree


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sparkscope.generate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 and list the stale files")
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)  # tests: a copy of the repo
    args = parser.parse_args(argv)
    tree = run(args.root, progress=print)
    stale = tree.stale()
    if args.check:
        for rel in stale:
            print(f"stale: {rel}")
        if stale:
            print(f"{len(stale)} generated files are stale: run {COMMAND}", file=sys.stderr)
        return 1 if stale else 0
    tree.save(stale)
    for rel in stale:
        print(f"{'removed' if rel in tree.removed else 'wrote'} {rel}")
    return 0
