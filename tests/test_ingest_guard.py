"""The schema at the door (issue 38, items 1, 4 and 5): Telegraf's ingest guard,
generated from src/sparkscope/store/schema.py, holds what reaches InfluxDB.

Fast: the guard in telegraf.conf is what the schema generates; the writers
(the annotator's Java, Telegraf's own "no end seen" Starlark) write only what
the schema declares. Slow: a throwaway stack (InfluxDB and Telegraf, built as
the native runner builds them), attacked as a stranger on the host would: a
field "status" posted to the events port before a real Spark run; Graphite 1.1
tags and sparkscope's own names on the Graphite port; points dated years ahead.
"""

from __future__ import annotations

import json
import re
import socket
import time
import urllib.request

import pytest

from sparkscope.generate.steps import COMMAND
from sparkscope.store import influx, schema
from sparkscope.process import wait_until
from sparkscope.settings import ROOT
from sparkscope_testkit.sandbox import throwaway_stack

JAVA = ROOT / "annotator" / "src" / "main" / "java" / "dev" / "sparkscope" / "annotator"
POISON = 'sparkscope_application,applicationid=x status="RUNNING",app_name="x",text="x"'


# --- generated, and true to its writers ------------------------------------------------

def test_the_guard_in_telegraf_conf_is_the_one_the_schema_generates():
    from sparkscope import ingest_guard

    conf = ingest_guard.TELEGRAF_CONF.read_text()
    assert ingest_guard.with_block(conf) == conf, f"telegraf/telegraf.conf is stale: run {COMMAND}"
    # A real check: a block that lost a declared field is found stale and rewritten.
    stale = conf.replace('"exit_code": "int"', '"exit_code": "float"', 1)
    assert stale != conf and ingest_guard.with_block(stale) == conf
    assert ingest_guard.main(["--check"]) == 0


def test_every_tag_and_field_the_annotator_writes_is_declared_for_its_measurements():
    """The Java writers name tags and fields only through core/Schema.java's
    constants (tests/test_java_schema.py): each Schema.<Measurement>.<NAME>
    they use is a tag or field declared for that measurement."""
    generated = (JAVA / "core" / "Schema.java").read_text()
    classes = {}
    for name, body in re.findall(r"public static final class (\w+) \{(.*?)\n    }", generated, re.S):
        classes[name] = dict(re.findall(r'public static final String (\w+) = "([^"]*)";', body))
    used = set()
    for source in JAVA.rglob("*.java"):
        if source.name != "Schema.java":
            used |= set(re.findall(r"\bSchema\.([A-Z]\w*)\.([A-Z][A-Z0-9_]*)\b", source.read_text()))
    assert len(used) > 100
    for cls, const in sorted(used):
        if cls == "ExecutorMetric" or const in ("NAME", "PREFIX", "NAMES") or const.startswith("SUFFIX_"):
            continue
        constants = classes[cls]
        measurement = schema.BY_NAME[constants["NAME"]] if "NAME" in constants else next(
            m for m in schema.MEASUREMENTS if m.name.startswith(constants["PREFIX"]))
        value = constants[const]
        assert value in measurement.tags or value in dict(measurement.fields), (cls, const, measurement.name)


def test_names_that_are_both_a_tag_and_a_field_are_known():
    # "status": a tag of the run events, a field of sparkscope_stage_peaks; readers qualify it.
    assert {"status", "executorid", "host"} <= schema.TAG_AND_FIELD_NAMES
    assert "applicationid" in schema.TAGS_ONLY and "app_name" in schema.FIELDS_ONLY


# --- against a real stack ------------------------------------------------------------------

@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    with throwaway_stack(tmp_path_factory.mktemp("guard"), only=("influxdb", "telegraf"),
                        unread_metrics="pass") as settings:  # the filter passing all: the guard alone holds
        yield settings


def admin(settings, statement: str) -> list[dict]:
    return influx.query(settings.influx_admin, statement, settings.database)


def post_events(settings, *lines: str) -> None:
    """As a stranger: no credentials (the events listener asks for none on loopback)."""
    request = urllib.request.Request(f"{settings.events_url}/write?precision=ns", data="\n".join(lines).encode(),
                                     method="POST")
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 204


def send_graphite(settings, text: str) -> None:
    with socket.create_connection((settings.graphite_host, settings.graphite_port), 5) as s:
        s.sendall(text.encode())


def drain(settings) -> None:
    """Until Telegraf wrote everything sent before: its buffer is first in, first out."""
    marker = f"app-drained-{time.time_ns()}"
    send_graphite(settings, f"spark.{marker}.driver.jvm.heap.used 1 {int(time.time())}\n")
    assert wait_until(lambda: admin(settings, f'SELECT count("value") FROM "heap.used" '
                                              f"WHERE \"applicationid\" = '{marker}'"), 30), "Telegraf wrote nothing"


def all_panels(panels: list[dict]):
    for panel in panels:
        yield panel
        yield from all_panels(panel.get("panels", []))


def refused(settings) -> dict[str, int]:
    """The guard's counts per reason, once it reported (every 10 s after a refusal)."""
    series = admin(settings, f'SELECT last("points") FROM "{schema.INGEST_REFUSED_MEASUREMENT}" GROUP BY "refusal"')
    return {s["tags"]["refusal"]: int(s["values"][0][1]) for s in series}


def test_a_status_field_posted_to_the_events_port_hides_no_run_from_top_report_or_the_pickers(guarded, tmp_path):
    from conftest import Stack, run_spark_job
    from sparkscope.provision.annotator_jar import ensure_annotator_jar
    from sparkscope.report.run_facts import RunReader
    from sparkscope.spark.conf import annotator_properties
    from sparkscope.stack.native import NativeBackend
    from sparkscope.top.data import TopReader

    settings = guarded
    post_events(settings, POISON)
    drain(settings)

    jar = ensure_annotator_jar(ROOT, progress=lambda _: None)
    run = run_spark_job(Stack(settings), "metrics_job.py", tmp_path, conf=annotator_properties(settings, jar))
    assert wait_until(lambda: admin(settings, "SELECT \"duration_ms\" FROM \"sparkscope_application\" WHERE "
                                              f"\"applicationid\" = '{run.app_id}' AND \"status\"::tag = 'FINISHED'"),
                      30), "the annotator's end of the run never arrived"
    drain(settings)

    # top: the run is listed, and finished.
    top = TopReader(settings.influx_reader, settings.database)
    runs = {r.app_id: r for r in top.runs()}
    assert run.app_id in runs and runs[run.app_id].ended_ms
    # report: the newest finished run is this one.
    reader = RunReader(settings.influx_reader, settings.database)
    assert reader.latest_app() == run.app_id
    assert run.app_id in {r.app_id for r in reader.finished_runs()}
    # The live dashboard's "Applications" table, where runs are picked: every query of it.
    board = json.loads((ROOT / "dashboards" / "spark-executors.json").read_text())
    panels = [p for p in all_panels(board["panels"]) if p.get("title") == "Applications"]
    assert panels, "the live dashboard has no Applications table"
    listed = set()
    for target in panels[0]["targets"]:
        query = target["query"].replace("$timeFilter", "time > now() - 1h")
        listed |= {row.get("applicationid") for row in influx.rows(
            influx.query(settings.influx_reader, query, settings.database))}
    assert run.app_id in listed

    # The field never reached InfluxDB (deleting it would not have undone it: the key stays).
    fields = admin(settings, 'SHOW FIELD KEYS FROM "sparkscope_application"')
    assert "status" not in {v[0] for s in fields for v in s["values"]}, "the poison's status field was stored"
    # The door counted what it refused: the poison's one key, and nothing of the real run.
    assert wait_until(lambda: refused(settings).get("tag_as_field"), 20), refused(settings)
    assert refused(settings) == {"tag_as_field": 1}, refused(settings)
    telegraf = next(r for r in NativeBackend(settings).status() if r.name == "telegraf")
    assert "1 refused" in telegraf.data and "tag_as_field" in telegraf.detail, (telegraf.data, telegraf.detail)


def test_graphite_lines_make_only_sparks_metrics_without_tags_of_the_senders(guarded):
    settings = guarded
    now = int(time.time())
    send_graphite(settings, "".join(line + "\n" for line in (
        # Graphite 1.1 tags: a forged end of a run, a forged executor loss.
        f"sparkscope_application;applicationid=forged-1;status=FINISHED 1 {now}",
        f"sparkscope_executor;applicationid=forged-1;status=removed;event=removed 1 {now}",
        # A Spark metric with a tag of the sender's choosing.
        f"spark.app-forged-2.driver.jvm.heap.used;colour=red 1 {now}",
        # sparkscope's own names and a host measurement, through the templates.
        f"spark.app-forged-3.driver.jvm.sparkscope_application 1 {now}",
        f"spark.app-forged-3.driver.jvm.cpu 1 {now}",
        # A path too short for the templates: past the unread-metrics filter, any name.
        f"anything.new 1 {now}",
    )))
    drain(settings)
    measurements = {v[0] for s in admin(settings, "SHOW MEASUREMENTS") for v in s["values"]}
    for name in ("sparkscope_application", "sparkscope_executor"):
        assert name not in measurements or not admin(settings, f'SELECT * FROM "{name}" WHERE '
                                                               '"applicationid" =~ /forged/ OR "username" =~ /forged/')
    assert not {m for m in measurements if m.startswith("anything")}, measurements
    assert not admin(settings, "SELECT * FROM \"heap.used\" WHERE \"applicationid\" =~ /forged/")
    assert not admin(settings, "SELECT * FROM \"cpu\" WHERE \"applicationid\" =~ /forged/")
    tag_keys = {v[0] for s in admin(settings, 'SHOW TAG KEYS FROM "heap.used"') for v in s["values"]}
    assert "colour" not in tag_keys and "status" not in tag_keys
    assert wait_until(lambda: {"graphite_tags", "graphite_reserved_name", "graphite_path_short"}
                      <= set(refused(settings)), 20), refused(settings)


def test_points_dated_years_ahead_or_before_the_retention_are_refused_on_both_inputs(guarded):
    settings = guarded
    ahead = [int(time.mktime((year, 6, 1, 0, 0, 0, 0, 0, -1))) for year in (2030, 2033, 2037)]
    send_graphite(settings, "".join(f"spark.app-future.driver.jvm.heap.used 1 {t}\n" for t in ahead))
    long_ago = int(time.time()) - 400 * 86400  # the test stack keeps 7 days
    send_graphite(settings, f"spark.app-old.driver.jvm.heap.used 1 {long_ago}\n")
    post_events(settings, f'sparkscope_application,applicationid=app-future,status=RUNNING app_name="f" '
                          f"{ahead[-1] * 10**9}")
    drain(settings)
    newest_end = max((row["end_time"] for row in influx.rows(admin(settings, "SHOW SHARDS"))
                      if row.get("database") == settings.database), default="")
    limit = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 30 * 86400))
    assert newest_end < limit, f"a shard ends {newest_end}: a point dated years ahead was stored"
    assert not admin(settings, "SELECT * FROM \"heap.used\" WHERE \"applicationid\" =~ /app-future|app-old/")
    assert wait_until(lambda: refused(settings).get("future", 0) >= 4, 20), refused(settings)


def test_influxdb_itself_refuses_points_dated_ahead_on_every_policy_up_makes(guarded):
    # InfluxDB 1.12+ knows FUTURE/PAST LIMIT (1.8 refused the clause): behind the
    # guard, the store holds the same line for whoever writes to it directly.
    assert influx.has_write_limits("1.8.10") is False and influx.has_write_limits(None) is None
    assert influx.has_write_limits(influx.server_version(guarded.influx_url))
    policies = {row["name"]: row for row in influx.rows(admin(guarded, "SHOW RETENTION POLICIES"))}
    for name in ("sparkscope", "sparkscope_1m", "sparkscope_10m", "sparkscope_30m"):
        assert policies[name]["futureWriteLimit"] == "10m0s", policies[name]
    ahead = int(time.time()) + 7 * 86400
    with pytest.raises(influx.InfluxError, match="dropped=1"):
        influx.write(guarded.influx_admin, guarded.database, f"heap.used,applicationid=app-direct value=1 {ahead}")


def test_spark_s_process_tree_zeros_give_way_to_the_sampler_s_sizes(guarded):
    """Spark's process tree off (as shipped), its Graphite gauges read 0 forever; the
    annotator's sampler writes the true sizes under the same names: only those are stored."""
    settings = guarded
    now = int(time.time())
    jvm, python = schema.PROCESS_TREE_JVM_RSS_MEMORY, schema.PROCESS_TREE_PYTHON_RSS_MEMORY
    send_graphite(settings, f"spark.app-tree.1.ExecutorMetrics.{jvm} 0 {now}\n"
                            f"spark.app-tree.1.ExecutorMetrics.{python} 0 {now}\n"
                            f"spark.app-tree-on.1.ExecutorMetrics.{jvm} 300000000 {now}\n")
    post_events(settings, f"{jvm},applicationid=app-tree,executorid=1 value=250000000 {now * 10**9 + 1}",
                f"{python},applicationid=app-tree,executorid=1 value=0 {now * 10**9 + 1}")
    drain(settings)
    for name, expected in ((jvm, [250000000.0]), (python, [0.0])):
        rows = admin(settings, f"SELECT \"value\" FROM \"{name}\" WHERE \"applicationid\" = 'app-tree'")
        assert [v[1] for s in rows for v in s["values"]] == expected, (name, rows)
    # Spark's own on: its sizes are stored as before.
    assert admin(settings, f"SELECT \"value\" FROM \"{jvm}\" WHERE \"applicationid\" = 'app-tree-on'")
    assert not {r for r in refused(settings) if "process" in r}, "zeros are dropped, not counted as refused"
