"""Downsampled Spark metrics (stack/rollups.py): `up` creates the retention
policies, continuous queries and resolution lookup, idempotently; the
stack's own continuous query fills the per-minute rollup; a one-sample memory
spike survives into what the dashboards read at long ranges; and the hidden
$rp variable picks raw samples for short ranges and rollups for long ones."""

from __future__ import annotations

import json
import time

import pytest

from sparkscope.stack import influx, rollups
from sparkscope.stack.settings import ROOT
from support.grafana_api import substitute
from support.sandbox import throwaway_stack

LIVE = json.loads((ROOT / "dashboards" / "spark-executors.json").read_text())
APP = "app-20991231000000-0042"


@pytest.fixture(scope="module")
def influx_only(tmp_path_factory):
    with throwaway_stack(tmp_path_factory.mktemp("rollups"), only=("influxdb",)) as settings:
        yield settings


def q(settings, statement: str) -> list[dict]:
    return influx.query(settings.influx_url, statement, settings.database)


def panel_query(title: str, ref: str, values: dict[str, str], window: str, interval: str) -> str:
    """A live-dashboard panel's query as Grafana sends it to InfluxDB."""
    panel = next(p for top in LIVE["panels"] for p in [top, *top.get("panels", [])] if p["title"] == title)
    target = next(t for t in panel["targets"] if t["refId"] == ref)
    query = substitute(target["query"], LIVE, {"applicationid": APP, "executorid": ".*", "username": ".*",
                                               "interval": interval, **values})
    return query.replace("$timeFilter", f"time > now() - {window}").replace("$interval", interval)


def test_up_creates_policies_and_continuous_queries_once(influx_only):
    # throwaway_stack ran up already; a second and third run change nothing.
    rollups.ensure_rollups(influx_only.influx_url, influx_only.database, influx_only.retention)
    rollups.ensure_rollups(influx_only.influx_url, influx_only.database, influx_only.retention)
    policies = {row[0] for row in q(influx_only, "SHOW RETENTION POLICIES")[0]["values"]}
    assert {"sparkscope", "sparkscope_1m", "sparkscope_10m", "sparkscope_30m", "sparkscope_meta"} <= policies
    queries = rollups.existing_queries(influx_only.influx_url, influx_only.database)
    assert sorted(queries) == ["sparkscope_10m", "sparkscope_1m", "sparkscope_30m"]
    assert len(q(influx_only, 'SELECT * FROM "sparkscope_meta"."sparkscope_resolution"')[0]["values"]) == 4


def test_a_changed_continuous_query_is_replaced(influx_only):
    url, db = influx_only.influx_url, influx_only.database
    q(influx_only, f'DROP CONTINUOUS QUERY "sparkscope_1m" ON "{db}"')
    q(influx_only, f'CREATE CONTINUOUS QUERY "sparkscope_1m" ON "{db}" BEGIN SELECT mean("value") AS "value" '
                   f'INTO "{db}"."sparkscope_1m".:MEASUREMENT FROM "{db}"."sparkscope"./.*/ GROUP BY time(1m), * END')
    rollups.ensure_rollups(url, db, influx_only.retention)
    assert "max(value) AS value" in rollups.existing_queries(url, db)["sparkscope_1m"]


def test_one_sample_spike_survives_into_the_minute_rollup_the_dashboard_reads(influx_only):
    # Live samples every 5 s over the last 3 minutes, heap flat at 100 MB but
    # for one sample at 900 MB 20 s ago (inside what the next run of the
    # continuous query recomputes); active tasks alternating 2 and 4. The
    # stack's own continuous query (not a test copy) must roll them up.
    now = int(time.time())
    spike = now - 20
    lines = []
    for t in range(now - 170, now + 1, 5):
        heap = 900e6 if t == spike else 100e6
        tasks = 2 if (t - now) // 5 % 2 else 4
        for executor in ("1", "2"):
            lines.append(f'JVMHeapMemory,applicationid={APP},executorid={executor} value={heap} {t}')
            lines.append(f'threadpool.activeTasks,applicationid={APP},executorid={executor} value={tasks} {t}')
    influx.write(influx_only.influx_url, influx_only.database, "\n".join(lines))
    spike_minute_ms = spike // 60 * 60 * 1000

    def rolled() -> list:
        return q(influx_only, f'SELECT "value" FROM "sparkscope_1m"."JVMHeapMemory" WHERE time = {spike_minute_ms}ms')

    deadline = time.monotonic() + 150  # the query runs at each minute boundary
    while not rolled() and time.monotonic() < deadline:
        time.sleep(2)
    assert rolled(), "the continuous query did not fill sparkscope_1m within 150 s"

    # The heap panel at a long range: it reads the rollup, 5-minute buckets.
    heap = q(influx_only, panel_query("JVM heap used vs max", "A", {"rp": "sparkscope_1m", "mean_field": "mean"},
                                      "1h", "5m"))
    assert {s["tags"]["executorid"] for s in heap} == {"1", "2"}
    for series in heap:
        assert max(v for _, v in series["values"] if v is not None) == 900e6, series
    # Active tasks is a mean: the rollup's mean field (3), not its highest value (4).
    tasks = q(influx_only, panel_query("Active tasks", "A", {"rp": "sparkscope_1m", "mean_field": "mean"},
                                       "1h", "10m"))
    means = [v for s in tasks for _, v in s["values"] if v is not None]
    assert means and all(abs(v - 3) < 0.5 for v in means), means


def test_the_ten_and_thirty_minute_rollups_keep_the_spike_of_the_minute_rollup(influx_only):
    # Their continuous queries run every 10 and 30 minutes; their own SELECT
    # over the window (rollups.backfill_statement) is what they will run, each
    # from the level below.
    now_ms = int(time.time()) * 1000
    for policy, interval in (("sparkscope_10m", "10m"), ("sparkscope_30m", "30m")):
        level = next(level for level in rollups.LEVELS if level.policy == policy)
        q(influx_only, rollups.backfill_statement(influx_only.database, level, now_ms - 3_600_000,
                                                  now_ms + 1_800_000))
        heap = q(influx_only, panel_query("JVM heap used vs max", "A", {"rp": policy, "mean_field": "mean"},
                                          "1h", interval))
        assert heap and all(max(v for _, v in s["values"] if v is not None) == 900e6 for s in heap), policy


@pytest.mark.parametrize("hours,policy,field", [(0.5, "sparkscope", "value"), (2, "sparkscope", "value"),
                                                 (3, "sparkscope_1m", "mean"), (6, "sparkscope_10m", "mean"),
                                                 (12, "sparkscope_10m", "mean"), (13, "sparkscope_30m", "mean"),
                                                 (24, "sparkscope_30m", "mean"), (7 * 24, "sparkscope_30m", "mean")])
def test_the_resolution_variables_follow_the_time_range(influx_only, hours, policy, field):
    variables = {v["name"]: v["query"] for v in LIVE["templating"]["list"]}
    to_ms = int(time.time() * 1000)
    from_ms = to_ms - int(hours * 3_600_000)
    picked = {}
    for name in ("rp", "mean_field"):
        query = substitute(variables[name], LIVE, {}, from_ms, to_ms)
        picked[name] = [v for s in q(influx_only, query) for _, v in s["values"]]
    assert picked == {"rp": [policy], "mean_field": [field]}
