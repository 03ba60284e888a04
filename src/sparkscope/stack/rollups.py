"""Downsampled copies of the Spark metrics, so that a long time range reads
minutes, not every 5 s sample: InfluxDB continuous queries write each
measurement's per-minute (and per-10-minute) highest and mean value into
retention policies of their own, and the dashboards pick the resolution for
the time range from a small lookup measurement (variables $rp and
$mean_field, see dashboards/layout.py).

Each rolled measurement has continuous queries of its own, one per level
(ROLLED_MEASUREMENTS): no `FROM /.*/` and no `INTO ...:MEASUREMENT`. InfluxDB
1.8 can crash on a measurement regex whose query is interrupted after a
matched measurement had no series (schema.py, OLD_GEN_POOLS), and
per-measurement statements are what InfluxQL-compatible cluster engines
(openGemini) accept, where a user who outgrows one machine goes. Metrics kept
with SPARKSCOPE_UNREAD_METRICS=pass and read by no panel are not rolled up.

The highest value is stored as "value", so every query that reads max("value")
(memory peaks, counters through non_negative_derivative(max)) reads the same
numbers from a rollup as from the raw samples, and a one-sample memory spike
survives; the mean is stored as "mean" for gauges read as a mean (active
tasks). Created by `./sparkscope up` for both backends, idempotently: an
existing policy or query is left alone when it matches and replaced when not.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparkscope.store import influx, lineprotocol
from sparkscope.store.schema import (ALL_EXECUTORS, META_POLICY, PEAK_LEVEL, PEAK_SOURCE_MEASUREMENT, RAW_POLICY,
                               RESOLUTION_MEASUREMENT, ROLLED_MEASUREMENTS, TASK_SCOPE_MEASUREMENT)

# Continuous queries by these names were the single regex queries of older
# versions: ensure_rollups drops them.
LEGACY_QUERIES = ("sparkscope_1m", "sparkscope_10m", "sparkscope_30m")


@dataclass(frozen=True)
class Level:
    policy: str
    mean_field: str  # the field holding the interval's mean
    every: str = ""  # rollups: bucket size
    source: str = ""  # rollups: the policy it is computed from
    source_mean: str = ""  # rollups: the mean field of the source
    # rollups: how far back each run recomputes, for points that arrive late
    # (Telegraf flushes every 2 s). Each run reads this much of every Spark
    # measurement, so it is the rollups' running cost: keep it short.
    lag: str = ""
    # rollups: also store each bucket's sample count as "samples", so that a
    # reader can check that the rollup saw every raw sample (dashboards'
    # $peak_rp, see PEAK_SOURCE_MEASUREMENT).
    samples: bool = False


HOUR_MS = 3_600_000
LEVELS = (
    Level(RAW_POLICY, "value"),
    Level("sparkscope_1m", "mean", every="1m", source=RAW_POLICY, source_mean="value", lag="2m", samples=True),
    Level("sparkscope_10m", "mean", every="10m", source="sparkscope_1m", source_mean="mean", lag="20m"),
    Level("sparkscope_30m", "mean", every="30m", source="sparkscope_10m", source_mean="mean", lag="60m"),
)


@dataclass(frozen=True)
class Resolution:
    """What the live graphs read for time ranges up to up_to_ms: a level and
    the bucket they group by ($rp, $mean_field, $bucket). A bucket is never
    finer than its level (a 30 s bucket over minute points leaves every other
    one empty), and it is a fixed lookup rather than Grafana's interval
    arithmetic, which differs between versions (10.x let the panel's width
    shadow a dashboard variable named "interval", 12.x does not)."""
    up_to_ms: int
    level: Level
    bucket: str


# Up to 2 h the raw samples, up to 4 h minutes, up to 12 h 10 minutes,
# beyond that 30 minutes: 120-360 points a series. What a panel costs is
# series x points: at 500 executors a per-executor panel over 6 h of
# minutes read 1,503 series x 360 points and took 2-6 s; over 10 minutes it
# reads 36 points a series, and over a day of 10 minutes 144 (1.3 s), of 30
# minutes 48 (docs/performance.md). Finer, at long ranges, only for few
# executors.
RESOLUTIONS = (
    Resolution(HOUR_MS, LEVELS[0], "10s"),
    Resolution(2 * HOUR_MS, LEVELS[0], "30s"),
    Resolution(4 * HOUR_MS, LEVELS[1], "1m"),
    Resolution(12 * HOUR_MS, LEVELS[2], "10m"),
    Resolution(2**62, LEVELS[3], "30m"),
)


def query_name(level: Level, measurement: str) -> str:
    return f"{level.policy}:{measurement}"


def continuous_query(database: str, level: Level, measurement: str) -> str:
    """One measurement of Spark's (field "value") per bucket, all tags kept."""
    counted = ', count("value") AS "samples"' if level.samples else ""
    db, name = influx.identifier(database), influx.identifier(measurement)
    select = (f'SELECT max("value") AS "value", mean("{level.source_mean}") AS "mean"{counted} '
              f'INTO {db}."{level.policy}".{name} FROM {db}."{level.source}".{name} '
              f"GROUP BY time({level.every}), *")
    return (f'CREATE CONTINUOUS QUERY {influx.identifier(query_name(level, measurement))} ON {db} '
            f"RESAMPLE EVERY {level.every} FOR {level.lag} BEGIN {select} END")


def wanted_queries(database: str) -> dict[str, str]:
    return {query_name(level, m): continuous_query(database, level, m)
            for level in LEVELS[1:] for m in ROLLED_MEASUREMENTS}


def backfill_statements(database: str, level: Level, start_ms: int, end_ms: int) -> list[str]:
    """The continuous queries' SELECTs over a past window (they only ever run on
    the latest buckets): for data written back-dated, e.g. by the benchmarks."""
    out = []
    for measurement in ROLLED_MEASUREMENTS:
        select = continuous_query(database, level, measurement).split(" BEGIN ", 1)[1].rsplit(" END", 1)[0]
        where = f" WHERE time >= {start_ms}ms AND time < {end_ms}ms GROUP BY"
        out.append(select.replace(" GROUP BY", where, 1))
    return out


def resolution_lines() -> str:
    """The lookup the dashboards' $rp, $mean_field and $bucket read: one point
    per resolution at 1, 2, 3 ... ns, so that the first match is the finest."""
    return "\n".join(lineprotocol.line(RESOLUTION_MEASUREMENT, {}, {
        "rp": r.level.policy, "mean_field": r.level.mean_field, "bucket": r.bucket, "up_to_ms": r.up_to_ms}, n)
        for n, r in enumerate(RESOLUTIONS, 1))


def peak_source_lines() -> str:
    """The lookup $peak_rp reads: the first point whose [lowest_gap,
    highest_gap] holds the gap."""
    widest = 2**62
    return "\n".join([
        lineprotocol.line(PEAK_SOURCE_MEASUREMENT, {}, {"rp": PEAK_LEVEL, "lowest_gap": 0, "highest_gap": 0}, 1),
        lineprotocol.line(PEAK_SOURCE_MEASUREMENT, {}, {"rp": RAW_POLICY, "lowest_gap": -widest,
                                                        "highest_gap": widest}, 2)])


def task_scope_lines() -> str:
    """The lookup $task_scope reads."""
    return "\n".join([
        lineprotocol.line(TASK_SCOPE_MEASUREMENT, {}, {"selection": ALL_EXECUTORS, "needs_totals": 1,
                                                       "executors": "(?:)"}, 1),
        lineprotocol.line(TASK_SCOPE_MEASUREMENT, {}, {"selection": "", "needs_totals": 0,
                                                       "executors": "(?:.+)"}, 2)])


def ensure_policy(base_url: influx.Where, database: str, name: str, duration: str) -> None:
    def run(limits: bool) -> None:
        # InfluxDB 1.12+: nothing dated ahead (influx.write_limits).
        clause = influx.write_limits(duration) if limits else ""
        try:
            influx.query(base_url, f'CREATE RETENTION POLICY "{name}" ON "{database}" DURATION {duration} '
                                   f"REPLICATION 1{clause}")
        except influx.InfluxError as err:
            if "conflict" not in str(err):
                raise
            influx.query(base_url, f'ALTER RETENTION POLICY "{name}" ON "{database}" DURATION {duration}{clause}')
    influx.with_write_limits(base_url, run)


def existing_queries(base_url: influx.Where, database: str) -> dict[str, str]:
    for series in influx.query(base_url, "SHOW CONTINUOUS QUERIES"):
        if series.get("name") == database:
            return {name: text for name, text in series.get("values", [])}
    return {}


def ensure_rollups(base_url: influx.Where, database: str, retention: str) -> None:
    """Policies, continuous queries and the lookup; safe to run at every up."""
    for level in LEVELS[1:]:
        ensure_policy(base_url, database, level.policy, retention)
    ensure_policy(base_url, database, META_POLICY, "INF")
    existing = existing_queries(base_url, database)
    wanted = wanted_queries(database)
    ours = tuple(f"{level.policy}:" for level in LEVELS)
    for name, text in existing.items():
        # InfluxDB shows a query with the quotes it does not need removed.
        if name in wanted and text.replace('"', "") == wanted[name].replace('"', ""):
            continue
        if name in wanted or name in LEGACY_QUERIES or name.startswith(ours):
            influx.query(base_url, f"DROP CONTINUOUS QUERY {influx.identifier(name)} ON {influx.identifier(database)}")
    for name, statement in wanted.items():
        if existing.get(name, "").replace('"', "") != statement.replace('"', ""):
            influx.query(base_url, statement)
    influx.write(base_url, database, "\n".join([resolution_lines(), peak_source_lines(), task_scope_lines()]),
                 precision="ns", policy=META_POLICY)


# --- the same setup for compose's influxdb-setup (influxdb/setup.sh) ---------------------

DB_PLACEHOLDER = "__DB__"
RETENTION_PLACEHOLDER = "__RETENTION__"
SETUP_FILE = "influxdb/rollups.setup"


def setup_file_text() -> str:
    """What ensure_rollups creates, as lines influxdb/setup.sh applies without
    Python: `policy NAME DURATION`, `query NAME STATEMENT`, `lookup LINE` (line
    protocol for the sparkscope_meta policy), `drop NAME` (a continuous query of
    an older version). __DB__ and __RETENTION__ stand for
    the settings. Generated (.venv/bin/python -m sparkscope.generate, with every generated file);
    tests/test_auth.py checks the file is current and that both ways leave the same."""
    out = ["# Generated by `python -m sparkscope.stack.rollups`; do not edit (see stack/rollups.py)."]
    out += [f"policy {level.policy} {RETENTION_PLACEHOLDER}" for level in LEVELS[1:]]
    out.append(f"policy {META_POLICY} INF")
    out += [f"drop {name}" for name in LEGACY_QUERIES]
    out += [f"query {name} {statement}" for name, statement in wanted_queries(DB_PLACEHOLDER).items()]
    out += [f"lookup {line}" for text in (resolution_lines(), peak_source_lines(), task_scope_lines())
            for line in text.splitlines()]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(setup_file_text(), end="")
