"""The annotator's Java writers take every measurement, tag and field name
from core/Schema.java, which sparkscope.generate.java_schema renders from
schema.py: the checked-in file is what the generator makes now; no other
Java source spells a measurement name the Java writers write; every
.field( / .tag( call names its key through a Schema constant; and every
measurement schema.py gives the Java writers is written by one of them.
Each check is also shown failing on a broken input."""

from __future__ import annotations

import dataclasses
import re
import types
from pathlib import Path

import pytest

from sparkscope.store import schema
from sparkscope.generate import java_schema

JAVA_MAIN = java_schema.ROOT / "annotator" / "src" / "main" / "java"
SCHEMA_JAVA = java_schema.TARGET

# A key built at run time, with why it is still declared: StreamingQueries
# writes each of Spark's durationMs keys as <key in snake case> +
# Schema.Streaming.SUFFIX_MS, which schema.py declares as a field suffix.
DYNAMIC_KEYS = {("StreamingQueries.java", "durationField(d.getKey())")}


# --- a small Java tokenizer: enough to tell code from comments and literals ---------------

TOKEN = re.compile(r'''
    (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<char>'(?:[^'\\\n]|\\.)+')
  | (?P<word>[A-Za-z_$][\w$]*)
  | (?P<number>\d[\w.]*)
  | (?P<space>\s+)
  | (?P<other>.)
''', re.S | re.X)
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "0": "\0", "'": "'", '"': '"', "\\": "\\"}


def unescape(body: str) -> str:
    return re.sub(r"\\(u+[0-9a-fA-F]{4}|.)",
                  lambda m: chr(int(m.group(1).lstrip("u"), 16)) if m.group(1)[0] == "u" else ESCAPES.get(
                      m.group(1), m.group(1)), body)


def tokens(source: str) -> list[tuple[str, str]]:
    """(kind, text) for every token but whitespace and comments; a string's text is its value."""
    out = []
    for m in TOKEN.finditer(source):
        kind = m.lastgroup
        if kind in ("comment", "space"):
            continue
        text = unescape(m.group()[1:-1]) if kind == "string" else m.group()
        out.append((kind, text))
    return out


def string_literals(source: str) -> list[str]:
    return [text for kind, text in tokens(source) if kind == "string"]


def first_arguments(source: str, methods=("field", "tag", "wholeFloatField")) -> list[list[tuple[str, str]]]:
    """The tokens of the first argument of every .<method>( call, for each call."""
    toks = tokens(source)
    found = []
    for i in range(len(toks) - 2):
        if toks[i] == ("other", ".") and toks[i + 1][0] == "word" and toks[i + 1][1] in methods \
                and toks[i + 2] == ("other", "("):
            depth, arg = 0, []
            for kind, text in toks[i + 3:]:
                if kind == "other" and text in "([{":
                    depth += 1
                elif kind == "other" and text in ")]}":
                    if depth == 0:
                        break
                    depth -= 1
                elif kind == "other" and text == "," and depth == 0:
                    break
                arg.append((kind, text))
            found.append(arg)
    return found


def main_sources(root: Path = JAVA_MAIN) -> dict[str, str]:
    return {str(p): p.read_text() for p in sorted(root.rglob("*.java"))}


# --- the checks as functions, so that each can be shown failing ---------------------------

def java_written_names(s=schema) -> set[str]:
    """What the Java writers write: the ANNOTATOR and PROFILES measurements, and the task totals' prefix."""
    return {m.name for m in java_schema.written(s)} | {s.TASK_TOTALS_PREFIX}


def literal_measurement_problems(sources: dict[str, str]) -> list[str]:
    """Measurement names spelt in Java outside Schema.java. Only the names the Java
    writers write (and any sparkscope_ literal, a new one not yet declared): a
    profiler mode "cpu" is not Telegraf's cpu measurement."""
    names = java_written_names()
    return [f"{Path(path).name}: \"{lit}\"" for path, text in sources.items() if Path(path).name != "Schema.java"
            for lit in string_literals(text) if lit in names or lit.startswith("sparkscope_")]


def key_problems(sources: dict[str, str]) -> list[str]:
    """Every .field( / .tag( names its key through Schema, never a literal."""
    problems = []
    for path, text in sources.items():
        name = Path(path).name
        for arg in first_arguments(text):
            expression = "".join(t for _, t in arg)
            if any(kind == "string" for kind, _ in arg):
                problems.append(f"{name}: a literal key in .field/.tag({expression}, ...)")
            elif not expression.startswith("Schema.") and (name, expression) not in DYNAMIC_KEYS:
                problems.append(f"{name}: key {expression} is not a Schema constant")
    return problems


def unwritten_problems(sources: dict[str, str], generated: str) -> list[str]:
    """Every measurement class of Schema.java is used by some other Java source."""
    others = "\n".join(text for path, text in sources.items() if Path(path).name != "Schema.java")
    classes = re.findall(r"public static final class (\w+) \{\s*(?:/\*\*[^*]*\*/\s*)?public static final String "
                         r"(NAME|PREFIX) =", generated)
    return [f"Schema.{cls}: declared for the Java writers, written by none" for cls, _ in classes
            if not re.search(rf"\bSchema\.{cls}\.", others)]


# --- (a) the generated file ---------------------------------------------------------------

def test_the_checked_in_schema_java_is_what_the_generator_makes():
    assert SCHEMA_JAVA.read_text() == java_schema.render(), f"stale: run {java_schema.COMMAND}"
    assert java_schema.main(["--check"]) == 0


def test_a_changed_schema_makes_the_check_fail_with_the_command_to_run(monkeypatch, capsys):
    stage = schema.BY_NAME["sparkscope_stage"]
    changed = dataclasses.replace(stage, fields=stage.fields + (("task_p99_ms", schema.INTEGER),))
    fake = types.SimpleNamespace(**{k: v for k, v in vars(schema).items() if not k.startswith("__")})
    fake.MEASUREMENTS = tuple(changed if m is stage else m for m in schema.MEASUREMENTS)
    monkeypatch.setattr(java_schema, "schema", fake)
    assert 'TASK_P99_MS = "task_p99_ms"' in java_schema.render()
    assert java_schema.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "+        public static final String TASK_P99_MS" in err and java_schema.COMMAND in err


def test_generated_names_are_derived_deterministically():
    assert java_schema.class_name("sparkscope_stage_executor_peaks") == "StageExecutorPeaks"
    assert java_schema.constant_name("task_p95_ms") == "TASK_P95_MS"
    assert java_schema.constant_name("ProcessTreeJVMRSSMemory") == "PROCESS_TREE_JVMRSS_MEMORY"
    assert java_schema.constant_name("spark.executor.memoryOverhead") == "SPARK_EXECUTOR_MEMORY_OVERHEAD"
    text = java_schema.render()
    assert 'public static final class Stage {' in text and 'NAME = "sparkscope_stage";' in text
    # sparkscope_stage's field "name" is not its NAME.
    assert 'NAME_FIELD = "name";' in text
    with pytest.raises(ValueError):
        java_schema.class_name("block_latency")  # a Java-written measurement is a sparkscope_ one


# --- (b) no measurement name spelt outside Schema.java --------------------------------------

def test_no_java_source_but_schema_java_spells_a_measurement_name():
    sources = main_sources()
    assert len(sources) > 30 and any(Path(p).name == "Schema.java" for p in sources)
    assert literal_measurement_problems(sources) == []


def test_the_literal_check_fails_on_a_measurement_name_in_a_java_source():
    source = ('class New {\n'
              '    // "sparkscope_stage" in a comment is fine, and so is a character: \'"\'\n'
              '    static final String M = "sparkscope_stage";\n'
              '    String n = "sparkscope_\\u0061pp.";\n'  # an escape in the literal still spells the prefix
              '    String t = "sparkscope_threads_of_mine";\n'
              '}\n')
    assert literal_measurement_problems({"New.java": source}) == [
        'New.java: "sparkscope_stage"', 'New.java: "sparkscope_app."', 'New.java: "sparkscope_threads_of_mine"']


def test_the_tokenizer_tells_code_from_comments_and_literals():
    toks = tokens('a /* "x" */ b("y\\"z", \'"\'); // "w"\n')
    assert ("string", 'y"z') in toks and ("string", "x") not in toks and ("string", "w") not in toks
    assert ("char", "'\"'") in toks


# --- (c) field and tag keys through Schema ----------------------------------------------------

def test_every_field_and_tag_key_in_the_java_writers_is_a_schema_constant():
    sources = main_sources()
    calls = sum(len(first_arguments(text)) for text in sources.values())
    assert calls > 100  # the scan sees the writers' calls at all
    assert key_problems(sources) == []


def test_the_key_check_fails_on_a_literal_and_on_a_key_from_elsewhere():
    source = ('class W { Point p() { return Point.measurement(Schema.Stage.NAME)\n'
              '    .tag(Schema.APPLICATION, app).field("task_p95_ms", 1L)\n'
              '    .field(Schema.Stage.TEXT, f("x", 2)).field(myKey, 3L)\n'
              '    .field(("task_" + "max_ms"), 4L); } }\n')
    assert key_problems({"W.java": source}) == [
        'W.java: a literal key in .field/.tag(task_p95_ms, ...)',
        "W.java: key myKey is not a Schema constant",
        'W.java: a literal key in .field/.tag((task_+max_ms), ...)']


# --- every declared Java measurement is written ---------------------------------------------

def test_every_measurement_schema_gives_the_java_writers_is_written_by_one():
    assert unwritten_problems(main_sources(), SCHEMA_JAVA.read_text()) == []


def test_the_unwritten_check_fails_when_no_writer_uses_a_measurement():
    sources = main_sources()
    container = next(p for p, text in sources.items() if "Schema.Container." in text and "Schema.java" not in p)
    without = dict(sources, **{container: sources[container].replace("Schema.Container.", "Other.")})
    assert unwritten_problems(without, SCHEMA_JAVA.read_text()) == [
        "Schema.Container: declared for the Java writers, written by none"]
