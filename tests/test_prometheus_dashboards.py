"""The PromQL dashboards (dashboards-prometheus/, sparkscope.dashboards.prometheus),
proven as the InfluxDB ones are.

Fast: the declared reads (dashboards/reads.py) render the InfluxQL the
InfluxDB dashboards always had and PromQL to the same rules (a counter is
rated, never averaged; a gauge never rated); the model of Grafana's
Prometheus datasource (sparkscope_testkit/prometheus12.py) escapes as Grafana
does, and refuses a substitution that reads a value wrong or lets it out of
its string; every dashboard decodes strictly against Grafana 12's models and
survives 13's conversion.

Slow, real: a Spark run with the annotator into the Thanos store; the
dashboard opened by the model against Thanos Query, every panel query run:
each has data for the run, and a per-executor graph a series per executor
that sent the metric; the events come from InfluxDB as annotations.
"""

from __future__ import annotations

import copy
import json
import re
import time
from pathlib import Path

import pytest

from sparkscope import dashboards
from sparkscope.dashboards import live, prometheus, queries
from sparkscope.dashboards.reads import (INFLUXQL, PROMQL, SAFE_OPTION, ExecutorGauge, ExecutorRate,
                                         prometheus_legend)
from sparkscope.settings import ROOT
from sparkscope.store.prometheus import series_name
from sparkscope.store.schema import (JVM_CPU_TIME, JVM_HEAP_MEMORY, MINOR_GC_COUNT, OLD_GEN_POOLS,
                                     SHUFFLE_BYTES_WRITTEN_COUNT)
from sparkscope_testkit.grafana12 import ModelError
from sparkscope_testkit.grafana13 import conversion_losses
from sparkscope_testkit.prometheus12 import (CLASSIC, RULE_SETS, SPECIAL_CHARS, PrometheusDashboard,
                                             check_substitution, decode_string, go_duration, literal_alternatives)

BOARDS = {path.name: json.loads(path.read_text())
          for path in sorted((ROOT / dashboards.PROMETHEUS_DIR).glob("*.json"))}
NOW = 1_700_000_000_000
MINUTE = 60_000
SPARK_MEASUREMENTS = sorted({line.split(".", 4)[4] for line in
                             (ROOT / "tests" / "data" / "spark-3.5.9-metric-names.txt").read_text().split()
                             if line.count(".") >= 4})
# Prometheus name -> (measurement, field), for every series a dashboard may read.
BY_SERIES = {series_name(m, "value"): (m, "value") for m in SPARK_MEASUREMENTS}
# Hadoop file system schemes a run reports only when spark.executor.metrics.fileSystemSchemes names them.
BY_SERIES.update({series_name(m, "value"): (m, "value") for m in (
    f"filesystem.{scheme}.{way}_bytes" for scheme in live.FS_SCHEMES for way in ("read", "write"))})
# Telegraf's host inputs the host row reads.
BY_SERIES.update({series_name(m, f): (m, f) for m, fields in (
    ("cpu", [f"usage_{s}" for s in ("user", "system", "iowait", "steal")]), ("mem", ["used", "available"]),
    ("net", ["bytes_recv", "bytes_sent"]), ("pressure", ["total"]),
    ("diskio", ["io_time", "reads", "writes", "read_bytes", "write_bytes", "weighted_io_time", "read_time",
                "write_time"])) for f in fields})
# A run id written by whoever reaches Telegraf: it ends the string it lands in and adds a series.
BREAKS_OUT = 'x"} or vector(1) or {a="'
# A run id full of regex characters, none of which ends a string: it must match itself only.
REGEX_LOOKING = "app-(2)+.x|y*"


def panels(board: dict) -> list[dict]:
    return [p for top in board["panels"] for p in [top, *top.get("panels", [])] if p["type"] != "row"]


def is_promql(panel: dict) -> bool:
    return panel["datasource"]["type"] == "prometheus"


def prom_panels(board: dict) -> list[dict]:
    """The PromQL panels (a PromQL dashboard keeps InfluxDB panels for events and strings)."""
    return [p for p in panels(board) if is_promql(p)]


def exprs(board: dict) -> list[tuple[str, str]]:
    return [(p["title"], t["expr"]) for p in prom_panels(board) for t in p["targets"]]


class FakeProm:
    """The Prometheus API: label values by label name; an empty matrix for any query."""

    def __init__(self, labels: dict[str, list[str]]):
        self.labels = labels

    def __call__(self, path: str, params: dict) -> dict:
        if path.startswith("/api/v1/label/"):
            return {"status": "success", "data": list(self.labels.get(path.split("/")[4], []))}
        return {"status": "success", "data": {"resultType": "matrix", "result": []}}


def opened(board: dict, labels: dict[str, list[str]] | None = None, range_ms: int = 30 * MINUTE,
           rules=PrometheusDashboard, **options) -> PrometheusDashboard:
    labels = labels or {"applicationid": ["app-20261127000000-0000"], "executorid": ["driver", "0", "1"]}
    return rules(board, FakeProm(labels), NOW - range_ms, NOW, influx=lambda q, rp=None: [], **options)


@pytest.fixture(params=sorted(RULE_SETS), ids=sorted(RULE_SETS))
def rules(request):
    return RULE_SETS[request.param]


def one_panel_board(expr: str, *variables: dict) -> dict:
    return {"uid": "t", "templating": {"list": list(variables)}, "annotations": {"list": []},
            "panels": [{"id": 1, "type": "timeseries", "title": "t", "gridPos": {"h": 8, "w": 12, "x": 0, "y": 0},
                        "datasource": prometheus.PROMETHEUS_DATASOURCE,
                        "targets": [{"refId": "A", "datasource": prometheus.PROMETHEUS_DATASOURCE,
                                     "editorMode": "code", "expr": expr, "legendFormat": "{{executorid}}",
                                     "range": True, "instant": False}]}]}


def the_query(dash: PrometheusDashboard) -> str:
    [request] = dash.panel_requests(panels(dash.board)[0])
    return request.expr


APP_VARIABLE = prometheus.variables()[0]
EXECUTOR_VARIABLE = prometheus.variables()[1]


# ------------------------------------------------------------------ the declared reads

def test_a_declared_read_renders_the_influxql_the_dashboards_always_had():
    assert ExecutorGauge(JVM_HEAP_MEMORY, "$tag_executorid used", agg="max").render(INFLUXQL) == \
        queries.gauge(JVM_HEAP_MEMORY, "$tag_executorid used", agg="max")
    assert ExecutorRate(JVM_CPU_TIME, divisor=1_000_000_000).render(INFLUXQL) == \
        queries.rate(JVM_CPU_TIME, scale=" / 1000000000")
    assert ExecutorRate(MINOR_GC_COUNT, per="1m").render(INFLUXQL) == queries.rate(MINOR_GC_COUNT, per="1m")
    with queries.raw_samples():  # the resolution in force where it is declared, not where it is rendered
        raw = ExecutorGauge(JVM_HEAP_MEMORY)
        expected = queries.gauge(JVM_HEAP_MEMORY)
    assert raw.render(INFLUXQL) == expected and '"$rp".' not in expected["query"]


def test_the_same_read_in_promql_rates_a_counter_and_reads_a_gauges_interval():
    heap = ExecutorGauge(JVM_HEAP_MEMORY, "$tag_executorid used", agg="max").render(PROMQL)
    assert heap["expr"] == ('max by (executorid) (max_over_time(JVMHeapMemory_value{applicationid="$applicationid", '
                            'executorid=~"$executorid"}[$__interval]))')
    assert heap["legendFormat"] == "{{executorid}} used"
    gc = ExecutorRate(MINOR_GC_COUNT, per="1m").render(PROMQL)["expr"]
    assert gc == ('sum by (executorid) (rate(MinorGCCount_value{applicationid="$applicationid", '
                  'executorid=~"$executorid"}[$__rate_interval])) * 60')


def test_a_counter_cannot_be_declared_as_a_gauge_nor_a_gauge_as_a_counter():
    with pytest.raises(ValueError, match="counter"):
        ExecutorGauge(SHUFFLE_BYTES_WRITTEN_COUNT)
    with pytest.raises(ValueError, match="gauge"):
        ExecutorRate(JVM_HEAP_MEMORY)
    with pytest.raises(ValueError, match="Prometheus legend"):
        prometheus_legend("$col")  # an InfluxDB alias pattern with no label behind it


# What may read a stored series directly (the function around its selector): a counter only grows
# while its executor lives, so its rate, increase or highest (its last) value; never an average or a
# sum of its samples. A gauge: its samples' mean, highest, lowest or last; never a rate.
COUNTER_READS = {"rate", "irate", "increase", "max_over_time", "last_over_time"}
GAUGE_READS = {"avg_over_time", "max_over_time", "min_over_time", "last_over_time"}


def counter_read_wrong(expr: str) -> str | None:
    """Why a PromQL expression reads a series against its kind (None: it does not)."""
    found = re.findall(r"(\w+)\((\w+)[{\[]", expr)
    if not found:
        return f"no function reads a series directly: {expr}"
    for function, name in found:
        counter = queries.is_counter(*BY_SERIES[name])
        allowed = COUNTER_READS if counter else GAUGE_READS
        if function not in allowed:
            return f"{'counter' if counter else 'gauge'} {name} read with {function}: {expr}"
    return None


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_counters_are_rated_never_averaged_and_gauges_never_rated(name):
    assert BOARDS[name] and all(counter_read_wrong(expr) is None for _, expr in exprs(BOARDS[name])), \
        [counter_read_wrong(expr) for _, expr in exprs(BOARDS[name]) if counter_read_wrong(expr)]


def test_the_kind_check_fails_on_an_averaged_counter_and_a_rated_gauge():
    assert "counter MinorGCCount_value read with avg_over_time" in counter_read_wrong(
        'avg by (executorid) (avg_over_time(MinorGCCount_value{a="b"}[$__interval]))')
    assert "read with sum_over_time" in counter_read_wrong('sum(sum_over_time(runTime_count_value{a="b"}[1h]))')
    assert "gauge JVMHeapMemory_value read with rate" in counter_read_wrong(
        'sum by (executorid) (rate(JVMHeapMemory_value{a="b"}[$__rate_interval]))')
    assert "read with sum" in counter_read_wrong('sum(runTime_count_value{a="b"})')  # summed samples
    assert "gauge mem_used read with increase" in counter_read_wrong("sum(increase(mem_used[1m]))")
    assert "no function" in counter_read_wrong('runTime_count_value{a="b"}')


def test_the_checked_in_prometheus_dashboards_are_what_the_builder_writes():
    built = dashboards.build_prometheus()
    assert sorted(built) == sorted(BOARDS)
    for name, board in built.items():
        assert (ROOT / dashboards.PROMETHEUS_DIR / name).read_text() == dashboards.render(board)


def test_the_prometheus_live_dashboard_has_the_per_executor_graphs_and_the_influxdb_events():
    board = BOARDS["spark-executors.json"]
    titles = [p["title"] for p in panels(board)]
    for title in ("Active tasks now", "Executors alive", "Task time", "Failed tasks and stages", "Peak heap",
                  "Peak RSS", "Active tasks", "Executor CPU", "JVM heap used vs max", "GC time share",
                  "Shuffle write", "Spill", "File system read"):
        assert title in titles
    assert board["uid"] != json.loads((ROOT / "dashboards" / "spark-executors.json").read_text())["uid"]
    assert {p["datasource"]["type"] for p in panels(board)} == {"prometheus"}
    assert [a["datasource"]["type"] for a in board["annotations"]["list"]] == ["influxdb"] * 7
    annotated = board["annotations"]["list"][0]["filter"]["ids"]
    assert {p["title"] for p in panels(board) if p["id"] in annotated} == {"Active tasks", "JVM heap used vs max",
                                                                  "Task time by component"}
    # Whatever is not rendered is listed, and nothing is both.
    assert set(prometheus.not_yet()).isdisjoint(titles)
    # What Thanos does not hold stays InfluxDB-only: strings, the annotator's, the probes' points.
    assert {"Applications", "Slots busy vs held", "Container memory against its limit", "Block I/O outliers",
            "Input rate vs processing rate", "Task threads: on CPU vs waiting"} <= set(prometheus.not_yet())
    assert {"CPU busy", "Network", "Disk busy", "Disk IOPS: read and write", "Task time by component",
            "GC share of task time", "Disk await: read and write"} <= set(titles)


def test_a_share_is_a_math_expression_over_two_hidden_totals_in_influxql_and_one_ratio_in_promql():
    influx = next(p for p in panels(json.loads((ROOT / "dashboards" / "spark-executors.json").read_text()))
                  if p["title"] == "GC share of task time")
    assert [(t["refId"], t.get("hide", False)) for t in influx["targets"]] == [("A", True), ("B", True), ("C", False)]
    assert influx["targets"][2]["expression"] == "$A / $B"
    [prom] = next(p for p in panels(BOARDS["spark-executors.json"]) if p["title"] == "GC share of task time")["targets"]
    assert not prom.get("hide") and prom["instant"]
    assert prom["expr"] == ('sum(max_over_time(jvmGCTime_count_value{applicationid="$applicationid"}[$__range])) / '
                            '(sum(max_over_time(runTime_count_value{applicationid="$applicationid"}[$__range])) > 0)')


def test_task_time_by_component_reads_the_annotator_totals_in_influxql_only():
    influx = next(p for p in panels(json.loads((ROOT / "dashboards" / "spark-executors.json").read_text()))
                  if p["title"] == "Task time by component")
    prom = next(p for p in panels(BOARDS["spark-executors.json"]) if p["title"] == "Task time by component")
    assert len(influx["targets"]) == 2 * len(prom["targets"]) == 12
    assert [t["alias"] for t in influx["targets"]][::2] == [t["legendFormat"] for t in prom["targets"]]
    assert all("sparkscope_app" not in t["expr"] and t["expr"].startswith("sum(rate(") for t in prom["targets"])


# ------------------------------------------------------------------ the model: escaping

@pytest.mark.parametrize("value,reading,sent", [
    ("a\\b", CLASSIC, "a\\\\b"), ("it's", CLASSIC, "it\\\\'s"), ('say "x"', SPECIAL_CHARS, 'say \\"x\\"'),
])
def test_a_single_value_is_escaped_for_a_string_as_the_datasource_does(value, reading, sent):
    from sparkscope_testkit.prometheus12 import regular_escape
    assert regular_escape(value, reading) == sent


def test_a_multi_value_is_escaped_for_a_regex_in_a_string_and_joined():
    dash = opened(one_panel_board('up{executorid=~"$executorid"}', APP_VARIABLE, EXECUTOR_VARIABLE),
                  {"applicationid": ["app-1"], "executorid": ["1.5", "driver"]},
                  url_vars={"executorid": ["1.5", "driver"]})
    assert the_query(dash) == 'up{executorid=~"(1\\\\.5|driver)"}'
    assert decode_string('"(1\\\\.5|driver)"') == "(1\\.5|driver)"
    assert literal_alternatives("(1\\.5|driver)") == ["1.5", "driver"]
    all_picked = opened(one_panel_board('up{executorid=~"$executorid"}', APP_VARIABLE, EXECUTOR_VARIABLE))
    assert the_query(all_picked) == 'up{executorid=~".*"}'  # All: the custom value, as it is


def test_promql_strings_decode_with_gos_escapes_and_refuse_others():
    assert decode_string('"a\\\\b\\"c\\n"') == 'a\\b"c\n'
    assert decode_string("`a\\.b`") == "a\\.b"
    with pytest.raises(ModelError, match="unknown escape"):
        decode_string('"app-1\\.2"')


def test_rate_interval_and_step_follow_the_range_and_the_scrape_interval():
    board = one_panel_board('sum(rate(up{a="b"}[$__rate_interval])) / $__interval_ms', )
    short = opened(board, range_ms=30 * MINUTE)
    [request] = short.panel_requests(panels(board)[0])
    assert short.scrape_interval == "10s"  # grafana/thanos/datasources: the datasource's timeInterval
    assert request.expr == 'sum(rate(up{a="b"}[40s])) / 10000' and request.params["step"] == "10"
    day = opened(board, range_ms=24 * 60 * MINUTE)
    [request] = day.panel_requests(panels(board)[0])
    assert request.expr == 'sum(rate(up{a="b"}[2m10s])) / 120000' and request.params["step"] == "120"
    assert int(request.params["start"]) % 120 == 0 and int(request.params["end"]) % 120 == 0
    assert go_duration(7_200_000) == "2h0m0s" and go_duration(120_000) == "2m0s"


# ------------------------------------------------------------------ the model: what it refuses

def test_the_regex_format_is_refused_a_dot_becomes_an_escape_promql_rejects():
    """${applicationid:regex} is @grafana/data's escapeRegex: one backslash, which a PromQL string
    refuses (\\. is no escape of Go's); it reads right only for ids without regex characters."""
    board = one_panel_board('up{applicationid=~"${applicationid:regex}"}', APP_VARIABLE)
    plain = opened(board, {"applicationid": ["app-20261127000000-0000"]})
    assert the_query(plain) == 'up{applicationid=~"app-20261127000000-0000"}'
    with pytest.raises(ModelError, match="unknown escape"):
        the_query(opened(board, {"applicationid": [REGEX_LOOKING]}))


def test_the_regex_format_is_refused_a_quote_ends_the_string():
    board = one_panel_board('up{applicationid=~"${applicationid:regex}"}', {**APP_VARIABLE, "regex": ""})
    with pytest.raises(ModelError, match="ended its string|does not lex"):
        the_query(opened(board, {"applicationid": [BREAKS_OUT]}))


def test_a_single_value_in_a_regex_matcher_is_refused_it_matches_more_than_itself():
    board = one_panel_board('up{applicationid=~"$applicationid"}', APP_VARIABLE)
    with pytest.raises(ModelError, match="does not match exactly"):
        the_query(opened(board, {"applicationid": [REGEX_LOOKING]}))


def test_a_check_passes_a_right_substitution_and_fails_each_wrong_one():
    template = 'up{applicationid="$applicationid"}'
    check_substitution(template, 'up{applicationid="a\\\\b"}', {"applicationid": "a\\b"}, CLASSIC)
    for wrong, says in [('up{applicationid="a\\b"}', "unknown escape"),          # \b is a backspace: "a<BS>"
                        ('up{applicationid="x"} or vector(1) or {a=""}', "ended its string"),
                        ('up{applicationid="y"}', "not the value")]:
        with pytest.raises(ModelError, match=says):
            if says == "unknown escape":
                check_substitution(template, 'up{applicationid="a\\.b"}', {"applicationid": "a.b"}, CLASSIC)
            else:
                check_substitution(template, wrong, {"applicationid": "x"}, CLASSIC)


# ------------------------------------------------------------------ our dashboard and hostile run ids

@pytest.mark.parametrize("name", sorted(BOARDS))
def test_a_hostile_run_id_in_the_store_is_not_offered_and_a_regex_looking_one_matches_only_itself(name, rules):
    labels = {"applicationid": [BREAKS_OUT, REGEX_LOOKING, "it's", "back\\slash"], "executorid": ["0", "1"]}
    dash = opened(BOARDS[name], labels, rules=rules)
    offered = dash.variables["applicationid"].options_values()
    assert BREAKS_OUT not in offered and "it's" not in offered
    assert sorted(offered) == sorted([REGEX_LOOKING, "back\\slash"])
    for picked in offered:
        dash = opened(BOARDS[name], labels, rules=rules, url_vars={"applicationid": picked})
        assert dash.variables["applicationid"].current == [picked]
        for panel in panels(BOARDS[name]):
            for request in dash.panel_requests(panel):  # each checked under both escapings
                if is_promql(panel):
                    assert "$" not in request.expr, request.expr
                else:  # InfluxQL: a regex's $ anchor stays, no variable or macro
                    assert not re.search(r"\$(\w|\{)", request.query), request.query
        for annotation in BOARDS[name]["annotations"]["list"]:
            dash.annotation_events(annotation)  # InfluxQL: the InfluxDB model's own rules and checks


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_a_quote_forced_through_the_url_is_caught_where_grafanas_classic_escaping_lets_it_out(name):
    """A URL is the viewer's own input (Explore runs any query too); still, the model shows what
    Grafana does: the classic escaping leaves a double quote as it is, the newer one escapes it."""
    labels = {"applicationid": ["app-1"], "executorid": ["0"]}
    with pytest.raises(ModelError, match=rf"\[{CLASSIC}\].*ended its string"):
        opened(BOARDS[name], labels, url_vars={"applicationid": BREAKS_OUT}).panel_requests(
            prom_panels(BOARDS[name])[0])
    newer = opened(BOARDS[name], labels, url_vars={"applicationid": BREAKS_OUT}, readings=(SPECIAL_CHARS,))
    request = newer.panel_requests(prom_panels(BOARDS[name])[0])[0]
    assert 'applicationid="x\\"} or vector(1) or {a=\\""' in request.expr


def test_the_option_filter_is_the_one_the_dashboard_uses():
    assert {v["regex"] for v in prometheus.variables()} == {SAFE_OPTION}
    assert prometheus.summary_variables()[0] == prometheus.variables()[0]


# ------------------------------------------------------------------ the summary: Spark's metrics in PromQL

SUMMARY = "spark-application.json"


def test_the_prometheus_summary_reads_sparks_metrics_from_thanos_and_the_events_from_influxdb():
    board = BOARDS[SUMMARY]
    influx_board = json.loads((ROOT / "dashboards" / SUMMARY).read_text())
    assert board["uid"] != influx_board["uid"]
    # The same panels in the same places, each on the datasource that holds what it reads.
    assert [(p["title"], p["gridPos"]) for p in panels(board)] == [(p["title"], p["gridPos"]) for p in
                                                                   panels(influx_board)]
    on_thanos = {p["title"] for p in prom_panels(board)}
    assert {"Executors used", "Task time", "GC share of task time", "Failed tasks and stages",
            "Peak memory per executor, sampled", "Task time by component, all executors",
            "Work per executor"} == on_thanos
    assert set(prometheus.summary_not_promql()) == {p["title"] for p in panels(board)} - on_thanos
    # InfluxDB panels as the InfluxDB summary has them, query for query.
    by_title = {p["title"]: p for p in panels(influx_board)}
    for panel in panels(board):
        if not is_promql(panel):
            assert panel["targets"] == by_title[panel["title"]]["targets"], panel["title"]
            assert {t["datasource"]["type"] for t in panel["targets"]} <= {"influxdb", "__expr__"}


def test_a_per_executor_table_in_promql_names_its_columns_as_the_influxdb_one():
    board = BOARDS[SUMMARY]
    influx_board = json.loads((ROOT / "dashboards" / SUMMARY).read_text())
    for title in ("Peak memory per executor, sampled", "Work per executor"):
        [prom] = [p for p in panels(board) if p["title"] == title]
        [influx] = [p for p in panels(influx_board) if p["title"] == title]
        assert all(t["format"] == "table" and t["instant"] for t in prom["targets"])
        renamed = prom["transformations"][-1]["options"]["renameByName"]
        assert list(renamed.values()) == [t["alias"] for t in influx["targets"]]
        assert list(renamed) == [f"Value #{t['refId']}" for t in prom["targets"]]
        assert prom["transformations"][:-1] == influx["transformations"]
    sampled = next(p for p in panels(board) if p["title"] == "Peak memory per executor, sampled")
    assert all(t["expr"].endswith("topk($top, max by (executorid) (max_over_time(JVMHeapMemory_value"
                                  '{applicationid="$applicationid"}[$__range])))') for t in sampled["targets"])
    work = next(p for p in panels(board) if p["title"] == "Work per executor")
    assert not any("topk" in t["expr"] for t in work["targets"])  # every executor's work


def test_the_top_variable_limits_the_sampled_table_as_the_model_sends_it():
    dash = opened(BOARDS[SUMMARY], url_vars={"applicationid": "app-1", "top": "10"})
    sampled = next(p for p in panels(BOARDS[SUMMARY]) if p["title"] == "Peak memory per executor, sampled")
    assert all(r.expr.endswith('topk(10, max by (executorid) (max_over_time(JVMHeapMemory_value'
                               '{applicationid="app-1"}[1800s])))') for r in dash.panel_requests(sampled))


# ------------------------------------------------------------------ Grafana 12.4 and 13 models

@pytest.fixture(scope="module")
def check():
    from sparkscope.process import quiet
    from sparkscope_dev.dashcheck import check_dashboards
    from sparkscope_testkit.sandbox import isolated_settings
    import tempfile
    from pathlib import Path
    cache = isolated_settings(Path(tempfile.mkdtemp())).cache_dir
    return lambda path, grafana13=False: check_dashboards([path], cache, quiet, grafana13=grafana13)


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_the_dashboard_decodes_strictly_as_grafana12_and_survives_13s_conversion(check, name):
    path = ROOT / dashboards.PROMETHEUS_DIR / name
    assert check(path) == [] and check(path, grafana13=True) == []
    assert conversion_losses(BOARDS[name]) == []


def test_the_strict_decode_refuses_a_prometheus_target_field_grafana_does_not_know(check, tmp_path):
    board = copy.deepcopy(BOARDS["spark-executors.json"])
    panels(board)[0]["targets"][0]["exprs"] = "up"
    path = tmp_path / "wrong.json"
    path.write_text(json.dumps(board))
    assert check(path) != []


# ------------------------------------------------------------------ real: a Spark run through Thanos Query

from test_thanos import Query, started_thanos_stack  # noqa: E402


@pytest.fixture(scope="module")
def thanos_stack(tmp_path_factory):
    with started_thanos_stack(tmp_path_factory) as settings:
        yield settings


# Targets empty on a run without what they show (panel, legend).
EMPTY_WITHOUT = {("File system read", f"{{{{executorid}}}} {scheme}"): "a file system scheme outside "
                 "spark.executor.metrics.fileSystemSchemes (file,hdfs): Spark sends no series for it"
                 for scheme in ("s3a", "gs", "abfs")}
EMPTY_WITHOUT.update({("File system write", legend): why for (_, legend), why in EMPTY_WITHOUT.items()})


@pytest.fixture(scope="module")
def thanos_run(thanos_stack, tmp_path_factory):
    return metrics_run_through_thanos(thanos_stack, tmp_path_factory)


def metrics_run_through_thanos(thanos_stack, tmp_path_factory):
    """tests/jobs/metrics_job.py with the annotator into the Thanos store, once Thanos Query has
    every JVM's series."""
    from conftest import Stack, run_spark_job
    from sparkscope.process import quiet
    from sparkscope.provision.annotator_jar import ensure_annotator_jar
    from sparkscope.spark.conf import annotator_properties
    from sparkscope.process import wait_until

    jar = ensure_annotator_jar(ROOT, progress=quiet)
    run = run_spark_job(Stack(thanos_stack), "metrics_job.py", tmp_path_factory.mktemp("spark"),
                        conf=annotator_properties(thanos_stack, jar))
    query = Query(thanos_stack)
    assert wait_until(lambda: set(query.per_executor(run.app_id)) >= {"driver", "0", "1"}, 60)
    time.sleep(6)  # the JVMs' last reports, flushed every 2 s
    return run


def open_on_thanos(settings, run, board: dict, end_ms: int | None = None,
                   rules=PrometheusDashboard) -> PrometheusDashboard:
    from sparkscope_testkit.sandbox import reader_http
    query = Query(settings)
    return rules(board, lambda path, params: query.get(path, **params),
                               run.started_ms - MINUTE, end_ms or run.ended_ms + MINUTE,
                               influx=reader_http(settings), url_vars={"applicationid": run.app_id})


def executors_sending(query: Query, expr: str, app_id: str) -> set[str]:
    name = re.search(r"(\w+)\{", expr).group(1)
    return set(query.get("/api/v1/label/executorid/values",
                         **{"match[]": f'{name}{{applicationid="{app_id}"}}'})["data"])


def influx_panel_has_data(dash: PrometheusDashboard, panel: dict) -> list[tuple[str, str]]:
    """An InfluxDB panel of a PromQL dashboard, run by the model with the dashboard's variables: data
    for each target the InfluxDB dashboards' test finds data for on the same job (test_dashboards)."""
    from test_dashboards import EMPTY_ON_A_HEALTHY_HOST, EMPTY_WITHOUT as EMPTY_IN_INFLUXDB, non_empty
    results = dash.run_panel(panel)
    checked = []
    for target in panel["targets"]:
        if target.get("hide") or panel["title"] in EMPTY_ON_A_HEALTHY_HOST or \
                (panel["title"], target.get("alias")) in EMPTY_IN_INFLUXDB or "'NO_END_SEEN'" in target.get("query", ""):
            continue
        if target["datasource"]["type"] == "influxdb" and any(f'"{pool}"' in target["query"]
                                                             for pool in OLD_GEN_POOLS):
            continue  # one per collector: only the run's own has series
        assert non_empty(results.get(target["refId"], [])), f"{panel['title']} {target['refId']}: no data"
        checked.append((panel["title"], target["refId"]))
    return checked


def reads_the_end(panel: dict) -> bool:
    """A stat of what reports at the end of the range ("now"): opened mid-run, as the InfluxDB test does."""
    return any("last_over_time" in t["expr"] for t in panel["targets"])


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BOARDS))
def test_every_promql_panel_has_data_for_a_real_run_through_thanos_query(thanos_stack, thanos_run, name, rules):
    board = BOARDS[name]
    dash = open_on_thanos(thanos_stack, thanos_run, board, rules=rules)
    mid_run = open_on_thanos(thanos_stack, thanos_run, board, (thanos_run.started_ms + thanos_run.ended_ms) // 2,
                             rules=rules)
    assert dash.variables["applicationid"].current == [thanos_run.app_id]
    assert thanos_run.app_id in dash.variables["applicationid"].options_values()  # offered, not only from the URL
    if "executorid" in dash.variables:  # the summary reads every executor
        assert set(dash.variables["executorid"].options_values()) >= {"driver", "0", "1"}
    query = Query(thanos_stack)
    checked = []
    for panel in panels(board):
        if not is_promql(panel):
            checked += influx_panel_has_data(dash, panel)
            continue
        opened_ = mid_run if reads_the_end(panel) else dash
        results = opened_.run_panel(panel)
        for request in opened_.panel_requests(panel):
            got = results[request.ref_id]
            if request.instant and request.expr.startswith("max by (executorid)"):  # a table: a row per executor
                expected = executors_sending(query, request.expr, thanos_run.app_id)
                assert {s["metric"].get("executorid") for s in got} == expected, (panel["title"], request.expr)
                assert all(float(s["value"][1]) >= 0 for s in got)
                if expected:  # read by name for runs that send it (Python RSS without Python workers)
                    checked.append((panel["title"], request.ref_id))
                continue
            if request.instant:
                assert len(got) == 1 and float(got[0]["value"][1]) >= 0, (panel["title"], request.legend, got)
                if panel["title"] in ("Active tasks now", "Executors alive", "Task time", "Peak heap"):
                    assert float(got[0]["value"][1]) > 0, (panel["title"], request.legend, got)
                checked.append((panel["title"], request.legend))
                continue
            points = [v for series in got for _, v in series["values"]]
            if (panel["title"], request.legend) in EMPTY_WITHOUT:
                continue
            assert points, f"{panel['title']} {request.ref_id}: no data: {request.expr}"
            assert all(float(v) >= 0 for v in points), f"{panel['title']}: a negative rate or size"
            if request.expr.startswith("sum(rate("):  # summed over the picked executors: one line
                assert len(got) == 1, (panel["title"], request.legend, got)
                checked.append((panel["title"], request.legend))
                continue
            if "by (executorid)" not in request.expr:  # the host's: a line per host and device or interface
                assert all(s["metric"].get("host") for s in got), got[:1]
                names = opened_.series_names(request, got)
                assert len(set(names)) == len(names) and all(names), names
                checked.append((panel["title"], request.legend))
                continue
            # A line per executor that sent the metric, and none for another run.
            expected = executors_sending(query, request.expr, thanos_run.app_id)
            assert expected >= {"0", "1"}, f"{request.expr}: executors 0 and 1 sent nothing: {expected}"
            assert {s["metric"].get("executorid") for s in got} == expected, (panel["title"], request.legend)
            names = opened_.series_names(request, got)
            assert len(set(names)) == len(names) and all(n.split(" ")[0] in expected for n in names), names
            checked.append((panel["title"], request.legend))
    assert len(checked) >= {"spark-executors.json": 45, SUMMARY: 40}[name], checked
    # The events, from InfluxDB, on the same run.
    for annotation in board["annotations"]["list"]:
        events = dash.annotation_events(annotation)
        if annotation["name"] in ("SQL queries", "Jobs", "Stages", "Executors added/removed"):
            assert events and all(event.get("text") for event in events), f"{annotation['name']}: {events[:3]}"


@pytest.mark.slow
def test_the_same_declarations_read_the_same_figures_from_thanos_and_influxdb(thanos_stack, thanos_run):
    """Telegraf wrote the same samples to both stores: each executor's highest heap sample in the
    heap graph, the run's task time total and its peak heap stat agree between the PromQL dashboard on
    Thanos and the InfluxDB one."""
    from conftest import Stack
    from sparkscope_testkit.grafana12 import Dashboard12
    board = BOARDS["spark-executors.json"]
    influx_board = json.loads((ROOT / "dashboards" / "spark-executors.json").read_text())
    on_thanos = open_on_thanos(thanos_stack, thanos_run, board)
    on_influx = Stack(thanos_stack).open_dashboard(influx_board, on_thanos.time_from_ms, on_thanos.time_to_ms,
                                                   rules=Dashboard12, url_vars={"applicationid": thanos_run.app_id})

    heap = next(p for p in panels(board) if p["title"] == "JVM heap used vs max")
    [used, _] = on_thanos.panel_requests(heap)
    got = on_thanos.run_panel(heap)[used.ref_id]
    from_thanos = {s["metric"]["executorid"]: max(float(v) for _, v in s["values"]) for s in got}
    stored = Stack(thanos_stack).influx(
        f'SELECT max("value") FROM "{JVM_HEAP_MEMORY}" WHERE "applicationid" = \'{thanos_run.app_id}\' '
        'GROUP BY "executorid"')
    from_influx = {s["tags"]["executorid"]: s["values"][0][1] for s in stored}
    assert from_thanos == pytest.approx(from_influx), (from_thanos, from_influx)

    def stat(dash, dashboard: dict, title: str) -> list[float]:
        panel = next(p for p in panels(dashboard) if p["title"] == title)
        results = dash.run_panel(panel)
        if dash is on_thanos:
            return [float(results[ref][0]["value"][1]) for ref in sorted(results)]
        return [next(v for row in results[ref][0]["values"] for v in row[1:] if v is not None)
                for ref in sorted(results)]

    for title in ("Task time", "Peak heap", "Peak RSS", "GC share of task time"):
        thanos_figures, influx_figures = stat(on_thanos, board, title), stat(on_influx, influx_board, title)
        assert thanos_figures == pytest.approx(influx_figures), (title, thanos_figures, influx_figures)


# ------------------------------------------------------------------ provisioned with the Thanos store only

def test_grafana_gets_the_promql_datasource_and_dashboards_only_with_the_thanos_or_a_remote_store(tmp_path):
    from test_native_grafana import grafana_home
    from sparkscope.process import quiet
    from sparkscope.stack import StackError, thanos, thanos_layout
    from sparkscope.stack.native import grafana_service
    from sparkscope_testkit.sandbox import isolated_settings

    home = grafana_home(tmp_path / "grafana")
    plain = grafana_service(isolated_settings(tmp_path / "a", GRAFANA_HOME=str(home)), quiet)
    assert plain.env["GF_PATHS_PROVISIONING"] == str(ROOT / "grafana" / "provisioning")
    assert not any(key.startswith("THANOS_") for key in plain.env)

    settings = isolated_settings(tmp_path / "b", SPARKSCOPE_METRICS_STORE="thanos", GRAFANA_HOME=str(home))
    with pytest.raises(StackError, match="start the store first"):
        grafana_service(settings, quiet)
    files = thanos.Files(settings.state_dir / "thanos")
    files.folder.mkdir(parents=True)
    files.password_file.write_text("the-query-password\n")
    for _ in range(2):  # remade at each start, the same
        service = grafana_service(settings, quiet)
    folder = Path(service.env["GF_PATHS_PROVISIONING"])
    provided = {p.relative_to(folder).as_posix(): p for p in folder.rglob("*") if p.is_file()}
    repo = ROOT / "grafana" / "provisioning"
    # Every file of the repository's provisioning but the InfluxDB alert rules, whose PromQL twins
    # (the same uids) replace them: test_alerts_prometheus.py.
    assert {p.relative_to(repo).as_posix() for p in repo.rglob("*") if p.is_file()} - set(provided) == \
        {"alerting/sparkscope-rules.yaml"}
    assert provided["alerting/sparkscope-rules-prometheus.yaml"].resolve() == \
        ROOT / "grafana" / "thanos" / "alerting" / "sparkscope-rules-prometheus.yaml"
    assert provided["datasources/thanos.yaml"].resolve() == ROOT / "grafana" / "thanos" / "datasources" / "thanos.yaml"
    assert all(p.is_symlink() for p in provided.values())  # the repository's files, the only copy
    # Every ${VAR} a provisioned file reads, Grafana's environment holds; the password there only.
    for rel, path in provided.items():
        text = path.read_text()
        assert "the-query-password" not in text, rel
        missing = set(re.findall(r"\$\{(\w+)\}", text)) - set(service.env)
        assert not missing, f"{rel} reads {missing}, which Grafana's environment lacks"
    assert service.env["THANOS_PASSWORD"] == "the-query-password"
    assert service.env["THANOS_QUERY_URL"] == thanos_layout(settings).query.http_url
    assert Path(service.env["SPARKSCOPE_PROMETHEUS_DASHBOARDS_DIR"]) == ROOT / dashboards.PROMETHEUS_DIR
    datasource = provided["datasources/thanos.yaml"].read_text()
    assert f"uid: {prometheus.PROMETHEUS_DATASOURCE['uid']}" in datasource and "type: prometheus" in datasource

    # A store the user runs (SPARKSCOPE_METRICS_STORE=remote): the same datasource on its query URL.
    remote = isolated_settings(tmp_path / "c", SPARKSCOPE_METRICS_STORE="remote", GRAFANA_HOME=str(home),
                               SPARKSCOPE_REMOTE_WRITE_URL="https://m.example.com/api/v1/push",
                               SPARKSCOPE_REMOTE_QUERY_URL="https://m.example.com/prometheus",
                               SPARKSCOPE_REMOTE_USER="spark", SPARKSCOPE_REMOTE_PASSWORD="the-remote-password")
    service = grafana_service(remote, quiet)
    folder = Path(service.env["GF_PATHS_PROVISIONING"])
    assert (folder / "datasources" / "thanos.yaml").resolve() == \
        ROOT / "grafana" / "thanos" / "datasources" / "thanos.yaml"
    assert (service.env["THANOS_QUERY_URL"], service.env["THANOS_USER"], service.env["THANOS_PASSWORD"]) == \
        ("https://m.example.com/prometheus", "spark", "the-remote-password")
