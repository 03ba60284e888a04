"""The PromQL read layer (store/promql.py): with the Thanos store, Spark's
metrics are read through Thanos Query, the annotator's events from InfluxDB.

Fast: what reaches PromQL of a hostile run or executor id (string literal,
and regex literal inside =~), which reads go where, the bucketing arithmetic,
the errors a user sees.

Slow, real: one Spark run with the annotator into a Thanos stack (Telegraf
writes every metric to both stores); `top --once`, `report --json` and each
figure of the read layer read through Thanos equal what InfluxDB gives for
the same run; points with hostile ids sent over Graphite are read back
through both stores, and a regex id matches nothing but itself.
"""

from __future__ import annotations

import http.server
import inspect
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

import pytest

from sparkscope.errors import SparkscopeError
from sparkscope.process import quiet, wait_until
from sparkscope.stack import metrics_reads, thanos
from sparkscope.store import promql
from sparkscope.store.promql import PromQuery, PromReads
from sparkscope.store.reads import InfluxReads, Recent, Run
from sparkscope.store.schema import (
    HEAP_MAX, JVM_HEAP_MEMORY, MAJOR_GC_TIME, MINOR_GC_TIME, RUN_TIME_COUNT, SHUFFLE_TOTAL_BYTES_READ_COUNT,
    THREADPOOL_ACTIVE_TASKS,
)
from sparkscope_testkit.sandbox import free_base_port, isolated_settings

# A run id and an executor id a stranger on the Graphite port could send: a PromQL string's end
# and code after it, and every regex metacharacter (no dot, no space: Graphite splits on them).
HOSTILE_APP = 'app-7"}or(vector(1))#\\x|(a+)*[^b]$'
HOSTILE_EXECUTOR = "0|driver"


# --- fast ------------------------------------------------------------------------------------

class RecordingQuery(PromQuery):
    """Thanos Query answering nothing, recording what it was asked."""

    def __init__(self, answers=None):
        super().__init__("http://127.0.0.1:1", "u", "p")
        self.sent: list[tuple[str, dict]] = []
        self.answers = answers or (lambda path, params: {"result": []})

    def post(self, path, params):
        self.sent.append((path, params))
        return self.answers(path, params)


class RecordingInflux(InfluxReads):
    def __init__(self, run: Run | None = None):
        super().__init__("http://127.0.0.1:1", "spark")
        self.sent: list[str] = []
        self.known = run

    def q(self, statement):
        self.sent.append(statement)
        return []

    def annotated_run(self, app_id):
        self.sent.append(f"annotated_run {app_id}")
        return self.known


def test_a_label_value_is_one_promql_string_and_a_regex_of_itself_alone():
    assert promql.string_literal('a"b\\c\nd') == '"a\\"b\\\\c\\nd"'
    assert promql.string_literal("é✓") == '"é✓"'  # kept: Go refuses \u escapes of surrogate halves
    assert promql.regex_literal("0|driver") == "0\\|driver"
    assert promql.regex_literal("a.b*c+d?e(f)g[h]i{j}k^l$m\\n") == \
        "a\\.b\\*c\\+d\\?e\\(f\\)g\\[h\\]i\\{j\\}k\\^l\\$m\\\\n"
    # In a =~ matcher: first a regex literal, then a string literal of that.
    assert promql.one_of("executorid", ["0|driver", 'x"']) == 'executorid=~"0\\\\|driver|x\\""'
    got = promql.selector(JVM_HEAP_MEMORY, HOSTILE_APP, [HOSTILE_EXECUTOR])
    assert got == ("JVMHeapMemory_value{applicationid=" + json.dumps(HOSTILE_APP) +
                   ', executorid=~"0\\\\|driver"}')


def test_every_read_of_a_run_sends_its_ids_as_literals_only():
    query = RecordingQuery()
    reads = PromReads(query, RecordingInflux(Run(HOSTILE_APP, "n", 1_000_000, 2_000_000)))
    span = (1_000_000, 1_100_000)
    reads.run_totals(HOSTILE_APP, (RUN_TIME_COUNT,))
    reads.executor_maxima(JVM_HEAP_MEMORY, HOSTILE_APP)
    reads.highest(JVM_HEAP_MEMORY, HOSTILE_APP, span)
    reads.plotted(JVM_HEAP_MEMORY, HOSTILE_APP, span, 10)
    reads.active_tasks(HOSTILE_APP, span, 1)
    reads.last_report_ms(HOSTILE_APP, HOSTILE_EXECUTOR)
    reads.reports_since(HOSTILE_APP, 60)
    reads.latest(HOSTILE_APP, (JVM_HEAP_MEMORY, HEAP_MAX), Recent(20), [HOSTILE_EXECUTOR])
    reads.rates(HOSTILE_APP, (MINOR_GC_TIME,), Recent(20), [HOSTILE_EXECUTOR])
    reads.history(HOSTILE_APP, JVM_HEAP_MEMORY, Recent(120), 5, [HOSTILE_EXECUTOR])
    sent = [params["query"] for _, params in query.sent]
    assert len(sent) >= 10
    app = f"applicationid={promql.string_literal(HOSTILE_APP)}"
    for text in sent:
        # The id appears once, as the one literal; nothing of it is left outside.
        assert text.count(app) == 1, text
        assert "vector(1)" not in text.replace(app, ""), text
        if "executorid=" in text:
            assert ('executorid=~"0\\\\|driver"' in text or 'executorid="0|driver"' in text), text


def test_the_metric_reads_never_ask_influxdb_for_a_spark_metric():
    events = RecordingInflux(Run("app-1", "n", 1_000_000, 2_000_000))
    reads = PromReads(RecordingQuery(), events)
    reads.run_totals("app-1", (RUN_TIME_COUNT, SHUFFLE_TOTAL_BYTES_READ_COUNT))
    reads.highest(JVM_HEAP_MEMORY, "app-1", (0, 10_000))
    reads.plotted(JVM_HEAP_MEMORY, "app-1", (0, 100_000), 10)
    reads.active_tasks("app-1", (0, 10_000), 1)
    reads.executor_maxima(JVM_HEAP_MEMORY, "app-1")
    reads.last_report_ms("app-1")
    reads.reports_since("app-1", 60)
    reads.latest("app-1", (JVM_HEAP_MEMORY,), Recent(20))
    reads.rates("app-1", (MAJOR_GC_TIME,), Recent(20))
    reads.history("app-1", JVM_HEAP_MEMORY, Recent(120), 5)
    assert events.sent and all(s == "annotated_run app-1" for s in events.sent), events.sent
    # Every read InfluxReads answers, PromReads answers too: none is missing in thanos mode.
    public = {n for n, _ in inspect.getmembers(InfluxReads, inspect.isfunction) if not n.startswith("_")}
    assert public - {"q", "rows"} <= {n for n, _ in inspect.getmembers(PromReads, inspect.isfunction)}


def test_a_run_without_the_annotator_is_found_by_its_first_sample_exactly():
    def answers(path, params):
        if params["query"].startswith("min(min_over_time(timestamp("):
            return {"result": [{"metric": {}, "value": [1000.0, "160.5"]}]}  # within a step of the first
        assert params["query"].endswith("[61000ms]") and params["time"] == "160.500"
        return {"result": [{"metric": {"executorid": "driver"}, "values": [[100.25, "1"], [130.25, "2"]]},
                           {"metric": {"executorid": "0"}, "values": [[101.0, "1"]]}]}

    reads = PromReads(RecordingQuery(answers), RecordingInflux(None))
    assert reads.run("app-1") == Run("app-1", "app-1", 100_250)
    assert PromReads(RecordingQuery(), RecordingInflux(None)).run("app-1") is None


def test_buckets_are_influxdbs_from_the_epoch_cut_to_the_span():
    """[b, b + bucket) as GROUP BY time() makes them: the inner ones by a range
    query whose steps end 1 ms before the next bucket, the two ends cut to the span."""
    def answers(path, params):
        if path == "/api/v1/query_range":
            assert (params["start"], params["end"], params["step"]) == ("1019.999", "1039.999", "10")
            assert params["query"].endswith("[10000ms]))")
            return {"result": [{"metric": {"executorid": "1"}, "values": [[1019.999, "4"], [1029.999, "6"]]}]}
        # the first bucket [1005, 1010) and the last [1040, 1043] at their ends, ranges cut to the span
        ranges = {"1009.999": "[5000ms]", "1043.000": "[3001ms]"}
        assert params["query"].endswith(ranges[params["time"]] + "))"), params
        return {"result": [{"metric": {"executorid": "1"}, "value": [0, "1" if params["time"] < "104" else "9"]}]}

    reads = PromReads(RecordingQuery(answers), RecordingInflux())
    got = reads.active_tasks("app-1", (1_005_000, 1_043_000), 10)
    assert got == {"1": [(1_000_000, 1.0), (1_010_000, 4.0), (1_020_000, 6.0), (1_040_000, 9.0)]}


def test_top_reads_rates_and_the_newest_sample_from_raw_samples():
    def answers(path, params):
        return {"result": [
            {"metric": {"__name__": "MinorGCTime_value", "executorid": "1"},
             "values": [[10.0, "100"], [11.0, "300"], [12.0, "250"], [13.0, "260"]]},
            {"metric": {"__name__": "JVMHeapMemory_value", "executorid": "1"},
             "values": [[10.0, "5"], [12.0, "7"]]}]}

    reads = PromReads(RecordingQuery(answers), RecordingInflux())
    # a fall (a restarted counter) is left out, as non_negative_derivative leaves it
    assert reads.rates("app-1", (MINOR_GC_TIME, JVM_HEAP_MEMORY), Recent(20))[("1", MINOR_GC_TIME)] == [
        (11_000, 200.0), (13_000, 10.0)]
    assert reads.latest("app-1", (MINOR_GC_TIME, JVM_HEAP_MEMORY), Recent(20)) == {
        ("1", MINOR_GC_TIME): (13_000, 260.0), ("1", JVM_HEAP_MEMORY): (12_000, 7.0)}


class _Refusing(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's name)
        self.server.seen.append((self.headers.get("Authorization"), self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(401)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_credentials_go_in_basic_auth_and_a_refusal_or_no_store_says_what_to_do():
    server = http.server.HTTPServer(("127.0.0.1", 0), _Refusing)
    server.seen = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        with pytest.raises(SparkscopeError, match="answered 401.*password"):
            PromQuery(url, "sparkscope", "s3cret").instant('up{a="x"}', 1000)
        auth, body = server.seen[0]
        assert auth == "Basic c3BhcmtzY29wZTpzM2NyZXQ="  # sparkscope:s3cret
        assert urllib.parse.parse_qs(body.decode()) == {"query": ['up{a="x"}'], "time": ["1.000"]}
    finally:
        server.shutdown()
        server.server_close()
    server = http.server.HTTPServer(("127.0.0.1", 0), _Refusing)
    server.seen = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(SparkscopeError, match="the remote store at .* answered 401.*SPARKSCOPE_REMOTE_USER"):
            PromQuery(f"http://127.0.0.1:{server.server_port}", "", "", name="the remote store").instant("up", 1000)
        assert server.seen[0][0] is None  # no user: no Authorization header
    finally:
        server.shutdown()
        server.server_close()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    with pytest.raises(SparkscopeError, match="not reachable.*sparkscope status"):
        PromQuery(f"http://127.0.0.1:{closed}", "u", "p", timeout_s=2).instant("up", 1000)


def test_the_metrics_store_setting_chooses_the_reads(tmp_path):
    assert type(metrics_reads(isolated_settings(tmp_path / "a"))) is InfluxReads
    settings = isolated_settings(tmp_path / "b", SPARKSCOPE_METRICS_STORE="thanos", THANOS_PORT="20000")
    with pytest.raises(SparkscopeError, match="no password.*sparkscope up"):
        metrics_reads(settings)
    files = thanos.Files(settings.state_dir / "thanos")
    files.folder.mkdir(parents=True)
    files.password_file.write_text("pw\n")
    reads = metrics_reads(settings, timeout_s=7.0)
    assert isinstance(reads, PromReads) and isinstance(reads.events, InfluxReads)
    assert (reads.query.url, reads.query.user, reads.query.password, reads.query.timeout_s) == (
        "http://127.0.0.1:20042", thanos.USER, "pw", 7.0)
    ca = tmp_path / "ca.pem"
    ca.write_text("-")
    remote = metrics_reads(isolated_settings(
        tmp_path / "c", SPARKSCOPE_METRICS_STORE="remote", SPARKSCOPE_REMOTE_WRITE_URL="https://m.example/api/v1/push",
        SPARKSCOPE_REMOTE_QUERY_URL="https://m.example/prometheus/", SPARKSCOPE_REMOTE_USER="spark",
        SPARKSCOPE_REMOTE_PASSWORD="x", SPARKSCOPE_REMOTE_CA_FILE=str(ca)))
    assert isinstance(remote, PromReads)
    assert (remote.query.url, remote.query.user, remote.query.password, remote.query.ca_file) == (
        "https://m.example/prometheus", "spark", "x", str(ca))


# --- slow: a real run through both stores -------------------------------------------------------

SINK_PERIOD_S = 5  # Spark's default (spark-conf): above Telegraf's 2 s flush, see the module docstring


@pytest.fixture(scope="module")
def thanos_run(tmp_path_factory):
    """A Thanos stack and one real Spark run with the annotator in it, both stores
    holding its last reports."""
    from conftest import Stack, run_spark_job
    from sparkscope.provision.annotator_jar import ensure_annotator_jar
    from sparkscope.settings import ROOT
    from sparkscope.spark.conf import SINK, annotator_properties
    from sparkscope_testkit.sandbox import throwaway_stack

    base = free_base_port(3)
    services = ("influxdb", *thanos.layout(base).names, "telegraf")  # no Grafana runs in the tests
    with throwaway_stack(tmp_path_factory.mktemp("promreads-state"), only=services,
                         SPARKSCOPE_METRICS_STORE="thanos", THANOS_PORT=str(base)) as settings:
        jar = ensure_annotator_jar(ROOT, progress=quiet)
        run = run_spark_job(Stack(settings), "metrics_job.py", tmp_path_factory.mktemp("spark"),
                            conf={**annotator_properties(settings, jar), SINK + "period": str(SINK_PERIOD_S)})
        influx = InfluxReads(settings.influx_reader, settings.database)
        prom = metrics_reads(settings)
        assert wait_until(lambda: (influx.annotated_run(run.app_id) or Run("", "", 0)).ended_ms is not None, 60)
        # The last reports leave each JVM as it stops; Telegraf flushes every 2 s to both stores.
        assert wait_until(lambda: set(prom.executor_maxima(JVM_HEAP_MEMORY, run.app_id)) >= {"driver", "0", "1"}, 60)
        time.sleep(6)
        yield settings, run.app_id


def cli(settings, *args: str, store: str) -> subprocess.CompletedProcess:
    from sparkscope.settings import ROOT
    env = {**__import__("os").environ, **settings.as_env(), "SPARKSCOPE_METRICS_STORE": store,
           "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, "-m", "sparkscope", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300, env=env)


# --- what each store holds, and the figures over it ----------------------------------------------
#
# Where the stores can differ: Telegraf writes to Thanos every 2 s, and its remote-write
# serializer keeps the newest sample of each series in one write. A JVM's last report leaves it
# as it stops, often within 2 s of its periodic one, so Thanos may lack that periodic sample which
# InfluxDB holds. The figures are then checked against what InfluxDB's definition gives over the
# samples Thanos holds (and that definition against InfluxDB itself, over all of them).

MERGE_S = 2  # Telegraf's flush_interval (telegraf.conf)
Samples = dict  # executor -> [(time ms, value)], oldest first


def influx_samples(influx: InfluxReads, measurement: str, app_id: str, since_ms: int) -> Samples:
    out: Samples = {}
    for row in influx.rows(f'SELECT "value", "executorid" FROM "{measurement}" WHERE "applicationid" = '
                           f"'{app_id}' AND time > {since_ms}ms"):
        out.setdefault(row["executorid"], []).append((int(row["time"]), float(row["value"])))
    return out


def thanos_samples(prom: PromReads, measurement: str, app_id: str, since_ms: int) -> Samples:
    recent = Recent((int(time.time() * 1000) - since_ms) / 1000)
    return {e: points for (e, _), points in prom._samples(app_id, (measurement,), recent, None).items()}


def held(influx_side: Samples, thanos_side: Samples) -> tuple[Samples, list]:
    """The samples Thanos holds, checked to be InfluxDB's, and the ones it lacks, each
    checked to be one Telegraf's serializer merged: a newer sample of its series came
    within MERGE_S and Thanos holds that one."""
    lacking = []
    for executor_id, points in thanos_side.items():
        assert set(points) <= set(influx_side.get(executor_id, [])), (executor_id, points)
    for executor_id, points in influx_side.items():
        kept = set(thanos_side.get(executor_id, []))
        for i, (t, v) in enumerate(points):
            if (t, v) not in kept:
                after = [p for p in points[i + 1:] if p[0] - t <= MERGE_S * 1000]
                assert any(p in kept for p in after), f"{executor_id}: Thanos lacks ({t}, {v}), not merged"
                lacking.append((executor_id, t))
    return thanos_side, lacking


def highest_of(samples: Samples, start: int, end: int) -> dict[str, float]:
    out = {}
    for executor_id, points in samples.items():
        inside = [v for t, v in points if start <= t <= end]
        if inside:
            out[executor_id] = max(inside)
    return out


def buckets_of(samples: Samples, start: int, end: int, bucket_s: int) -> dict[str, list[tuple[int, float]]]:
    step, out = bucket_s * 1000, {}
    for executor_id, points in samples.items():
        per: dict[int, float] = {}
        for t, v in points:
            if start <= t <= end:
                per[t // step * step] = max(per.get(t // step * step, v), v)
        if per:
            out[executor_id] = sorted(per.items())
    return out


def rates_of(samples: Samples, since: int) -> dict[str, list[tuple[int, float]]]:
    out = {}
    for executor_id, points in samples.items():
        inside = [p for p in points if p[0] > since]
        steps = [(t1, (v1 - v0) * 1000 / (t1 - t0)) for (t0, v0), (t1, v1) in zip(inside, inside[1:]) if v1 >= v0]
        if steps:
            out[executor_id] = steps
    return out


@pytest.mark.slow
def test_each_figure_of_the_read_layer_is_influxdbs_over_the_samples_thanos_holds(thanos_run):
    from sparkscope.report.run_facts import SERIES, TOTALS
    from sparkscope.top.data import COUNTERS, GAUGES
    settings, app_id = thanos_run
    influx = InfluxReads(settings.influx_reader, settings.database, timeout_s=60)
    prom = metrics_reads(settings, timeout_s=60)
    assert isinstance(prom, PromReads)
    run = influx.annotated_run(app_id)
    span = (run.started_ms - 60_000, run.ended_ms + 60_000)
    measurements = sorted({*TOTALS, *SERIES, *GAUGES, *COUNTERS, HEAP_MAX, THREADPOOL_ACTIVE_TASKS})
    # A span whose ends cut a bucket each just after and just before a sample: the cut decides
    # whether those samples count (they do not in InfluxDB's time condition).
    times = sorted(t for points in influx_samples(influx, JVM_HEAP_MEMORY, app_id, span[0]).values()
                   for t, _ in points if t % 10_000 < 9_000)
    inner = (times[len(times) // 4] + 1, times[3 * len(times) // 4] - 1)
    merged, compared = [], 0
    for m in measurements:
        every = influx_samples(influx, m, app_id, span[0])
        kept, lacking = held(every, thanos_samples(prom, m, app_id, span[0]))
        merged += [(m, *x) for x in lacking]
        # InfluxDB's own figures are these definitions over all its samples...
        assert influx.highest(m, app_id, span, 10**12, 0) == highest_of(every, *span), m
        assert influx.plotted(m, app_id, inner, 10, 10**12, 0) == buckets_of(every, *inner, 10), m
        # ... and Thanos' are the same definitions over the samples it holds.
        assert prom.highest(m, app_id, span) == highest_of(kept, *span), m
        assert prom.executor_maxima(m, app_id) == highest_of(kept, *span), m
        assert prom.plotted(m, app_id, inner, 10) == buckets_of(kept, *inner, 10), m
        if m == THREADPOOL_ACTIVE_TASKS:
            for bucket_s in (1, 7):
                got = prom.active_tasks(app_id, (run.started_ms, run.ended_ms), bucket_s)
                assert got == buckets_of(kept, run.started_ms, run.ended_ms, bucket_s)
                assert any(v > 0 for points in got.values() for _, v in points)
        if m in COUNTERS:
            since = run.ended_ms - 20_000
            assert influx.rates(app_id, (m,), Recent(20, run.ended_ms)) == {
                (e, m): r for e, r in rates_of(every, since).items()}
            assert prom.rates(app_id, (m,), Recent(20, run.ended_ms)) == {
                (e, m): r for e, r in rates_of(kept, since).items()}
        if not lacking:  # then simply the same
            assert prom.highest(m, app_id, span) == influx.highest(m, app_id, span, 10**12, 0), m
        compared += bool(every)
    assert compared >= 10
    # Merged samples are the exception (a JVM's stop), not the rule.
    assert len(merged) <= len(measurements) * 3, merged
    # What the serializer keeps is each write's newest sample: a counter's highest (its newest), a
    # JVM's last report and its newest gauges are the same from both stores.
    counters = tuple(sorted(TOTALS))
    assert prom.run_totals(app_id, counters) == influx.run_totals(app_id, counters)
    for executor_id in ("driver", "0", "1"):
        assert prom.last_report_ms(app_id, executor_id) == influx.last_report_ms(app_id, executor_id)
    gauges, recent = tuple(sorted(GAUGES)), Recent(20, run.ended_ms)
    assert prom.latest(app_id, gauges, recent) == influx.latest(app_id, gauges, recent)
    assert prom.latest(app_id, gauges, recent, ["1"]) == influx.latest(app_id, gauges, recent, ["1"])
    # A run read by its metrics alone starts at its first heap sample in both stores.
    first = influx.rows(f'SELECT first("value") FROM "{JVM_HEAP_MEMORY}" WHERE "applicationid" = \'{app_id}\'')
    assert prom._first_sample_ms(app_id) == int(first[0]["time"])
    assert not prom.reports_since(app_id, 1) and prom.reports_since(app_id, 3600)


@pytest.mark.slow
def test_top_and_the_report_read_through_thanos_say_what_they_say_from_influxdb(thanos_run, tmp_path):
    from sparkscope.top.data import ALIVE_S, COUNTERS
    settings, app_id = thanos_run
    screens, documents = {}, {}
    for store in ("influxdb", "thanos"):
        top = cli(settings, "top", app_id, "--once", store=store)
        assert top.returncode == 0, top.stderr
        screens[store] = top.stdout.splitlines()
        report = cli(settings, "report", app_id, "--json", "--out", str(tmp_path / store), store=store)
        assert report.returncode == 0, report.stderr
        documents[store] = json.loads(report.stdout)
        documents[store].pop("report")  # the page's path: each in its own folder
    # The report (capacity, peaks, totals, verdict, comparison) is the same document.
    assert documents["thanos"] == documents["influxdb"]
    cap = documents["thanos"]["capacity"]
    assert cap["task_seconds"] and cap["task_seconds"] > 0 and cap["slot_seconds"] > 0, cap
    assert all(e["heap_max"] for e in documents["thanos"]["executors"]), documents["thanos"]["executors"]
    # top: the same screen, but for the rate columns (GC, shuffle read and write per second) of a JVM
    # one of whose counter samples in top's window Telegraf's serializer merged (see held()).
    influx = InfluxReads(settings.influx_reader, settings.database)
    prom = metrics_reads(settings)
    run = influx.annotated_run(app_id)
    since = run.ended_ms - ALIVE_S * 1000
    merged = {executor_id for m in COUNTERS
              for executor_id, _ in held(influx_samples(influx, m, app_id, since),
                                         thanos_samples(prom, m, app_id, since))[1]}
    thanos_screen, influx_screen = screens["thanos"], screens["influxdb"]
    assert len(thanos_screen) == len(influx_screen) and any(line.startswith("driver") for line in thanos_screen)
    for ours, theirs in zip(thanos_screen, influx_screen):
        executor_id = theirs.split(" ", 1)[0]
        if executor_id in merged and ours != theirs:
            assert ours.split()[:-3] == theirs.split()[:-3], (ours, theirs)
        else:
            assert ours == theirs


@pytest.mark.slow
def test_hostile_ids_sent_over_graphite_read_back_literally_through_thanos(thanos_run):
    settings, app_id = thanos_run
    now = int(time.time())
    lines = [f"spark.{HOSTILE_APP}.{HOSTILE_EXECUTOR}.executor.threadpool.activeTasks 5 {now}",
             f"spark.{HOSTILE_APP}.1.executor.threadpool.activeTasks 2 {now}"]
    with socket.create_connection(("127.0.0.1", settings.graphite_port), timeout=10) as s:
        s.sendall(("\n".join(lines) + "\n").encode())
    influx = InfluxReads(settings.influx_reader, settings.database)
    prom = metrics_reads(settings)
    span = ((now - 60) * 1000, (now + 60) * 1000)
    expected = {HOSTILE_EXECUTOR: 5.0, "1": 2.0}
    assert wait_until(lambda: prom.highest(THREADPOOL_ACTIVE_TASKS, HOSTILE_APP, span) == expected, 30), \
        prom.highest(THREADPOOL_ACTIVE_TASKS, HOSTILE_APP, span)
    assert influx.highest(THREADPOOL_ACTIVE_TASKS, HOSTILE_APP, span, 10**12, 0) == expected
    # The executor id is a regex of "0" or "driver" when pasted: literal, it is itself alone.
    recent = Recent(120)
    only = prom.latest(HOSTILE_APP, (THREADPOOL_ACTIVE_TASKS,), recent, [HOSTILE_EXECUTOR])
    assert only == {(HOSTILE_EXECUTOR, THREADPOOL_ACTIVE_TASKS): (now * 1000, 5.0)}
    assert only == influx.latest(HOSTILE_APP, (THREADPOOL_ACTIVE_TASKS,), recent, [HOSTILE_EXECUTOR])
    real = Recent(10**6)
    assert prom.latest(app_id, (JVM_HEAP_MEMORY,), real, [HOSTILE_EXECUTOR]) == {}
    assert set(e for e, _ in prom.latest(app_id, (JVM_HEAP_MEMORY,), real, ["0", "driver"])) == {"0", "driver"}
