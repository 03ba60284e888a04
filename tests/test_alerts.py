"""Alert rules, provisioned as files (grafana/provisioning/alerting/): the file
is what src/sparkscope/alerts/ writes, decodes strictly with Grafana 12's
alerting models (tools/dashcheck -alerting), and every rule, evaluated as
Grafana 12 evaluates it (sparkscope_testkit/alerts12.py: its queries sent to the real
InfluxDB as the datasource's read-only user, reduce, math, threshold, `for`),
fires on a run that has its problem and stays quiet on a healthy run.

Where a problem can be caused here it is caused for real: one Spark run in
local-cluster mode (tests/jobs/alert_trouble_job.py) has a straggler stage,
an executor holding its heap with its collector busy, a container near its
memory limit, an OOM kill inside it and an executor the kernel kills; a loop
device on a slow FUSE file gives the block I/O probe its outliers; Telegraf
itself ends a run whose driver went silent, and drops and fails writes while
InfluxDB is away. The healthy run is the session's metrics_run. Rules whose
`for` or windows are longer than a test run are evaluated with SHORT
thresholds: the same queries and expressions, shorter durations."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from conftest import Stack, java_job_jar, run_spark_job
from sparkscope.store import http
from sparkscope.alerts import generate
from sparkscope.stack import contact_points
from sparkscope.alerts.rules import rules
from sparkscope.alerts.thresholds import DEFAULTS, Thresholds
from sparkscope.provision.annotator_jar import ensure_annotator_jar
from sparkscope_dev.dashcheck import ensure_dashcheck
from sparkscope.dashboards.queries import DATASOURCE
from sparkscope.generate.steps import COMMAND
from sparkscope.process import quiet, wait_until
from sparkscope.spark.conf import annotator_properties
from sparkscope.store import influx
from sparkscope.stack.native import NativeBackend
from sparkscope.settings import ROOT
from sparkscope_testkit import alerts12, slow_mount
from sparkscope_testkit.alerts12 import ALERTING, PENDING, ModelError, Rule, every, simulate
from sparkscope_testkit.sandbox import isolated_settings, reader_http, throwaway_stack

RULES_FILE = generate.ALERTING_DIR / generate.RULES_FILE
LIVE = ROOT / "dashboards" / "spark-executors.json"
# The same rules with windows and `for` a test run can hold; evaluated every 10 s. A streaming
# query's first batches after the cold one still warm up (JIT, a busy machine: over a 1 s trigger
# for a few seconds), which the shipped 5 minutes wait out: here three evaluations in a row.
SHORT = Thresholds(evaluate_every_s=10, heap_window_s=10, heap_for_s=10, gc_window_s=15, gc_for_s=10,
                   container_window_s=10, container_for_s=10, streaming_window_s=20, streaming_for_s=20)
CONTAINER_LIMIT_MIB = 900  # executor 1's container in the trouble run
# Executor 0's container: far more than a 1 GiB heap's JVM holds, so the container rules judge it quiet.
ROOMY_LIMIT_MIB = 4096


def rules_of(thresholds: Thresholds | None = None) -> dict[str, dict]:
    """uid -> rule as Grafana reads it: the checked-in file, or the generator's with other thresholds."""
    if thresholds is None:
        return {r["uid"]: r for r in alerts12.load_rules(RULES_FILE)}
    document = generate.build(thresholds)
    interval = alerts12.duration_s(document["groups"][0]["interval"])
    return {r["uid"]: {**r, "_interval_s": interval} for r in document["groups"][0]["rules"]}


def timeline(settings, uid: str, start_ms: int, end_ms: int, thresholds: Thresholds | None = None,
             offset_s: int = 0) -> alerts12.Timeline:
    """The rule evaluated every group interval from start to end, as Grafana would have."""
    rule = Rule(rules_of(thresholds)[uid], reader_http(settings), DATASOURCE["uid"])
    return simulate(rule, every(start_ms + offset_s * 1000, end_ms, rule.interval_s))


def since(settings, uid: str, since_ms: int, thresholds: Thresholds | None = None) -> alerts12.Timeline:
    """The rule evaluated every 10 s from a moment its data had certainly arrived until now
    (for rules that fire at once: finer than Grafana's interval, never coarser)."""
    rule = Rule(rules_of(thresholds)[uid], reader_http(settings), DATASOURCE["uid"])
    return simulate(rule, sorted({*every(since_ms, now_ms(), 10), now_ms()}))


def firing(line: alerts12.Timeline, **labels: str) -> list[dict]:
    """The instances that fired whose labels include these."""
    out = [dict(k) for k in line.firing()]
    return [i for i in out if all(i.get(k) == v for k, v in labels.items())]


def judged(line: alerts12.Timeline, **labels: str) -> list[float]:
    """Every value the rule computed for the instances whose labels include these: empty
    when it never saw them (quiet for want of data, which proves nothing)."""
    return [v for ev in line.evaluations for k, v in ev.values.get("VALUE", {}).items()
            if v is not None and all(dict(k).get(name) == want for name, want in labels.items())]


def now_ms() -> int:
    return int(time.time() * 1000)


@pytest.fixture(scope="module")
def dashcheck(tmp_path_factory) -> Path:
    cache_dir = isolated_settings(tmp_path_factory.mktemp("state")).cache_dir
    return ensure_dashcheck(cache_dir, quiet)


def check(binary: Path, *paths: Path) -> tuple[int, list[str]]:
    done = subprocess.run([str(binary), "-alerting", *map(str, paths)], capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, done.stdout.splitlines()


# ---------------------------------------------------------------- the file

def test_the_checked_in_rules_are_what_the_generator_writes():
    assert RULES_FILE.read_text() == generate.render(), (
        f"grafana/provisioning/alerting/sparkscope-rules.yaml is stale: run {COMMAND}")
    assert yaml.safe_load(RULES_FILE.read_text()) == generate.build()


def test_the_rules_file_decodes_strictly_with_grafana_12s_alerting_models(dashcheck):
    assert check(dashcheck, RULES_FILE) == (0, [])


def test_the_strict_decode_fails_on_an_unknown_field_and_on_a_wrong_type(dashcheck, tmp_path):
    good = yaml.safe_load(RULES_FILE.read_text())
    unknown = json.loads(json.dumps(good))
    rule = unknown["groups"][0]["rules"][0]
    rule["noDataStat"] = rule.pop("noDataState")  # Grafana would drop it silently: NoData by default
    rule["data"][2]["model"]["reducerr"] = "last"
    wrong = json.loads(json.dumps(good))
    wrong["groups"][0]["rules"][1]["for"] = 300  # a number where Grafana wants a duration string
    wrong["groups"][0]["rules"][1]["data"][0]["relativeTimeRange"]["from"] = "5m"
    for name, document in (("unknown", unknown), ("wrong", wrong)):
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    status, lines = check(dashcheck, tmp_path / "unknown.yaml")
    assert status == 1
    assert any("rules[0]: unexpected field 'noDataStat'" in line for line in lines), lines
    assert any("data[2].model.TypeReduce: unexpected field 'reducerr'" in line for line in lines), lines
    status, lines = check(dashcheck, tmp_path / "wrong.yaml")
    assert status == 1
    assert any(".for: json: cannot unmarshal number into Go value of type string" in line for line in lines), lines
    assert any("relativeTimeRange.from: json: cannot unmarshal string" in line for line in lines), lines


def test_each_rule_links_the_panel_it_names_on_the_live_dashboard():
    board = json.loads(LIVE.read_text())
    panels = {p["id"]: p for top in board["panels"] for p in [top, *top.get("panels", [])]}
    variables = {v["name"] for v in board["templating"]["list"]}
    entries = {r.uid: r for r in rules()}
    for uid, rule in rules_of().items():
        entry = entries[uid]
        if entry.panel is None:
            assert "panelId" not in rule and "panel_url" not in rule["annotations"], uid
            continue
        assert rule["dashboardUid"] == board["uid"] == "sparkscope-executors"
        assert panels[rule["panelId"]]["title"] == entry.panel, (uid, rule["panelId"])
        url = rule["annotations"]["panel_url"]
        assert f"viewPanel=panel-{rule['panelId']}" in url and "/d/sparkscope-executors?" in url, url
        picked = re.findall(r"var-(\w+)=", url)
        assert picked and set(picked) <= variables, (uid, picked)
        # Each picked variable comes from a label the rule's queries group by.
        for name in picked:
            assert all(f'"{name}"' in q["model"]["query"] for q in rule["data"]
                       if q["datasourceUid"] == DATASOURCE["uid"]), (uid, name)


def test_every_spark_metric_a_rule_reads_is_one_telegraf_stores():
    conf = (ROOT / "telegraf" / "telegraf.conf").read_text()
    stored = re.search(r"\[\[processors\.filter\.rule\]\]\s*name = \[(.*?)\]", conf, re.S).group(1)
    patterns = re.findall(r'"([^"]+)"', stored)
    for rule in rules_of().values():
        for q in rule["data"]:
            if q["datasourceUid"] != DATASOURCE["uid"]:
                continue
            for measurement in re.findall(r'FROM "([^"]+)"', q["model"]["query"]):
                if measurement.startswith(("sparkscope_", "block_", "internal_")):
                    continue  # the annotator's, the probes' and Telegraf's own: never filtered
                assert any(re.fullmatch(p.replace(".", r"\.").replace("*", ".*"), measurement)
                           for p in patterns), (rule["uid"], measurement)


def test_a_threshold_is_changed_in_one_place_and_reaches_only_its_rule():
    lower = rules_of(replace(DEFAULTS, heap_used_share=0.8))
    default = rules_of(DEFAULTS)
    changed = [uid for uid in default if lower[uid] != default[uid]]
    assert changed == ["sparkscope-heap-near-max"]
    condition = next(q for q in lower["sparkscope-heap-near-max"]["data"] if q["refId"] == "FIRING")
    assert condition["model"]["expression"] == "$LastB > 0 && $LastA > 0.8 * $LastB"


def test_short_thresholds_keep_every_query_and_expression_and_change_only_durations():
    """What the tests evaluate with SHORT is the shipped rule with shorter windows."""
    short, shipped = rules_of(SHORT), rules_of()
    assert short.keys() == shipped.keys()
    for uid in shipped:
        a, b = shipped[uid], short[uid]
        assert [q["model"].get("query") for q in a["data"]] == [q["model"].get("query") for q in b["data"]], uid
        assert [q["model"].get("type") for q in a["data"]] == [q["model"].get("type") for q in b["data"]], uid
        assert a["condition"] == b["condition"] and a["labels"] == b["labels"], uid


def test_every_rule_is_quiet_on_a_missing_field_and_never_divides_by_zero():
    """Grafana fires on NaN and Inf, so nulls become 0 before any math, and the
    ratio rule's condition compares without dividing."""
    for rule in rules_of().values():
        for q in rule["data"]:
            if q["model"].get("type") == "reduce":
                assert q["model"]["settings"] == {"mode": "replaceNN", "replaceWithValue": 0}, rule["uid"]
        condition = next(q for q in rule["data"] if q["refId"] == rule["condition"])["model"]
        assert condition["type"] == "threshold" or "/" not in condition["expression"], rule["uid"]
        assert rule["noDataState"] == "OK" and rule["execErrState"] == "Error", rule["uid"]


# ---------------------------------------------------------------- the model's own rules

def fake_send(answers: dict[str, list[dict]]):
    def send(query: str, rp):
        for key, series in answers.items():
            if key in query:
                return series
        raise AssertionError(f"unexpected query {query!r}")
    return send


def two_query_rule(condition: str, fires: str = "math", for_s: str = "0s") -> dict:
    def query(ref, measurement):
        return {"refId": ref, "relativeTimeRange": {"from": 60, "to": 0}, "datasourceUid": "ds",
                "model": {"refId": ref, "rawQuery": True, "resultFormat": "time_series",
                          "query": f'SELECT last("v") FROM "{measurement}" WHERE $timeFilter GROUP BY "a"'}}
    expr = {"type": "math", "expression": condition} if fires == "math" else {
        "type": "threshold", "expression": "LastA", "conditions": [{"evaluator": {"type": "gt", "params": [0.5]}}]}
    return {"uid": "t", "title": "t", "condition": "F", "noDataState": "OK", "for": for_s, "_interval_s": 10,
            "data": [query("A", "ma"), query("B", "mb"),
                     {"refId": "LastA", "datasourceUid": "__expr__",
                      "model": {"type": "reduce", "expression": "A", "reducer": "last"}},
                     {"refId": "LastB", "datasourceUid": "__expr__",
                      "model": {"type": "reduce", "expression": "B", "reducer": "last"}},
                     {"refId": "F", "datasourceUid": "__expr__", "model": expr}]}


def series(tags: dict, value) -> dict:
    return {"name": "m", "tags": tags, "columns": ["time", "last"], "values": [[1000, value]]}


def test_model_sends_timefilter_as_grafanas_backend_writes_it_and_refuses_other_macros():
    sent = []
    rule = Rule(two_query_rule("$LastA > 0"), lambda q, rp: sent.append(q) or [series({"a": "x"}, 1)], "ds")
    rule.evaluate(100_000)
    assert sent[0] == 'SELECT last("v") FROM "ma" WHERE time >= 40000ms and time <= 100000ms GROUP BY "a"'
    with pytest.raises(ModelError, match="interval"):
        alerts12.interpolate("SELECT x FROM m WHERE $timeFilter GROUP BY time($__interval)", 0, 1)


def test_model_fires_on_nan_and_inf_and_is_no_data_when_a_query_finds_nothing():
    rule = Rule(two_query_rule("$LastA / $LastB"),
                fake_send({"ma": [series({"a": "x"}, 0), series({"a": "y"}, None), series({"a": "z"}, 1)],
                           "mb": [series({"a": "x"}, 0), series({"a": "y"}, 1), series({"a": "z"}, 0)]}), "ds")
    states = rule.evaluate(60_000).states
    assert states[(("a", "x"),)] == ALERTING  # 0/0 is NaN: Grafana fires on anything but 0
    assert states[(("a", "y"),)] == ALERTING  # strict last of a null is NaN
    assert states[(("a", "z"),)] == ALERTING  # 1/0 is Inf
    empty = Rule(two_query_rule("$LastA > 0"), fake_send({"ma": [series({"a": "x"}, 1)], "mb": []}), "ds")
    assert empty.evaluate(60_000).no_data and empty.evaluate(60_000).states == {}


def test_model_joins_single_items_with_different_labels_and_drops_their_labels():
    rule = Rule(two_query_rule("$LastA * $LastB"),
                fake_send({"ma": [series({"a": "x"}, 1)], "mb": [series({"a": "y"}, 1)]}), "ds")
    assert rule.evaluate(60_000).states == {(): ALERTING}
    two = Rule(two_query_rule("$LastA * $LastB"),
               fake_send({"ma": [series({"a": "x"}, 1), series({"a": "z"}, 1)], "mb": [series({"a": "y"}, 1)]}), "ds")
    assert two.evaluate(60_000).states == {}  # nothing joins: no instance (NoData)


def test_model_is_pending_until_for_has_passed_and_resolves_a_missing_instance_after_two_evaluations():
    def send(query: str, rp):
        at = int(re.search(r"time <= (\d+)ms", query).group(1))
        return [series({"a": "x"}, 1)] if at <= 30_000 else [series({"a": "other"}, 0)]
    rule = Rule(two_query_rule("", fires="threshold", for_s="20s"), send, "ds")
    line = simulate(rule, [0, 10_000, 20_000, 30_000, 40_000, 50_000])
    x = (("a", "x"),)
    assert [s.get(x) for s in line.states] == [PENDING, PENDING, ALERTING, ALERTING, ALERTING, None]
    assert line.first_alerting == {x: 20_000}


# ---------------------------------------------------------------- contact points

def test_no_contact_point_is_written_by_default_and_a_stale_one_is_removed(tmp_path):
    assert contact_points.render({}) is None
    assert contact_points.render({"ALERT_SMTP_ENABLED": "false"}) is None
    (tmp_path / contact_points.FILE).write_text("old")
    assert contact_points.sync(tmp_path, {}, quiet) is None
    assert not (tmp_path / contact_points.FILE).exists()
    # The shipped .env.example sets none, and the repository holds no rendered file.
    defaults = isolated_settings(tmp_path / "state").alert_contacts
    assert contact_points.render(dict(defaults)) is None
    # Rendered from a user's .env, never checked in.
    assert f"grafana/provisioning/alerting/{contact_points.FILE}" in (ROOT / ".gitignore").read_text()


def test_each_contact_key_becomes_a_receiver_that_decodes_strictly_and_names_its_variable(dashcheck, tmp_path):
    values = {"ALERT_WEBHOOK_URL": "https://hooks.example/sparkscope", "ALERT_SLACK_URL": "https://slack.example/x",
              "ALERT_EMAIL_TO": "oncall@example.com;data@example.com", "ALERT_SMTP_ENABLED": "true",
              "ALERT_SMTP_HOST": "smtp.example.com:587", "ALERT_SMTP_PASSWORD": "s3cret-smtp"}
    path = contact_points.sync(tmp_path, values, quiet)
    text = path.read_text()
    assert check(dashcheck, path) == (0, [])
    document = yaml.safe_load(text)
    (point,) = document["contactPoints"]
    assert {r["type"]: r["settings"] for r in point["receivers"]} == {
        "webhook": {"url": "${ALERT_WEBHOOK_URL}", "httpMethod": "POST"},
        "slack": {"url": "${ALERT_SLACK_URL}"},
        "email": {"addresses": "${ALERT_EMAIL_TO}", "singleEmail": False}}
    assert document["policies"][0]["receiver"] == point["name"] == "sparkscope"
    for secret in values.values():
        assert secret not in text or secret == "true"  # values stay in .env and Grafana's environment
    env = contact_points.grafana_env(values)
    assert env["ALERT_WEBHOOK_URL"] == values["ALERT_WEBHOOK_URL"] and env["GF_SMTP_ENABLED"] == "true"
    assert env["GF_SMTP_HOST"] == "smtp.example.com:587" and env["GF_SMTP_PASSWORD"] == "s3cret-smtp"
    # Only the webhook: one receiver; an email without SMTP is said.
    said = []
    contact_points.sync(tmp_path, {"ALERT_EMAIL_TO": "a@example.com"}, said.append)
    assert any("no SMTP server" in line for line in said), said
    status, lines = check(dashcheck, path)
    assert status == 0, lines


def test_an_empty_contact_url_is_refused_as_grafana_refuses_it(dashcheck, tmp_path):
    document = yaml.safe_load(contact_points.render({"ALERT_WEBHOOK_URL": "x"}))
    document["contactPoints"][0]["receivers"][0]["settings"]["url"] = ""
    (tmp_path / "empty.yaml").write_text(yaml.safe_dump(document))
    status, lines = check(dashcheck, tmp_path / "empty.yaml")
    assert status == 1 and any("settings.url: required" in line for line in lines), lines


def test_the_default_email_contact_point_grafana_no_longer_creates_is_refused(dashcheck, tmp_path):
    # Grafana 12.4+ seeds no grafana-default-email: a policy or a rule naming it stops provisioning.
    document = yaml.safe_load(contact_points.render({"ALERT_WEBHOOK_URL": "x"}))
    document["policies"][0]["receiver"] = "grafana-default-email"
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(document))
    rules = yaml.safe_load(RULES_FILE.read_text())
    rules["groups"][0]["rules"][0]["notification_settings"] = {"receiver": "grafana-default-email"}
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules))
    status, lines = check(dashcheck, tmp_path / "policy.yaml", tmp_path / "rules.yaml")
    assert status == 1
    assert any("policy.yaml" in line and "policies[0].receiver: grafana-default-email does not exist in Grafana 12.4"
               in line for line in lines), lines
    assert any("rules.yaml" in line and "notification_settings.receiver: grafana-default-email does not exist"
               in line for line in lines), lines


def test_settings_carry_the_contact_keys_to_grafana_in_both_backends(tmp_path):
    settings = isolated_settings(tmp_path / "state", ALERT_WEBHOOK_URL="https://hooks.example/a")
    assert dict(settings.alert_contacts)["ALERT_WEBHOOK_URL"] == "https://hooks.example/a"
    assert settings.as_env()["ALERT_WEBHOOK_URL"] == "https://hooks.example/a"  # compose's environment
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["grafana"]["environment"]
    for key in contact_points.RECEIVERS:
        assert compose[key] == f"${{{key}:-}}", key
    for key, grafana_key in contact_points.SMTP_ENV.items():
        assert key in compose[grafana_key], grafana_key


# ---------------------------------------------------------------- a healthy run: every rule quiet

# Where the healthy run gives a rule nothing to judge, quiet there proves nothing. These rules are
# judged quiet, with a value, on a run that has their measurement but not their problem, in the test named:
QUIET_WITH_DATA_ELSEWHERE = {
    # metrics_run's job has no earlier runs to be slower than: a recurring job's identical rerun.
    "sparkscope-run-slower-than-baseline":
        "test_compare.py::test_the_slower_than_baseline_alert_fires_for_the_slow_run_and_not_the_identical_one",
    # metrics_run's containers have no memory limit: executor 0 of the trouble run has a roomy one.
    "sparkscope-container-near-limit": "test_a_container_near_its_limit_fires_for_that_executor_only",
    # metrics_run has no streaming query: the streaming run's queries that keep up and stop cleanly.
    "sparkscope-streaming-behind":
        "test_streaming.py::test_the_falling_behind_alert_fires_for_that_query_only_and_judges_the_one_that_keeps_up",
    "sparkscope-streaming-failed":
        "test_streaming.py::test_the_failure_alert_fires_for_the_failed_query_from_its_end_and_the_stopped_ones_stay_quiet",
}
# Rules whose query selects the problem itself (an executor lost, a stage flagged straggler, an I/O
# past the probe's threshold, a run ended "no end seen"): no run without the problem gives them a
# value, so their quiet case is the neighbour in their firing test (the other executor, the healthy
# device, the run that ended).
EVENT_RULES = {"sparkscope-executor-lost", "sparkscope-straggler-stage", "sparkscope-disk-latency-outliers",
               "sparkscope-no-end-seen"}


@pytest.mark.parametrize("uid", [r.uid for r in rules()])
def test_every_rule_stays_quiet_on_a_healthy_run(stack, metrics_run, uid):
    """metrics_run: shuffles, caches, spills, Python workers, both executors busy; nothing wrong.
    Evaluated every 10 s from its start to a minute after, with the shipped thresholds and with SHORT;
    quiet because healthy, not for want of data, wherever the run has what the rule reads."""
    start, end = metrics_run.started_ms, min(metrics_run.ended_ms + 60_000, now_ms())
    for thresholds in (DEFAULTS, SHORT):
        rule = Rule(rules_of(thresholds)[uid], reader_http(stack.settings), DATASOURCE["uid"])
        line = simulate(rule, every(start, end, 10))
        fired = line.firing()
        if uid == "sparkscope-disk-latency-outliers":
            # The probe traces every device of this host: loop devices are other tests' slow
            # disks (test_disks, this file's slow_disk, a concurrent run's). The machine's disks stay quiet.
            fired = {i for i in fired if not dict(i)["device"].startswith("loop")}
        assert not fired, line.describe()
        if uid in QUIET_WITH_DATA_ELSEWHERE or uid in EVENT_RULES:
            continue
        # Spark's rules judged this run's own series; the stack's rules, Telegraf's counters meanwhile.
        mine = {"applicationid": metrics_run.app_id} if rule.rule["labels"]["component"] == "spark" else {}
        assert judged(line, **mine), line.describe()


def test_every_rule_without_data_on_the_healthy_run_is_judged_quiet_elsewhere():
    import test_compare
    import test_streaming

    assert set(QUIET_WITH_DATA_ELSEWHERE) | EVENT_RULES <= {r.uid for r in rules()}
    for uid, test in QUIET_WITH_DATA_ELSEWHERE.items():
        module, _, name = test.rpartition("::")
        where = {"test_streaming.py": vars(test_streaming), "test_compare.py": vars(test_compare)}.get(module, globals())
        assert callable(where.get(name)), (uid, test)


# ---------------------------------------------------------------- a run with every problem

@pytest.fixture(scope="module")
def hog_jar(tmp_path_factory) -> Path:
    return java_job_jar(tmp_path_factory, "HeapHog")


@pytest.fixture(scope="module")
def trouble_run(stack, hog_jar, tmp_path_factory):
    return run_trouble_job(stack, hog_jar, tmp_path_factory)


def run_trouble_job(stack, hog_jar, tmp_path_factory):
    """tests/jobs/alert_trouble_job.py with executor 1 in a memory cgroup (test_containers' wrapper):
    (the run, its MARK lines), once the annotator wrote its end."""
    from test_containers import MEMORY, WRAPPER, remove_cgroup
    if os.geteuid() != 0 or not os.access(MEMORY, os.W_OK):
        pytest.fail("needs root and cgroup v1's memory controller at /sys/fs/cgroup/memory "
                    "(the test machines have both)")
    java = shutil.which("java")
    home = tmp_path_factory.mktemp("java_home")
    (home / "bin").mkdir()
    (home / "bin" / "java").write_text(WRAPPER % {"java": os.path.realpath(java)})
    (home / "bin" / "java").chmod(0o755)
    parent = MEMORY / f"sparkscope-alerts-{uuid.uuid4().hex[:8]}"
    parent.mkdir()
    try:
        jar = ensure_annotator_jar(ROOT, progress=lambda _: None)
        conf = {**annotator_properties(stack.settings, jar), "spark.sparkscope.container.periodSeconds": "1"}
        conf["spark.jars"] = f"{conf['spark.jars']},{hog_jar}" if conf.get("spark.jars") else str(hog_jar)
        env = {"JAVA_HOME": str(home), "SPARKSCOPE_TEST_CGROUP": str(parent),
               "SPARKSCOPE_TEST_CGROUP_LIMITS": f"1:{CONTAINER_LIMIT_MIB},0:{ROOMY_LIMIT_MIB}"}
        run = run_spark_job(stack, "alert_trouble_job.py", tmp_path_factory.mktemp("spark"), conf=conf, env=env,
                            timeout_s=240)
    finally:
        remove_cgroup(parent)
    app = influx.string_literal(run.app_id)
    stack.wait_for(f"SELECT \"duration_ms\" FROM \"sparkscope_application\" WHERE \"applicationid\" = {app} "
                   "AND \"status\" = 'FINISHED'", bool)
    marks = {m.group(1): json.loads(m.group(2)) for m in re.finditer(r"^MARK (\w+) (.*)$", run.stdout, re.M)}
    return run, marks


def test_heap_near_max_fires_for_the_executor_holding_its_heap(stack, trouble_run):
    run, marks = trouble_run
    assert any(s.startswith("0:") and "MiB" in s for s in marks["hold"]["heap"]), marks["hold"]
    end = min(run.ended_ms + 60_000, now_ms())
    for offset in (0, 5):
        line = timeline(stack.settings, "sparkscope-heap-near-max", run.started_ms, end, SHORT, offset)
        assert firing(line, applicationid=run.app_id, executorid="0"), line.describe()
        assert not firing(line, applicationid=run.app_id, executorid="driver"), line.describe()
        fired = line.first_alerting[(("applicationid", run.app_id), ("executorid", "0"))]
        assert marks["hold"]["start"] < fired <= marks["hold"]["end"] + 20_000, line.describe()


def test_gc_share_fires_for_the_executor_whose_collector_is_kept_busy(stack, trouble_run):
    run, marks = trouble_run
    line = timeline(stack.settings, "sparkscope-gc-share", run.started_ms, min(run.ended_ms + 30_000, now_ms()),
                    SHORT)
    assert firing(line, applicationid=run.app_id, executorid="0"), line.describe()
    assert not firing(line, applicationid=run.app_id, executorid="driver"), line.describe()


def test_executor_lost_fires_for_the_run_whose_executor_the_kernel_killed(stack, trouble_run):
    run, marks = trouble_run
    assert "1" not in marks["executor_lost"]["alive"], marks
    removed = stack.influx('SELECT "cause", "reason" FROM "sparkscope_executor" WHERE "event" = \'removed\' AND '
                           f'"applicationid" = {influx.string_literal(run.app_id)}')
    # Whichever news reached the driver first: the worker's exit code 137 (killed) or the lost connection (other).
    assert removed and {row[1] for row in removed[0]["values"]} <= {"killed", "other"}, removed
    line = since(stack.settings, "sparkscope-executor-lost", marks["executor_lost"]["end"])
    assert firing(line, applicationid=run.app_id), line.describe()
    lost = line.evaluations[-1].values["VALUE"]
    assert lost[(("applicationid", run.app_id),)] >= 1, lost


def test_an_oom_kill_inside_the_container_fires_for_that_executor_only(stack, trouble_run):
    run, marks = trouble_run
    line = since(stack.settings, "sparkscope-container-oom-kill", marks["oom_kill"]["end"])
    assert firing(line, applicationid=run.app_id, executorid="1"), line.describe()
    assert not firing(line, applicationid=run.app_id, executorid="0"), line.describe()
    assert set(judged(line, applicationid=run.app_id, executorid="0")) == {0}, line.describe()  # seen, no kill


def test_a_container_near_its_limit_fires_for_that_executor_only(stack, trouble_run):
    run, marks = trouble_run
    assert any(e == "1" and held > 0 for e, held in marks["hold"]["container"]), marks["hold"]
    line = timeline(stack.settings, "sparkscope-container-near-limit", run.started_ms,
                    min(run.ended_ms + 30_000, now_ms()), SHORT)
    assert firing(line, applicationid=run.app_id, executorid="1"), line.describe()
    assert not firing(line, applicationid=run.app_id, executorid="0"), line.describe()
    # Executor 0's container has a limit too, with room: judged below the threshold, not unseen.
    room = judged(line, applicationid=run.app_id, executorid="0")
    assert room and max(room) < SHORT.container_used_share, line.describe()


def test_a_straggler_stage_fires_once_written_and_only_when_it_lost_the_minimum(stack, trouble_run):
    """The trouble run's straggler loses about 4 s on one task: it fires with the minimum
    lowered to 2 s, not with the shipped minute (metrics_run's few-second straggler, flagged
    by the annotator on this busy machine, stays quiet the same way)."""
    run, marks = trouble_run
    # The stage point is written at the stage's end and stamped at its start: judged from its end on.
    start = marks["straggler"]["end"] + 5_000
    line = since(stack.settings, "sparkscope-straggler-stage", start, replace(DEFAULTS, straggler_min_excess_s=2))
    assert firing(line, applicationid=run.app_id), line.describe()
    lost_s = line.evaluations[0].values["VALUE"][(("applicationid", run.app_id),)]
    assert 3 < lost_s < 30, lost_s  # the slow task slept 4.5 s, the others 0.3 s
    assert not firing(since(stack.settings, "sparkscope-straggler-stage", start), applicationid=run.app_id)


# ---------------------------------------------------------------- a slow disk: the block I/O probe's outliers

@pytest.fixture(scope="module")
def slow_disk(stack, tmp_path_factory):
    """Two loop devices: one on a FUSE file that delays every I/O by 150 ms, one healthy;
    a few direct reads on each, as the session stack's block I/O probe traces them."""
    base = tmp_path_factory.mktemp("disk")
    under, mnt = base / "under", base / "mnt"
    under.mkdir(), mnt.mkdir()
    for path in (base / "healthy.img", under / "slow.img"):
        path.write_bytes(b"")
        os.truncate(path, 4 << 20)
    devices: dict[str, str] = {}
    with slow_mount.slow_fs_mounted(under, mnt, base / "fs.log", delay_ms=150):
        try:
            for role, image in (("healthy", base / "healthy.img"), ("slow", mnt / "slow.img")):
                done = subprocess.run(["losetup", "--find", "--show", str(image)], capture_output=True, text=True)
                assert done.returncode == 0, done.stderr
                devices[role] = done.stdout.strip()
            started = now_ms()
            for device in devices.values():
                subprocess.run(["dd", f"if={device}", "of=/dev/null", "bs=4k", "count=8", "iflag=direct",
                                "status=none"], check=True, timeout=60)
            names = {role: Path(d).name for role, d in devices.items()}
            stack.wait_for(f"SELECT count(\"latency_ms\") FROM \"block_outlier\" WHERE \"device\" = "
                           f"'{names['slow']}' AND time >= {started}ms",
                           lambda s: bool(s) and s[0]["values"][0][1] >= 8, deadline_s=40)
            stored = now_ms()
        finally:
            for device in devices.values():
                subprocess.run(["losetup", "-d", device], capture_output=True)
    return names, stored


def test_disk_latency_outliers_fire_for_the_slow_device_and_not_the_healthy_one(stack, slow_disk):
    names, stored = slow_disk
    line = since(stack.settings, "sparkscope-disk-latency-outliers", stored)
    assert firing(line, device=names["slow"]), line.describe()
    assert not firing(line, device=names["healthy"]), line.describe()


# ---------------------------------------------------------------- Telegraf's own: no end seen, drops, write errors

@pytest.fixture(scope="module")
def faulty_stack(tmp_path_factory):
    """A throwaway InfluxDB and Telegraf (a 100-point buffer, a 2 s no-end grace): two runs
    report, one sends its end and one goes silent; then InfluxDB is away while points arrive."""
    with throwaway_stack(tmp_path_factory.mktemp("faulty"), only=("influxdb", "telegraf"),
                         TELEGRAF_BUFFER_LIMIT="100", SPARKSCOPE_NO_END_GRACE_S="2") as settings:
        stack, backend = Stack(settings), NativeBackend(settings)
        start = time.time_ns() - 20 * 10**9
        apps = {"silent": f"app-{int(time.time())}-0001", "ended": f"app-{int(time.time())}-0002"}
        running = [f'sparkscope_application,applicationid={app},status=RUNNING app_name="{name}",'
                   f'spark_user="t",spark_version="3.5.9",text="{name}" {start}' for name, app in apps.items()]
        http.post_lines(settings.events_url, running, timeout=10)
        for _ in range(3):
            stack.send_graphite("".join(f"spark.{app}.driver.ExecutorMetrics.JVMHeapMemory 1e8 {int(time.time())}\n"
                                        for app in apps.values()))
            time.sleep(1)  # the behaviour: three reports, a second apart, as a running driver sends them
        end_ms = now_ms()
        http.post_lines(settings.events_url, [
            f'sparkscope_application,applicationid={apps["ended"]},status=FINISHED app_name="ended",'
            f'end_time_ms={end_ms}i,duration_ms={end_ms - start // 10**6}i,text="ended" {start}'], timeout=10)
        stack.wait_for(f"SELECT count(\"end_time_ms\") FROM \"sparkscope_no_end_seen\" WHERE "
                       f"\"applicationid\" = '{apps['silent']}'", bool, deadline_s=40)
        seen_ms = now_ms()
        # InfluxDB away: Telegraf's writes fail, and its 100-point buffer overflows.
        backend.down(only=("influxdb",), progress=quiet)
        try:
            past = int(time.time()) - 3600
            failed = stack.failed_writes()
            stack.send_graphite("".join(f"spark.app-0-0003.1.jvm.heap.max {i} {past + i}\n" for i in range(400)))
            stack.wait_for_failed_writes(failed)  # taken, past the 100-point buffer, and not written
        finally:
            backend.up(only=("influxdb",), progress=quiet)
        stack.wait_for('SELECT max("metrics_dropped"), max("errors") FROM "internal_write" WHERE "output" = '
                       "'influxdb'", lambda s: bool(s) and all((v or 0) > 0 for v in s[0]["values"][0][1:]),
                       deadline_s=60)
        yield settings, apps, seen_ms, now_ms()


def test_a_run_whose_driver_went_silent_without_an_end_fires_and_one_that_ended_does_not(faulty_stack):
    settings, apps, seen_ms, _ = faulty_stack
    line = since(settings, "sparkscope-no-end-seen", seen_ms)
    assert firing(line, applicationid=apps["silent"]), line.describe()
    assert not firing(line, applicationid=apps["ended"]), line.describe()


def test_points_telegraf_dropped_fire_the_stack_rule(faulty_stack):
    settings, _, _, stored_ms = faulty_stack
    line = since(settings, "sparkscope-telegraf-dropped-points", stored_ms)
    (instance,) = firing(line)
    assert instance.get("host"), instance


def test_writes_influxdb_did_not_take_fire_the_stack_rule(faulty_stack):
    settings, _, _, stored_ms = faulty_stack
    line = since(settings, "sparkscope-influxdb-write-errors", stored_ms)
    (instance,) = firing(line)
    assert instance.get("host"), instance


# ---------------------------------------------------------------- last: time has passed since the trouble run

def test_a_run_that_ended_stops_firing_heap_near_max(stack, trouble_run):
    """Once the run has ended its heap series leave the rule's window: the rule finds no data,
    the instance goes missing and resolves after two evaluations (the fixtures above took
    that long; it waits only when run alone)."""
    run, marks = trouble_run
    settle = run.ended_ms + (SHORT.heap_window_s + 3 * SHORT.evaluate_every_s) * 1000
    wait_until(lambda: now_ms() > settle, 120)
    line = timeline(stack.settings, "sparkscope-heap-near-max", marks["hold"]["start"], now_ms(), SHORT)
    instance = (("applicationid", run.app_id), ("executorid", "0"))
    assert instance in line.first_alerting, line.describe()
    assert line.evaluations[-1].no_data and instance not in line.states[-1], line.describe()
