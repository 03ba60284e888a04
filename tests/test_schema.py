"""The stored schema has one home, src/sparkscope/store/schema.py, and what is not
Python is checked against it: no product module outside store/ spells a
measurement name (each takes it from the schema's constants), and every
measurement a reader names (the Python sources, the generated dashboards, the
alert rules) is declared there; the Telegraf filter stores exactly the Spark
metrics it declares as read; the events listener admits every measurement our
own writers send and none of Spark's. The annotator's Java writers take their
names from a file generated from schema.py (tests/test_java_schema.py checks
it and them). Each check is also shown failing on a broken input."""

from __future__ import annotations

import ast
import fnmatch
import importlib.util
import json
import re
from pathlib import Path

import pytest

from sparkscope.store import schema
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



def load_module(path: Path):
    """The module of a source file: imported by its dotted name under src/sparkscope/, else loaded from the file."""
    if path.is_relative_to(SRC):
        return importlib.import_module(".".join(("sparkscope", *path.relative_to(SRC).with_suffix("").parts))
                                       .removesuffix(".__init__"))
    spec = importlib.util.spec_from_file_location(f"scanned_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _resolved(expression: ast.expr, module) -> str | None:
    """An f-string field's value, when it is a module-level name (NAME or module.NAME) holding a string."""
    parts = []
    while isinstance(expression, ast.Attribute):
        parts.insert(0, expression.attr)
        expression = expression.value
    if not isinstance(expression, ast.Name):
        return None
    value = module
    for part in (expression.id, *parts):
        value = getattr(value, part, None)
    return value if isinstance(value, str) else None


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def spelled(text: str) -> list[str]:
    """The declared measurement names a string spells: all of it, or quoted as an InfluxQL identifier."""
    if text in schema.BY_NAME:
        return [text]
    return sorted(n for n in schema.BY_NAME if f'"{n}"' in text or f"'{n}'" in text)


def scan(path: Path) -> list[tuple[int, str, str]]:
    """(line, kind, name) of every measurement name a module's strings spell
    ("spelled": a declared name, which must come from the schema's constant) or
    read from ("undeclared": a FROM clause's measurement the schema does not
    declare, its f-string fields resolved from the module). Docstrings and
    comments are not code and are skipped."""
    tree = ast.parse(path.read_text())
    skip = _docstrings(tree)
    module = None
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = [v for v in node.values if isinstance(v, ast.Constant)]
            skip.update(id(v) for v in parts)
            found += [(node.lineno, "spelled", n) for v in parts for n in spelled(v.value)]
            if "FROM" in "".join(v.value for v in parts):
                module = module or load_module(path)
                rendered = "".join(v.value if isinstance(v, ast.Constant) else _resolved(v.value, module) or "{?}"
                                   for v in node.values)
                found += [(node.lineno, "undeclared", n) for n in undeclared(named_in(rendered))]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            found += [(node.lineno, "spelled", n) for n in spelled(node.value)]
            found += [(node.lineno, "undeclared", n) for n in undeclared(named_in(node.value))]
    return sorted(set(found))


def product_modules() -> list[Path]:
    """Every module of the product but the schema's own package."""
    return [p for p in sorted(SRC.rglob("*.py")) if not p.relative_to(SRC).as_posix().startswith("store/")]


def scan_problems(paths: list[Path], allowed: set[str] = frozenset()) -> list[str]:
    """file:line of each spelled name (but in an allowed file) and of each undeclared one (anywhere)."""
    problems = []
    for path in paths:
        rel = path.relative_to(SRC).as_posix() if path.is_relative_to(SRC) else str(path)
        for line, kind, name in scan(path):
            if kind == "undeclared":
                problems.append(f"{rel}:{line}: reads {name}, which src/sparkscope/store/schema.py does not declare")
            elif rel not in allowed:
                problems.append(f"{rel}:{line}: spells {name}; use the constant of src/sparkscope/store/schema.py")
    return problems


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
    ours = [m.name for m in schema.EVENTS_MEASUREMENTS]
    return ([f"{name}: sent by our writers, refused by the events listener" for name in ours if not admitted(name)]
            + [f"{name}: Spark's, yet admitted by the events listener" for name in schema.names(schema.SPARK)
               if admitted(name) and name not in ours])



# --- the checks -------------------------------------------------------------------------------

def test_no_product_module_outside_the_store_spells_a_measurement_name():
    modules = product_modules()
    assert len(modules) > 50 and SRC / "dashboards" / "live.py" in modules
    assert scan_problems(modules) == []


def test_the_scan_finds_a_spelled_and_an_undeclared_measurement_and_skips_docstrings(tmp_path):
    module = tmp_path / "reader.py"
    module.write_text(
        '"""Reads "JVMHeapMemory" (a docstring: not code)."""\n'
        "from sparkscope.store.schema import STAGE_MEASUREMENT\n"
        "TYPO = 'sparkscope_stages'\n"
        "HEAP = 'JVMHeapMemory'\n"  # line 4: the name whole
        "q = f'SELECT max(\"value\") FROM \"$rp\".\"heap.max\" WHERE x'\n"  # 5: quoted in an f-string
        "r = ('SELECT last(\"v\") FROM '\n"
        "     '\"sparkscope_invented\" WHERE y')\n"  # 6: undeclared, over two literals
        "s = f'SELECT * FROM \"{TYPO}\"'\n"  # 8: undeclared, through a module constant
        "t = f'SELECT * FROM \"{STAGE_MEASUREMENT}\" WHERE \"straggler\" = 1'\n"  # 9: the right way
        "# FROM \"sparkscope_application\": a comment, not code\n")
    assert scan_problems([module]) == [
        f"{module}:4: spells JVMHeapMemory; use the constant of src/sparkscope/store/schema.py",
        f"{module}:5: spells heap.max; use the constant of src/sparkscope/store/schema.py",
        f"{module}:6: reads sparkscope_invented, which src/sparkscope/store/schema.py does not declare",
        f"{module}:8: reads sparkscope_stages, which src/sparkscope/store/schema.py does not declare",
    ]
    assert scan_problems([module], {str(module)}) == [
        f"{module}:6: reads sparkscope_invented, which src/sparkscope/store/schema.py does not declare",
        f"{module}:8: reads sparkscope_stages, which src/sparkscope/store/schema.py does not declare",
    ]


def test_every_measurement_the_dashboards_and_alert_rules_read_is_declared():
    texts = []
    for path in sorted((ROOT / "dashboards").glob("*.json")):
        texts += strings_of(json.loads(path.read_text()), [])
    texts.append((ROOT / "grafana" / "provisioning" / "alerting" / "sparkscope-rules.yaml").read_text())
    names = set().union(*(named_in(t) for t in texts))
    assert len(names) > 40, names  # the scan sees the dashboards' queries at all
    assert not undeclared(names)


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
    ("sparkscope.probes.blockprobe.probe", ("BLOCK_LATENCY", "BLOCK_LATENCY_HIST", "BLOCK_OUTLIER", "BLOCK_OUTLIER_DROPPED")),
    ("sparkscope.probes.threadprobe.periods", ("THREADS_MEASUREMENT", "THREAD_WAITS_MEASUREMENT")),
    ("sparkscope.probes.threadprobe.sampler", ("THREAD_SAMPLER_MEASUREMENT",)),
    ("sparkscope.store.profiles", ("FLAME_MEASUREMENT", "PROFILES_MEASUREMENT")),
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


def source_problems(recorded: list[str], sources: dict[str, tuple[str, ...]]) -> list[str]:
    """Each read name placed in one source, and, where a real application sent it,
    sent under that source (the namespace of <prefix>.<app>.<executor>.<source>.<name>)."""
    placed: dict[str, list[str]] = {}
    for source, names in sources.items():
        for name in names:
            placed.setdefault(name, []).append(source)
    problems = [f"{name}: read, in no source" for name in schema.SPARK_READ if name not in placed]
    problems += [f"{name}: in {' and '.join(where)}" for name, where in placed.items() if len(where) > 1]
    sent_under: dict[str, set[str]] = {}
    for path in recorded:
        parts = path.split(".", 4)
        if len(parts) == 5:
            sent_under.setdefault(parts[4], set()).add(parts[3])
    for name, where in placed.items():
        if name in sent_under and where[0] not in sent_under[name]:
            problems.append(f"{name}: declared from {where[0]}, sent from {', '.join(sorted(sent_under[name]))}")
    return problems


def test_each_read_name_comes_from_the_source_spark_sends_it_under():
    recorded = (Path(__file__).parent / "data" / "spark-3.5.9-metric-names.txt").read_text().split()
    assert source_problems(recorded, schema.SPARK_SOURCES) == []
    # The check is not a formality: a name declared under the wrong source, or in none, is found.
    moved = {**schema.SPARK_SOURCES, "jvm": (*schema.SPARK_SOURCES["jvm"], schema.JVM_HEAP_MEMORY)}
    assert source_problems(recorded, moved) == ["JVMHeapMemory: in ExecutorMetrics and jvm"]
    wrong = {k: v for k, v in schema.SPARK_SOURCES.items() if k != "JVMCPU"}
    wrong["executor"] = (*wrong["executor"], schema.JVM_CPU_TIME)
    assert source_problems(recorded, wrong) == ["jvmCpuTime: declared from executor, sent from JVMCPU"]
    assert set(schema.SINK_WHOLE_SOURCES) <= set(schema.SPARK_SOURCES)
