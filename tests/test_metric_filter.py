"""The Telegraf filter of unread Spark metrics (SPARKSCOPE_UNREAD_METRICS):
whatever a dashboard, the report or the demo's summary reads is stored, and
the keep-everything switch stores every line Spark sends. Both through the
real Telegraf into InfluxDB, with the metric names a real Spark 3.5.9
application sent (tests/data/spark-3.5.9-metric-names.txt)."""

from __future__ import annotations

import json
import re
import socket
import time
import urllib.request
from pathlib import Path

import pytest

from sparkscope.demo import summary as demo_summary
from sparkscope.report.run_facts import RunReader
from sparkscope.store import influx, reads, schema
from sparkscope.store.reads import InfluxReads
from sparkscope.settings import ROOT
from sparkscope_testkit.sandbox import throwaway_stack

NAMES_FILE = Path(__file__).parent / "data" / "spark-3.5.9-metric-names.txt"
RECORDED_APP = "app-20261122123158-0000"
# A measurement, after an optional "retention policy". (the dashboards' "$rp".).
SOURCE = re.compile(r'\bFROM\s+(?:"[^"]+"\.)?("(?:[^"\\]|\\.)+"|/(?:[^/\\]|\\.)+/)')


# --- what is read -----------------------------------------------------------------------

def dashboard_queries() -> list[str]:
    found: list[str] = []

    def walk(node) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("query", "definition") and isinstance(value, str):
                    found.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    for path in sorted((ROOT / "dashboards").glob("*.json")):
        walk(json.loads(path.read_text()))
    return found


def report_queries() -> list[str]:
    """What `./sparkscope report` sends to read one run, recorded."""
    sent: list[str] = []

    class Recorder(InfluxReads):
        def q(self, statement: str) -> list[dict]:
            sent.append(statement)
            if f'"{schema.APPLICATION_MEASUREMENT}"' in statement:  # the run exists and finished
                return [{"columns": ["time", "status", "app_name", "end_time_ms"],
                         "values": [[1, "FINISHED", "x", 2]]}]
            return []

    reader = RunReader("http://127.0.0.1:1", "spark")
    reader.store = Recorder("http://127.0.0.1:1", "spark", rollup=reader.store.rollup)
    reader.read("app-1")
    return sent


def demo_summary_queries(monkeypatch) -> list[str]:
    sent: list[str] = []
    monkeypatch.setattr(reads.influx, "query", lambda url, statement, *a, **k: sent.append(statement) or [])

    class Fake:
        influx_reader, database, metrics_store = "http://127.0.0.1:1", "spark", "influxdb"

    demo_summary.executor_peaks(Fake(), "app-1")
    return sent


def read_sources(queries: list[str]) -> set[str]:
    """Every measurement a query reads: "name" or /regex/ (unescaped)."""
    out = set()
    for query in queries:
        for source in SOURCE.findall(query):
            out.add(source if source.startswith("/") else source[1:-1].replace('\\"', '"'))
    return out


def recorded_lines(app_id: str) -> list[str]:
    """The recorded run's application metric paths, under a new app id."""
    prefix = f"spark.{RECORDED_APP}."
    return [f"spark.{app_id}." + name[len(prefix):] for name in NAMES_FILE.read_text().split()
            if name.startswith(prefix)]


def measurement_of(line: str) -> str:
    """The measurement the Graphite template makes of an application metric path
    (<prefix>.<app>.<executor>.<namespace>.<measurement...>)."""
    return line.split(".", 4)[4]


# --- through the real Telegraf ------------------------------------------------------------

def send_and_count(settings, lines: list[str], expect_at_least: int) -> dict[str, int]:
    """Send lines over Graphite; per measurement, the points of this app stored
    once the count has stopped growing."""
    now = int(time.time())
    app_id = lines[0].split(".")[1]
    with socket.create_connection((settings.graphite_host, settings.graphite_port), 10) as conn:
        conn.sendall("".join(f"{line} 1 {now}\n" for line in lines).encode())
    deadline, last, counts = time.monotonic() + 60, -1, {}
    while time.monotonic() < deadline:
        series = influx.query(settings.influx_admin,
                              f'SELECT count("value") FROM /.*/ WHERE "applicationid" = \'{app_id}\'',
                              settings.database)
        counts = {s["name"]: s["values"][0][1] for s in series}
        total = sum(counts.values())
        if total >= expect_at_least and total == last:  # Telegraf flushes every 2 s
            return counts
        last = total
        time.sleep(3)
    return counts


@pytest.fixture(scope="module")
def filtered(tmp_path_factory):
    """A stack as shipped (drop), the recorded application's lines sent to it."""
    with throwaway_stack(tmp_path_factory.mktemp("filtered"), only=("influxdb", "telegraf")) as settings:
        lines = recorded_lines("app-20991231000000-0001")
        yield settings, lines, send_and_count(settings, lines, expect_at_least=1)


def test_every_measurement_the_dashboards_report_and_summary_read_is_stored(filtered, monkeypatch):
    settings, lines, stored = filtered
    sent = {measurement_of(line) for line in lines}
    sources = read_sources(dashboard_queries() + report_queries() + demo_summary_queries(monkeypatch))
    assert {"JVMHeapMemory", "heap.max", "threadpool.activeTasks"} <= sources  # the parse found them
    missing = []
    for source in sorted(sources):
        if source.startswith("/"):
            wanted = {m for m in sent if re.search(source[1:-1], m)}
        else:
            wanted = {source} & sent  # names Spark does not send come from Telegraf or the annotator
        missing += sorted(wanted - set(stored))
    assert not missing, f"read by a panel or the report, but not stored with the filter on: {missing}"


def test_no_panel_or_report_query_reads_a_measurement_regex(monkeypatch):
    # InfluxDB 1.8 dies (coordinator.LocalShardMapping.CreateIterator closes a
    # nil iterator) when a query over a measurement regex is interrupted after
    # a matched measurement had no series, and Grafana interrupts the queries
    # of every panel it redraws: the first fresh-machine run of the suite lost
    # its InfluxDB that way. Every measurement is read by name.
    sources = read_sources(dashboard_queries() + report_queries() + demo_summary_queries(monkeypatch))
    assert {"JVMHeapMemory", "pools.G1-Old-Gen.used-after-gc"} <= sources  # the parse found them
    assert not [s for s in sources if s.startswith("/")]


def test_the_filter_drops_what_nothing_reads(filtered):
    settings, lines, stored = filtered
    sent = {measurement_of(line) for line in lines}
    assert "compilationTime.p99" in sent and "compilationTime.p99" not in stored
    assert "pools.G1-Eden-Space.committed" in sent and "pools.G1-Eden-Space.committed" not in stored
    # Per executor (executor 1 of the recording), the stored share of series.
    executor = [line for line in lines if line.split(".")[2] == "1"]
    kept = [line for line in executor if measurement_of(line) in stored]
    assert len(kept) < len(executor) / 3, f"{len(kept)} of {len(executor)} executor series kept"


def declared_point(name: str, application: str) -> str:
    """A point of this measurement as its writer sends it: its declared tags, its
    first declared field with a value of the declared type (schema.py)."""
    measurement = schema.BY_NAME[name]
    tags = {schema.APPLICATION: application, schema.EXECUTOR: "3", "kind": "cpu", "device": application}
    tag_text = "".join(f",{t}={tags.get(t, 'x')}" for t in measurement.tags)
    field, kind = measurement.fields[0]
    value = {schema.INTEGER: "1i", schema.FLOAT: "1.5", schema.STRING: '"x"', schema.BOOLEAN: "true"}[kind]
    return f"{name}{tag_text} {field}={value}"


def test_annotator_and_host_measurements_pass_the_filter(filtered):
    settings, _, _ = filtered
    # Line protocol through the events listener, as the annotator, the block
    # probe, the profiler plugin and the thread sampler send it.
    passing = ("sparkscope_application", "sparkscope_stage", "sparkscope_executor_peaks", "block_latency",
               "sparkscope_flame", "sparkscope_profiles", "sparkscope_threads", "sparkscope_thread_waits")
    body = "\n".join(declared_point(m, "app-filter-1") for m in passing)
    influx_write = f"http://{settings.graphite_host}:{settings.events_port}/write?db=spark"
    urllib.request.urlopen(urllib.request.Request(influx_write, data=body.encode(), method="POST"), timeout=10)
    stored = None
    for _ in range(20):
        # The block probe's points name a device, not a run.
        stored = influx.query(settings.influx_admin,
                              'SELECT count(*) FROM /.*/ WHERE "applicationid" = \'app-filter-1\' '
                              'OR "device" = \'app-filter-1\'', settings.database)
        if len(stored) == len(passing):
            break
        time.sleep(1)
    assert sorted(s["name"] for s in stored) == sorted(passing)


def test_a_spark_measurement_sent_to_the_events_listener_cannot_silence_sparks_own_points(filtered):
    """A string "value" for JVMHeapMemory through the events listener would
    fix the field's type for the shard, and InfluxDB would refuse every
    float Spark sends after it. The listener takes sparkscope's own
    measurements only, so Spark's floats over Graphite are stored."""
    settings, _, _ = filtered
    now = int(time.time())
    forged = (f'JVMHeapMemory,applicationid=app-forged-1,executorid=driver value="oops" {now}\n'
              f'sparkscope_application,applicationid=app-forged-1 text="mark",value=1i {now}')
    urllib.request.urlopen(urllib.request.Request(f"{settings.events_url}/write?db=spark&precision=s",
                                                  data=forged.encode(), method="POST"), timeout=10)
    with socket.create_connection((settings.graphite_host, settings.graphite_port), 5) as conn:
        conn.sendall(f"spark.app-forged-1.driver.ExecutorMetrics.JVMHeapMemory 123456789 {now + 1}\n".encode())
    stored = []
    for _ in range(30):
        stored = influx.query(settings.influx_admin, 'SELECT "value" FROM "JVMHeapMemory" WHERE '
                              '"applicationid" = \'app-forged-1\'', settings.database)
        marks = influx.query(settings.influx_admin, 'SELECT "text" FROM "sparkscope_application" WHERE '
                             '"applicationid" = \'app-forged-1\'', settings.database)
        if stored and marks:
            break
        time.sleep(1)
    assert marks, "the annotator's own measurement did not pass the events listener"
    assert [row[1] for row in stored[0]["values"]] == [123456789], stored


def test_keep_everything_stores_every_line_spark_sends(tmp_path):
    with throwaway_stack(tmp_path, only=("influxdb", "telegraf"), unread_metrics="pass") as settings:
        lines = recorded_lines("app-20991231000000-0002")
        stored = send_and_count(settings, lines, expect_at_least=len(lines))
    assert sum(stored.values()) == len(lines)
    assert set(stored) == {measurement_of(line) for line in lines}


def test_a_flood_of_new_names_outside_the_filter_creates_nothing_and_is_counted(tmp_path):
    """Paths of Spark's daemons (*.master.*, *.worker.*) carry no executor:
    any client that reaches the Graphite port could make a measurement per
    line. By default they are dropped before InfluxDB sees them."""
    with throwaway_stack(tmp_path / "state", only=("influxdb", "telegraf")) as settings:
        now = int(time.time())
        flood = "".join(f"spark.master.flood{n}.value {n} {now}\n" f"spark.worker.flood{n}.count 1 {now}\n"
                        for n in range(2000))
        with socket.create_connection((settings.graphite_host, settings.graphite_port), 5) as s:
            s.sendall(flood.encode())
            # One metric the dashboards read, after the flood: it still arrives.
            s.sendall(f"spark.app-flood-1.1.executor.runTime.count 5 {now}\n".encode())
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not influx.query(
                settings.influx_admin, 'SELECT * FROM "runTime.count"', settings.database):
            time.sleep(1)
        # No wait for the flood: it went first on the same connection, and Telegraf keeps a
        # connection's lines in order through its buffer, so with runTime.count stored, it would be too.
        names = [row[0] for s in influx.query(settings.influx_admin, "SHOW MEASUREMENTS", settings.database)
                 for row in s["values"]]
        assert not [n for n in names if "flood" in n]
        assert "runTime.count" in names
