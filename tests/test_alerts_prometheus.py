"""The alert rules of the Prometheus modes (SPARKSCOPE_METRICS_STORE=thanos or remote):
grafana/thanos/alerting/sparkscope-rules-prometheus.yaml, which Grafana's provisioning has in
place of the InfluxDB rules file there (stack/native.py, the chart). The same rules, uids,
thresholds and expressions; those on Spark's metrics (heap near max, GC share, idle slots) read
the Prometheus store with PromQL, the events' rules stay on InfluxDB, which holds what a
Prometheus store does not (telegraf/thanos.conf).

Proven as the InfluxDB rules are (test_alerts.py): the file is what the generator writes and
decodes strictly with Grafana 12's alerting models; each twin, evaluated as Grafana evaluates it
(sparkscope_testkit/alerts12.py, its PromQL sent to a real Thanos Query), stays quiet on a
healthy run whose series it judged, and the heap and GC rules fire through Thanos for the
executor that holds its heap and keeps its collector busy, not for the driver.
"""

from __future__ import annotations

import re

import pytest
import yaml

from sparkscope.alerts import generate
from sparkscope.alerts.rules import INFLUXDB_STORE, PROMETHEUS_STORE
from sparkscope.alerts.thresholds import DEFAULTS, Thresholds
from sparkscope.dashboards.queries import DATASOURCE
from sparkscope.dashboards.reads import PROMETHEUS_DATASOURCE
from sparkscope.generate.steps import COMMAND
from sparkscope.settings import ROOT
from sparkscope.store.prometheus import series_name
from sparkscope_testkit import alerts12
from sparkscope_testkit.alerts12 import ALERTING, ModelError, Rule, every, simulate

PROMETHEUS_RULES = generate.PROMETHEUS_ALERTING_DIR / generate.PROMETHEUS_RULES_FILE
SPARK_METRIC_RULES = {"sparkscope-heap-near-max", "sparkscope-gc-share", "sparkscope-idle-slots"}
SPARK_MEASUREMENTS = sorted({line.split(".", 4)[4] for line in
                             (ROOT / "tests" / "data" / "spark-3.5.9-metric-names.txt").read_text().split()
                             if line.count(".") >= 4})


def rules_of(thresholds: Thresholds | None = None, store: str = PROMETHEUS_STORE) -> dict[str, dict]:
    """uid -> rule as Grafana reads it: the checked-in Prometheus file, or the generator's."""
    if thresholds is None and store == PROMETHEUS_STORE:
        return {r["uid"]: r for r in alerts12.load_rules(PROMETHEUS_RULES)}
    document = generate.build(thresholds or DEFAULTS, store=store)
    interval = alerts12.duration_s(document["groups"][0]["interval"])
    return {r["uid"]: {**r, "_interval_s": interval} for r in document["groups"][0]["rules"]}


def prom_queries(rule: dict) -> list[dict]:
    return [q for q in rule["data"] if q["datasourceUid"] == PROMETHEUS_DATASOURCE["uid"]]


# ---------------------------------------------------------------- the file

def test_the_checked_in_prometheus_rules_are_what_the_generator_writes():
    assert PROMETHEUS_RULES.read_text() == generate.render(store=PROMETHEUS_STORE), (
        f"{PROMETHEUS_RULES.relative_to(ROOT)} is stale: run {COMMAND}")
    assert yaml.safe_load(PROMETHEUS_RULES.read_text()) == generate.build(store=PROMETHEUS_STORE)


def test_the_prometheus_rules_file_decodes_strictly_with_grafana_12s_alerting_models(tmp_path_factory):
    from test_alerts import check
    from sparkscope.process import quiet
    from sparkscope_dev.dashcheck import ensure_dashcheck
    from sparkscope_testkit.sandbox import isolated_settings
    binary = ensure_dashcheck(isolated_settings(tmp_path_factory.mktemp("state")).cache_dir, quiet)
    assert check(binary, PROMETHEUS_RULES) == (0, [])
    # and fails where Grafana's Prometheus backend would drop or misread a field
    wrong = yaml.safe_load(PROMETHEUS_RULES.read_text())
    [rule] = [r for r in wrong["groups"][0]["rules"] if r["uid"] == "sparkscope-heap-near-max"]
    rule["data"][0]["model"]["exprs"] = rule["data"][0]["model"].pop("expr")
    rule["data"][1]["model"]["instant"] = "true"
    rule["data"][1]["model"]["expr"] = "x[$__interval]"
    path = tmp_path_factory.mktemp("wrong") / "wrong.yaml"
    path.write_text(yaml.safe_dump(wrong, sort_keys=False))
    status, lines = check(binary, path)
    assert status == 1, lines
    assert any("unexpected field 'exprs'" in line for line in lines), lines
    assert any("model.expr" in line and "required" in line for line in lines), lines
    assert any("model.instant: must be true or false" in line for line in lines), lines
    assert any("$__interval in an alert query" in line for line in lines), lines


def test_the_twins_differ_from_the_influxdb_rules_only_in_the_queries_on_sparks_metrics():
    influx, prom = rules_of(DEFAULTS, INFLUXDB_STORE), rules_of()
    assert list(influx) == list(prom)  # every rule, the same uids in the same order
    for uid in influx:
        a, b = influx[uid], prom[uid]
        assert {k: v for k, v in a.items() if k != "data"} == {k: v for k, v in b.items() if k != "data"}, uid
        assert [q["refId"] for q in a["data"]] == [q["refId"] for q in b["data"]], uid
        for qa, qb in zip(a["data"], b["data"]):
            if qb["datasourceUid"] == PROMETHEUS_DATASOURCE["uid"]:
                assert qa["datasourceUid"] == DATASOURCE["uid"] and qa["relativeTimeRange"] == qb["relativeTimeRange"]
            else:
                assert qa == qb, (uid, qb["refId"])
        assert bool(prom_queries(b)) == (uid in SPARK_METRIC_RULES), uid
    # The idle rule's cores are the annotator's: still InfluxDB.
    idle = prom["sparkscope-idle-slots"]
    assert [q["refId"] for q in prom_queries(idle)] == ["A", "B"]


def test_the_twins_read_series_telegraf_writes_to_the_store_with_the_instances_labels():
    names = {series_name(m, "value") for m in SPARK_MEASUREMENTS}
    for uid in SPARK_METRIC_RULES:
        for q in prom_queries(rules_of()[uid]):
            expr = q["model"]["expr"]
            assert set(re.findall(r"(\w+)\{[^}]*\}\[\$__range\]", expr)) <= names and "[$__range]" in expr, expr
            by = re.findall(r"by \(([^)]*)\)", expr)
            assert by and all(b in ("applicationid, executorid", "applicationid") for b in by), expr
            # Only series that carry every label of the instance (one without would join every run's).
            for selector in re.findall(r"\{([^}]*)\}", expr):
                assert selector == ", ".join(f'{label}!=""' for label in by[0].split(", ")), expr
            assert q["model"]["instant"] is True and q["model"]["range"] is False, expr


def test_short_thresholds_keep_every_promql_query_and_change_only_windows():
    from test_alerts import SHORT
    short, shipped = rules_of(SHORT), rules_of()
    for uid in SPARK_METRIC_RULES:
        assert [q["model"].get("expr") for q in shipped[uid]["data"]] == \
            [q["model"].get("expr") for q in short[uid]["data"]], uid


# ---------------------------------------------------------------- the model's PromQL

def prom_rule(expr: str) -> dict:
    return {"uid": "t", "title": "t", "condition": "FIRING", "noDataState": "OK", "data": [
        {"refId": "A", "relativeTimeRange": {"from": 300, "to": 0}, "datasourceUid": "prom",
         "model": {"refId": "A", "editorMode": "code", "expr": expr, "instant": True, "range": False}},
        {"refId": "LastA", "datasourceUid": "__expr__",
         "model": {"type": "reduce", "expression": "A", "reducer": "last",
                   "settings": {"mode": "replaceNN", "replaceWithValue": 0}}},
        {"refId": "FIRING", "datasourceUid": "__expr__", "model": {"type": "math", "expression": "$LastA > 1"}}]}


def test_model_sends_range_as_the_window_and_evaluates_at_its_end():
    sent = []

    def prom(path, params):
        sent.append((path, params))
        return {"status": "success", "data": {"resultType": "vector", "result": [
            {"metric": {"applicationid": "app-1", "executorid": "0"}, "value": [1, "2"]},
            {"metric": {"applicationid": "app-1", "executorid": "1"}, "value": [1, "0.5"]}]}}
    rule = Rule(prom_rule("max by (applicationid, executorid) (max_over_time(x[$__range]))"), None, "influx",
                prom=prom, prometheus_uid="prom")
    ev = rule.evaluate(1_000_000)
    assert sent == [("/api/v1/query", {"query": "max by (applicationid, executorid) (max_over_time(x[300s]))",
                                       "time": "1000.0"})]
    assert ev.states == {(("applicationid", "app-1"), ("executorid", "0")): ALERTING,
                         (("applicationid", "app-1"), ("executorid", "1")): "Normal"}


def test_model_is_no_data_on_an_empty_vector_and_refuses_a_dashboard_variable():
    def empty(path, params):
        return {"status": "success", "data": {"resultType": "vector", "result": []}}
    assert Rule(prom_rule("x[$__range]"), None, "influx", prom=empty, prometheus_uid="prom").evaluate(60_000).no_data
    with pytest.raises(ModelError, match="only \\$__range"):
        Rule(prom_rule('x{applicationid="$applicationid"}'), None, "influx", prom=empty,
             prometheus_uid="prom").evaluate(60_000)


# ---------------------------------------------------------------- real: runs through Thanos Query

@pytest.fixture(scope="module")
def thanos_stack(tmp_path_factory):
    from test_thanos import started_thanos_stack
    with started_thanos_stack(tmp_path_factory) as settings:
        yield settings


@pytest.fixture(scope="module")
def thanos_run(thanos_stack, tmp_path_factory):
    from test_prometheus_dashboards import metrics_run_through_thanos
    return metrics_run_through_thanos(thanos_stack, tmp_path_factory)


def thanos_rule(settings, uid: str, thresholds: Thresholds | None = None) -> Rule:
    from test_thanos import Query
    from sparkscope_testkit.sandbox import reader_http
    query = Query(settings)
    return Rule(rules_of(thresholds)[uid], reader_http(settings), DATASOURCE["uid"],
                prom=lambda path, params: query.get(path, **params), prometheus_uid=PROMETHEUS_DATASOURCE["uid"])


@pytest.mark.slow
@pytest.mark.parametrize("uid", sorted(SPARK_METRIC_RULES))
def test_every_promql_twin_stays_quiet_on_a_healthy_run_whose_series_it_judged(thanos_stack, thanos_run, uid):
    from test_alerts import SHORT, judged, now_ms
    start, end = thanos_run.started_ms, min(thanos_run.ended_ms + 60_000, now_ms())
    for thresholds in (DEFAULTS, SHORT):
        line = simulate(thanos_rule(thanos_stack, uid, thresholds), every(start, end, 10))
        assert not line.firing(), line.describe()
        assert judged(line, applicationid=thanos_run.app_id), line.describe()


@pytest.fixture(scope="module")
def thanos_trouble_run(thanos_stack, tmp_path_factory):
    from conftest import Stack, java_job_jar
    from test_alerts import run_trouble_job
    return run_trouble_job(Stack(thanos_stack), java_job_jar(tmp_path_factory, "HeapHog"), tmp_path_factory)


@pytest.mark.slow
def test_heap_near_max_and_gc_share_fire_through_thanos_for_the_executor_in_trouble(thanos_stack, thanos_trouble_run):
    from test_alerts import SHORT, firing, now_ms
    run, marks = thanos_trouble_run
    heap = simulate(thanos_rule(thanos_stack, "sparkscope-heap-near-max", SHORT),
                    every(run.started_ms, min(run.ended_ms + 60_000, now_ms()), SHORT.evaluate_every_s))
    assert firing(heap, applicationid=run.app_id, executorid="0"), heap.describe()
    assert not firing(heap, applicationid=run.app_id, executorid="driver"), heap.describe()
    fired = heap.first_alerting[(("applicationid", run.app_id), ("executorid", "0"))]
    assert marks["hold"]["start"] < fired <= marks["hold"]["end"] + 20_000, heap.describe()
    gc = simulate(thanos_rule(thanos_stack, "sparkscope-gc-share", SHORT),
                  every(run.started_ms, min(run.ended_ms + 30_000, now_ms()), SHORT.evaluate_every_s))
    assert firing(gc, applicationid=run.app_id, executorid="0"), gc.describe()
    assert not firing(gc, applicationid=run.app_id, executorid="driver"), gc.describe()
