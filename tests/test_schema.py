"""The stored schema has one home, src/sparkscope/schema.py, and what is not
Python is checked against it: every measurement a reader names (the Python
sources, the generated dashboards, the alert rules) is declared there; the
Telegraf filter stores exactly the Spark metrics it declares as read; the
events listener admits every measurement our own writers send and none of
Spark's. The annotator's Java writers take their names from a file generated
from schema.py (tests/test_java_schema.py checks it and them). Each check is
also shown failing on a broken input."""

from __future__ import annotations

import fnmatch
import importlib
import json
import re
from pathlib import Path

import pytest

from sparkscope import schema
from sparkscope.settings import ROOT

SRC = ROOT / "src" / "sparkscope"
TELEGRAF_CONF = ROOT / "telegraf" / "telegraf.conf"
# FROM, an optional "policy"., then a quoted measurement: a literal, or one
# f-string field ({NAME} or {module.NAME}) resolved from the module.
FROM = re.compile(r'\bFROM\s+(?:"[^"]+"\.)?"((?:[^"\\{}]|\\.)+|\{[A-Za-z_][A-Za-z_.]*\})"')


def named_in(text: str, resolve=lambda name: name) -> set[str]:
    """The measurements the FROM clauses of a text name."""
    found = set()
    for name in FROM.findall(text):
        if name.startswith("{"):
            name = resolve(name[1:-1])
            if name is None:
                continue
        # A Grafana variable names a policy or a lookup, never a measurement; <...> is a docstring's placeholder.
        if "$" not in name and "<" not in name:
            found.add(name.replace('\\"', '"'))
    return found


def module_resolver(path: Path):
    module = importlib.import_module(".".join(("sparkscope", *path.relative_to(SRC).with_suffix("").parts))
                                     .removesuffix(".__init__"))

    def resolve(expression: str):
        value = module
        for part in expression.split("."):
            value = getattr(value, part, None)
        return value if isinstance(value, str) else None
    return resolve


def strings_of(node, out: list[str]) -> list[str]:
    if isinstance(node, dict):
        for value in node.values():
            strings_of(value, out)
    elif isinstance(node, list):
        for item in node:
            strings_of(item, out)
    elif isinstance(node, str):
        out.append(node)
    return out


def undeclared(names: set[str]) -> set[str]:
    return {name for name in names if name not in schema.BY_NAME}


def filter_problems(conf: str) -> list[str]:
    """The filter's "pass" rule against schema.SPARK_READ: every declared Spark
    metric matches a pattern, every pattern matches a declared one."""
    rule = re.search(r'\[\[processors\.filter\.rule\]\]\s*name\s*=\s*\[(.*?)\]\s*action\s*=\s*"pass"', conf, re.S)
    if not rule:
        return ["telegraf.conf has no filter rule that passes a list of names"]
    patterns = re.findall(r'"([^"]+)"', rule.group(1))
    problems = [f"{name}: read, but the filter drops it" for name in schema.SPARK_READ
                if not any(fnmatch.fnmatchcase(name, p) for p in patterns)]
    problems += [f"{p}: passed by the filter, but declared read by nothing" for p in patterns
                 if not any(fnmatch.fnmatchcase(name, p) for name in schema.SPARK_READ)]
    return problems


def listener_problems(conf: str) -> list[str]:
    listener = re.search(r'\[\[inputs\.influxdb_listener\]\](.*?)\n\[\[', conf, re.S)
    if not listener:
        return ["telegraf.conf has no events listener"]
    namepass = re.search(r'namepass\s*=\s*\[(.*?)\]', listener.group(1), re.S)
    patterns = re.findall(r'"([^"]+)"', namepass.group(1)) if namepass else ["*"]

    def admitted(name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, p) for p in patterns)
    ours = [m.name for m in schema.MEASUREMENTS
            if m.writer in (schema.ANNOTATOR, schema.PROFILES, schema.BLOCK_PROBE, schema.THREAD_SAMPLER)]
    return ([f"{name}: sent by our writers, refused by the events listener" for name in ours if not admitted(name)]
            + [f"{name}: Spark's, yet admitted by the events listener" for name in schema.names(schema.SPARK)
               if admitted(name)])



# --- the checks -------------------------------------------------------------------------------

def test_every_measurement_a_python_reader_names_is_declared():
    found: dict[str, set[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        if path.name == "__main__.py" or path.name == "schema.py":
            continue
        text = path.read_text()
        if "FROM" in text:
            for name in undeclared(named_in(text, module_resolver(path))):
                found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    assert not found, found


def test_every_measurement_the_dashboards_and_alert_rules_read_is_declared():
    texts = []
    for path in sorted((ROOT / "dashboards").glob("*.json")):
        texts += strings_of(json.loads(path.read_text()), [])
    texts.append((ROOT / "grafana" / "provisioning" / "alerting" / "sparkscope-rules.yaml").read_text())
    names = set().union(*(named_in(t) for t in texts))
    assert len(names) > 40, names  # the scan sees the dashboards' queries at all
    assert not undeclared(names)


def test_a_reader_naming_an_undeclared_measurement_is_found():
    text = ('q = f\'SELECT max("value") FROM "$rp"."JVMHeapMemory" WHERE x\'\n'
            'r = \'SELECT last("v") FROM "sparkscope_invented" WHERE y\'\n'
            's = f\'SELECT * FROM "{NAME}"\'\n')
    assert undeclared(named_in(text, {"NAME": "another_invented"}.get)) == {"sparkscope_invented", "another_invented"}


def test_the_telegraf_filter_stores_exactly_the_spark_metrics_declared_read():
    assert filter_problems(TELEGRAF_CONF.read_text()) == []


def test_the_filter_check_fails_on_a_dropped_name_and_on_a_stale_one():
    conf = TELEGRAF_CONF.read_text()
    assert conf.count('"MajorGCTime",') == 1
    dropped = filter_problems(conf.replace('"MajorGCTime",', "", 1))
    assert dropped == ["MajorGCTime: read, but the filter drops it"]
    stale = filter_problems(conf.replace('"MajorGCTime",', '"MajorGCTime", "executor.forgotten",', 1))
    assert stale == ["executor.forgotten: passed by the filter, but declared read by nothing"]


def test_the_events_listener_admits_our_writers_and_none_of_sparks_metrics():
    assert listener_problems(TELEGRAF_CONF.read_text()) == []


def test_the_listener_check_fails_on_a_refused_writer_and_an_admitted_spark_metric():
    conf = TELEGRAF_CONF.read_text()
    refused = listener_problems(conf.replace('"block_outlier_dropped"', '"block_outlier_lost"', 1))
    assert refused == ["block_outlier_dropped: sent by our writers, refused by the events listener"]
    opened = listener_problems(conf.replace('namepass = ["sparkscope_*",', 'namepass = ["sparkscope_*", "JVM*",', 1))
    assert opened == ["JVMHeapMemory: Spark's, yet admitted by the events listener"]


@pytest.mark.parametrize("module, names", [
    ("sparkscope.blockprobe.probe", ("BLOCK_LATENCY", "BLOCK_LATENCY_HIST", "BLOCK_OUTLIER", "BLOCK_OUTLIER_DROPPED")),
    ("sparkscope.threadprobe.periods", ("THREADS_MEASUREMENT", "THREAD_WAITS_MEASUREMENT")),
    ("sparkscope.threadprobe.sampler", ("THREAD_SAMPLER_MEASUREMENT",)),
    ("sparkscope.profiles.store", ("FLAME_MEASUREMENT", "PROFILES_MEASUREMENT")),
])
def test_the_python_writers_write_the_names_schema_declares(module, names):
    """The probes and the profile store take their names from schema.py: no
    literal of a measurement they write stands in their source."""
    path = SRC.joinpath(*module.split(".")[1:]).with_suffix(".py")
    text = path.read_text()
    for name in names:
        assert name in text, (module, name)
        literal = getattr(schema, name)
        assert f'"{literal}' not in text and f"'{literal}" not in text, (module, literal)
