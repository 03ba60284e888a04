"""Downsampled Spark metrics (stack/rollups.py): `up` creates the retention
policies, continuous queries and resolution lookup, idempotently; the
stack's own continuous query fills the per-minute rollup; a one-sample memory
spike survives into what the dashboards read at long ranges; and the hidden
$rp variable picks raw samples for short ranges and rollups for long ones."""

from __future__ import annotations

import json
import re
import time

import pytest

from sparkscope.store import influx, schema

from sparkscope.stack import rollups
from sparkscope.settings import ROOT
from sparkscope_testkit.grafana12 import Dashboard12
from sparkscope_testkit.sandbox import reader_http, throwaway_stack

LIVE = json.loads((ROOT / "dashboards" / "spark-executors.json").read_text())
APP = "app-20991231000000-0042"


@pytest.fixture(scope="module")
def influx_only(tmp_path_factory):
    with throwaway_stack(tmp_path_factory.mktemp("rollups"), only=("influxdb",)) as settings:
        yield settings


def q(settings, statement: str) -> list[dict]:
    return influx.query(settings.influx_admin, statement, settings.database)


def opened(settings, board: dict, app: str, from_ms: int, to_ms: int, **url_vars) -> Dashboard12:
    return Dashboard12(board, reader_http(settings), from_ms, to_ms,
                       url_vars={"applicationid": app, **url_vars})


def panel_of(board: dict, title: str) -> dict:
    return next(p for top in board["panels"] for p in [top, *top.get("panels", [])] if p["title"] == title)


def live_panel_series(settings, title: str, hours: float) -> tuple[Dashboard12, list[dict]]:
    """A live-dashboard panel's first query as Grafana 12 sends it, over the
    last `hours`: the range picks the resolution it reads."""
    now_ms = int(time.time() * 1000)
    dash = opened(settings, LIVE, APP, now_ms - int(hours * 3_600_000), now_ms)
    return dash, dash.run_panel(panel_of(LIVE, title))["A"]


def test_up_creates_policies_and_continuous_queries_once(influx_only):
    # throwaway_stack ran up already; a second and third run change nothing.
    rollups.ensure_rollups(influx_only.influx_admin, influx_only.database, influx_only.retention)
    rollups.ensure_rollups(influx_only.influx_admin, influx_only.database, influx_only.retention)
    policies = {row[0] for row in q(influx_only, "SHOW RETENTION POLICIES")[0]["values"]}
    assert {"sparkscope", "sparkscope_1m", "sparkscope_10m", "sparkscope_30m", "sparkscope_meta"} <= policies
    queries = rollups.existing_queries(influx_only.influx_admin, influx_only.database)
    assert sorted(queries) == sorted(f"{level.policy}:{m}" for level in rollups.LEVELS[1:]
                                     for m in schema.ROLLED_MEASUREMENTS)
    # Each names its measurement: no regex source, no :MEASUREMENT back-reference.
    assert not any("/.*/" in text or ":MEASUREMENT" in text for text in queries.values())
    assert len(q(influx_only, 'SELECT * FROM "sparkscope_meta"."sparkscope_resolution"')[0]["values"]) == len(
        rollups.RESOLUTIONS)


def test_a_changed_continuous_query_is_replaced_and_an_older_regex_one_dropped(influx_only):
    url, db = influx_only.influx_admin, influx_only.database
    name = "sparkscope_1m:JVMHeapMemory"
    q(influx_only, f'DROP CONTINUOUS QUERY "{name}" ON "{db}"')
    q(influx_only, f'CREATE CONTINUOUS QUERY "{name}" ON "{db}" BEGIN SELECT mean("value") AS "value" '
                   f'INTO "{db}"."sparkscope_1m"."JVMHeapMemory" FROM "{db}"."sparkscope"."JVMHeapMemory" '
                   f'GROUP BY time(1m), * END')
    # What versions before per-measurement queries created.
    q(influx_only, f'CREATE CONTINUOUS QUERY "sparkscope_1m" ON "{db}" BEGIN SELECT max("value") AS "value" '
                   f'INTO "{db}"."sparkscope_1m".:MEASUREMENT FROM "{db}"."sparkscope"./.*/ GROUP BY time(1m), * END')
    rollups.ensure_rollups(url, db, influx_only.retention)
    queries = rollups.existing_queries(url, db)
    assert "max(value) AS value" in queries[name] and "sparkscope_1m" not in queries


def test_every_measurement_the_dashboards_and_report_read_through_a_rollup_is_rolled_up():
    from sparkscope.store.schema import OLD_GEN_POOLS
    from sparkscope.report.run_facts import SERIES, TOTALS
    read = {*SERIES, *TOTALS, *OLD_GEN_POOLS, "heap.max"}
    for path in sorted((ROOT / "dashboards").glob("*.json")):
        read |= set(re.findall(r'"\$(?:peak_)?rp"\."([^"]+)"', json.dumps(json.load(path.open())).replace('\\"', '"')))
    assert read == set(schema.ROLLED_MEASUREMENTS)


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
    influx.write(influx_only.influx_admin, influx_only.database, "\n".join(lines))
    spike_minute_ms = spike // 60 * 60 * 1000

    def rolled() -> list:
        return q(influx_only, f'SELECT "value" FROM "sparkscope_1m"."JVMHeapMemory" WHERE time = {spike_minute_ms}ms')

    deadline = time.monotonic() + 150  # the query runs at each minute boundary
    while not rolled() and time.monotonic() < deadline:
        time.sleep(2)
    assert rolled(), "the continuous query did not fill sparkscope_1m within 150 s"

    # The heap panel over 3 h: it reads the minute rollup, in minutes.
    dash, heap = live_panel_series(influx_only, "JVM heap used vs max", 3)
    assert dash.variables["rp"].current == ["sparkscope_1m"]
    assert {s["tags"]["executorid"] for s in heap} == {"1", "2"}
    for series in heap:
        assert max(v for _, v in series["values"] if v is not None) == 900e6, series
    # Active tasks is a mean: the rollup's mean field (3), not its highest value (4).
    # Only minutes the samples fill whole: the first and last minute of the
    # written span hold one sample or a few, whose mean is that sample's 2 or 4.
    _, tasks = live_panel_series(influx_only, "Active tasks", 3)
    first_full_ms, end_ms = ((now - 170) // 60 + 1) * 60_000, now // 60 * 60_000
    means = [v for s in tasks for t, v in s["values"] if v is not None and first_full_ms <= t < end_ms]
    assert means and all(abs(v - 3) < 0.5 for v in means), means


def test_the_ten_and_thirty_minute_rollups_keep_the_spike_of_the_minute_rollup(influx_only):
    # Their continuous queries run every 10 and 30 minutes; their own SELECT
    # over the window (rollups.backfill_statements) is what they will run, each
    # from the level below.
    now_ms = int(time.time()) * 1000
    for policy, hours in (("sparkscope_10m", 6), ("sparkscope_30m", 24)):
        level = next(level for level in rollups.LEVELS if level.policy == policy)
        for statement in rollups.backfill_statements(influx_only.database, level, now_ms - 3_600_000,
                                                     now_ms + 1_800_000):
            q(influx_only, statement)
        dash, heap = live_panel_series(influx_only, "JVM heap used vs max", hours)
        assert dash.variables["rp"].current == [policy]
        assert heap and all(max(v for _, v in s["values"] if v is not None) == 900e6 for s in heap), policy


@pytest.mark.parametrize("hours,policy,field,bucket", [
    (0.5, "sparkscope", "value", "10s"), (2, "sparkscope", "value", "30s"), (3, "sparkscope_1m", "mean", "1m"),
    (6, "sparkscope_10m", "mean", "10m"), (12, "sparkscope_10m", "mean", "10m"), (13, "sparkscope_30m", "mean", "30m"),
    (24, "sparkscope_30m", "mean", "30m"), (7 * 24, "sparkscope_30m", "mean", "30m")])
def test_the_resolution_variables_follow_the_time_range(influx_only, hours, policy, field, bucket):
    to_ms = int(time.time() * 1000)
    dash = opened(influx_only, LIVE, APP, to_ms - int(hours * 3_600_000), to_ms)
    picked = {name: dash.variables[name].current for name in ("rp", "mean_field", "bucket")}
    assert picked == {"rp": [policy], "mean_field": [field], "bucket": [bucket]}


SUMMARY = json.loads((ROOT / "dashboards" / "spark-application.json").read_text())
PEAKS_APP = "app-20991231000000-0043"
LATE_APP = "app-20991231000000-0044"


def sampled_heap_peaks(settings, from_ms: int, to_ms: int, app: str = PEAKS_APP) -> tuple[str, dict[str, float]]:
    """The summary's "Peak memory per executor, sampled" heap column as
    Grafana 12 sends it (Executors shown: all), per executor, and where its
    whole minutes were read ($peak_rp)."""
    dash = opened(settings, SUMMARY, app, from_ms, to_ms, top="100000")
    series = dash.run_panel(panel_of(SUMMARY, "Peak memory per executor, sampled"))["A"]
    return dash.variables["peak_rp"].current[0], {s["tags"]["executorid"]: s["values"][0][1] for s in series}


def test_peaks_read_the_minute_rollup_only_where_it_holds_every_raw_sample(influx_only):
    # 20 minutes of samples every 10 s (driver, executors 1 and 2), heap flat
    # at 100 MB but for executor 1 at 700 MB 10 minutes ago (a whole minute of
    # the middle) and executor 2 at 800 MB 30 s ago and 900 MB in the range's
    # first, partial minute (the raw edges). Rolled up by the continuous
    # query's own SELECT, as it runs every minute.
    url, db = influx_only.influx_admin, influx_only.database
    now = int(time.time()) // 10 * 10
    start = now - 1200
    middle_spike, end_spike, first_spike = now - 600, now - 30, start + 20

    def samples(app: str) -> str:
        lines = []
        for t in range(start, now + 1, 10):
            for executor in ("driver", "1", "2"):
                heap = ({(middle_spike, "1"): 700e6, (end_spike, "2"): 800e6, (first_spike, "2"): 900e6}
                        .get((t, executor), 100e6))
                lines.append(f"JVMHeapMemory,applicationid={app},executorid={executor} value={heap} {t}")
        return "\n".join(lines)

    influx.write(url, db, samples(PEAKS_APP))
    minute = next(level for level in rollups.LEVELS if level.policy == schema.PEAK_LEVEL)
    for statement in rollups.backfill_statements(db, minute, (start - 60) * 1000, (now + 60) * 1000):
        q(influx_only, statement)
    from_ms, to_ms = start * 1000 + 5000, now * 1000 + 1000

    rp, peaks = sampled_heap_peaks(influx_only, from_ms, to_ms)
    assert rp == "sparkscope_1m"
    assert peaks == {"driver": 100e6, "1": 700e6, "2": 900e6}
    # Where the rollup is read: executor 1's spike minute written lower in the
    # rollup alone (same sample count) shows through; the raw edges do not.
    spike_minute = middle_spike // 60 * 60
    rolled = f"JVMHeapMemory,applicationid={PEAKS_APP},executorid=1 value=650e6,mean=1e8,samples=6i {spike_minute}"
    influx.write(url, db, rolled, policy="sparkscope_1m")
    assert sampled_heap_peaks(influx_only, from_ms, to_ms) == ("sparkscope_1m",
                                                             {"driver": 100e6, "1": 650e6, "2": 900e6})
    # A hole: one minute of the rollup made before all its samples arrived
    # (the driver's count, like every series', short). Then the whole range
    # is read raw and the peak is exact again.
    short = f"JVMHeapMemory,applicationid={PEAKS_APP},executorid=driver value=1e8,mean=1e8,samples=4i {spike_minute}"
    influx.write(url, db, short, policy="sparkscope_1m")
    assert sampled_heap_peaks(influx_only, from_ms, to_ms) == ("sparkscope", {"driver": 100e6, "1": 700e6,
                                                                              "2": 900e6})
    # A run whose samples arrived late, all at once (Telegraf's buffer after
    # InfluxDB was down): the continuous query covers its last minutes at
    # most, and the range is read raw.
    influx.write(url, db, samples(LATE_APP))
    assert sampled_heap_peaks(influx_only, from_ms, to_ms, LATE_APP) == (
        "sparkscope", {"driver": 100e6, "1": 700e6, "2": 900e6})
