"""The Grafana dashboards in dashboards/, written as code.

Dashboards are data, checked in as JSON so that Grafana provisions them as
they are; this package is where they are edited: queries.py (the InfluxQL rules),
reads.py (what a panel reads, declared once, rendered to InfluxQL or
PromQL), layout.py (panels to JSON), live.py and summary.py (one module per
dashboard, one function per row), prometheus.py (the live dashboard and the summary in
PromQL, for a Prometheus store: dashboards-prometheus/). It keeps every panel to the
same rules (unit, description, legend by executor, gauges read with
mean/max/last and counters with non_negative_derivative) that a hand-edited
JSON file of forty panels would drift from. Regenerate after a change (with
every generated file that depends on the dashboards: the alert rules, the chart):

    .venv/bin/python -m sparkscope.generate

tests/test_dashboards.py fails when the checked-in files differ from what
this package writes, and runs every panel query against a real Spark run.

Schema: schemaVersion 38 (Grafana 10.0, what the native build serves), which
Grafana 12 (the compose image) migrates on load.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sparkscope.dashboards import live, profiles, summary
from sparkscope.dashboards.layout import dashboard
from sparkscope.dashboards.queries import raw_samples
from sparkscope.dashboards.uids import LIVE_UID, PROFILES_UID, SUMMARY_UID
from sparkscope.settings import ROOT
from sparkscope.stack.thanos import PROMETHEUS_DASHBOARDS_DIR

DASHBOARDS_DIR = ROOT / "dashboards"
# The PromQL dashboards (prometheus.py), for the Thanos store only: a folder
# of their own, since Grafana's file provider loads every JSON under a path,
# subfolders too, and these need the Prometheus datasource only that store
# provisions (grafana/thanos/).
PROMETHEUS_DIR = PROMETHEUS_DASHBOARDS_DIR


def build() -> dict[str, dict[str, Any]]:
    """File name in dashboards/ -> dashboard JSON."""
    return {
        "spark-executors.json": dashboard(
            LIVE_UID, "Spark executors (live)",
            "One Spark application while it runs, per executor: tasks, CPU, memory, GC, shuffle, spill "
            "and I/O, with SQL queries, jobs and stages as annotations.",
            live.rows(), with_executors=True, time_from="now-30m", refresh="10s"),
        "spark-application.json": dashboard(
            SUMMARY_UID, "Spark application summary",
            "One Spark application over its whole run: how it compares with its job's last runs, peak memory "
            "per executor against its configured size, where task time went, the slowest stages and those that waited longest on one task. Set the time range to cover "
            "the run.",
            summary_rows(), with_executors=False, time_from="now-6h", refresh="", top_shown=True, rolled=False,
            extra_variables=summary.variables()),
        "spark-profiles.json": dashboard(
            PROFILES_UID, "Spark profiles",
            "Flame graphs of an application's executors: where on-CPU time, waiting time or allocations "
            "went, per stage. Take one with ./sparkscope profile.",
            profiles.rows(), with_executors=False, time_from="now-6h", refresh="", variables=profiles.variables(),
            annotations=False),
    }


def build_prometheus() -> dict[str, dict[str, Any]]:
    """File name in dashboards-prometheus/ -> dashboard JSON."""
    from sparkscope.dashboards import prometheus
    return {"spark-executors.json": prometheus.build(), "spark-application.json": prometheus.build_summary()}


def summary_rows() -> list:
    """The summary's graphs and totals read raw samples only: it is opened on
    a run that often ended minutes ago, before the rollups of its range exist
    (their lag is up to 20 minutes), and it draws one run, not a day of many.
    Its peaks read the minute rollup where $peak_rp vouches for it
    (queries.range_max), untouched here."""
    with raw_samples():
        return summary.rows()


def render(board: dict[str, Any]) -> str:
    return json.dumps(board, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else DASHBOARDS_DIR
    for name, board in build().items():
        (out / name).write_text(render(board))
        print(f"wrote {out / name}")
    prometheus_out = out.parent / PROMETHEUS_DIR
    prometheus_out.mkdir(exist_ok=True)
    for name, board in build_prometheus().items():
        (prometheus_out / name).write_text(render(board))
        print(f"wrote {prometheus_out / name}")
    return 0

