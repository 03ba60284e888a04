"""Renders the annotator's Java constants from schema.py: every measurement the
Java writers write (writer ANNOTATOR or PROFILES) as a nested class with its
NAME, its tag names and its field names, plus the shared tag names and the
lists the writers iterate (EXECUTOR_METRICS, MEMORY_SETTINGS,
TASK_TIME_COUNTERS). The Java writers take every measurement, tag and field
name from that file, so a name changed here reaches them through the
compiler, not through a reader finding None.

    python -m sparkscope.generate.java_schema           # writes Schema.java
    python -m sparkscope.generate.java_schema --check   # exit 1 when it is stale
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from pathlib import Path

from sparkscope.store import schema

ROOT = Path(__file__).resolve().parents[3]
TARGET = ROOT / "annotator" / "src" / "main" / "java" / "dev" / "sparkscope" / "annotator" / "core" / "Schema.java"
COMMAND = ".venv/bin/python -m sparkscope.generate"
WRITERS = (schema.ANNOTATOR, schema.PROFILES)
MEASUREMENT_PREFIX = "sparkscope_"
TASK_TOTALS_CLASS = "TaskTotals"


def constant_name(name: str) -> str:
    """task_p95_ms -> TASK_P95_MS, JVMHeapMemory -> JVM_HEAP_MEMORY, spark.executor.memory -> SPARK_EXECUTOR_MEMORY."""
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name)
    ident = re.sub(r"[^A-Za-z0-9]+", "_", words).strip("_").upper()
    if not re.fullmatch(r"[A-Z][A-Z0-9_]*", ident):
        raise ValueError(f"{name!r} gives no Java constant name ({ident!r})")
    return ident


def class_name(measurement: str) -> str:
    """sparkscope_stage_executor_peaks -> StageExecutorPeaks; a Spark metric the
    annotator also writes keeps its name (ProcessTreeJVMRSSMemory)."""
    if re.fullmatch(r"[A-Z][A-Za-z0-9]*", measurement):
        return measurement
    if not measurement.startswith(MEASUREMENT_PREFIX):
        raise ValueError(f"{measurement}: a Java-written measurement must start with {MEASUREMENT_PREFIX}")
    parts = re.split(r"[_.]+", measurement[len(MEASUREMENT_PREFIX):])
    return "".join(p[:1].upper() + p[1:] for p in parts if p)


def java_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def java_list(values) -> str:
    items = ",\n".join(f"            {java_string(v)}" for v in values)
    return f"Collections.unmodifiableList(Arrays.asList(\n{items}))"


class _Class:
    """One nested class: its constants in order, each name to one value."""

    def __init__(self, name: str, doc: list[str]):
        self.name = name
        self.doc = doc
        self.constants: dict[str, tuple[str, str]] = {}  # java name -> (value, comment)

    def add(self, java: str, value: str, comment: str) -> None:
        if java in self.constants and self.constants[java][0] != value:
            raise ValueError(f"{self.name}.{java} would name both {self.constants[java][0]!r} and {value!r}")
        self.constants.setdefault(java, (value, comment))


# Lists the Java writers iterate: a measurement whose fields include one whole
# list is rendered with a note instead of one constant per element.
def _shared_lists(s) -> dict[str, tuple[str, ...]]:
    return {"EXECUTOR_METRICS": tuple(s.EXECUTOR_METRICS), "MEMORY_SETTINGS": tuple(s.MEMORY_SETTINGS)}


# The class's own constants: a tag or field that would be named so gets _TAG or _FIELD
# (sparkscope_stage's field "name" is Schema.Stage.NAME_FIELD, its NAME the measurement).
RESERVED = ("NAME", "PREFIX", "NAMES")


def _member(name: str, kind: str) -> str:
    java = constant_name(name)
    return f"{java}_{kind}" if java in RESERVED else java


def _measurement_class(m, name: str, extra_doc: list[str], lists: dict[str, tuple[str, ...]]) -> _Class:
    fields = dict(m.fields)
    doc = [f"{m.name}: {m.kind}, written by the {m.writer} writer"
           + (f" (also by {', '.join(m.also_written_by)})" if m.also_written_by else "") + ".", *extra_doc]
    for list_name, values in lists.items():
        if values and all(v in fields for v in values):
            for v in values:
                del fields[v]
            doc.append(f"Also an integer field for each of {{@link Schema#{list_name}}}.")
    c = _Class(name, doc)
    for tag in m.tags:
        c.add(_member(tag, "TAG"), tag, "tag")
    for field, kind in fields.items():
        c.add(_member(field, "FIELD"), field, f"{kind} field")
    for suffix, kind in m.field_suffixes:
        c.add("SUFFIX_" + constant_name(suffix), suffix,
              f"{kind} fields: any name ending so")
    return c


def written(s) -> list:
    """The measurements the Java writers write: their own, and Spark's they also write."""
    return [m for m in s.MEASUREMENTS if m.writer in WRITERS or set(m.also_written_by) & set(WRITERS)]


def classes(s=None) -> list[_Class]:
    s = s or schema
    ours = written(s)
    totals = [m for m in ours if m.name.startswith(s.TASK_TOTALS_PREFIX)]
    lists = _shared_lists(s)
    out = []
    for m in ours:
        if m in totals:
            continue
        c = _measurement_class(m, class_name(m.name), [], lists)
        c.constants = {"NAME": (m.name, "the measurement"), **c.constants}
        out.append(c)
    if totals:
        shapes = {(m.tags, m.fields, m.kind) for m in totals}
        if len(shapes) != 1:
            raise ValueError("the task time totals must share tags, fields and kind: one Java class holds them")
        c = _measurement_class(totals[0], TASK_TOTALS_CLASS,
                               ["One measurement per counter: PREFIX + each of {@link Schema#TASK_TIME_COUNTERS},"
                                " in that order (NAMES)."], lists)
        c.doc[0] = f"{s.TASK_TOTALS_PREFIX}<counter>: {totals[0].kind}, written by the {totals[0].writer} writer."
        c.constants = {"PREFIX": (s.TASK_TOTALS_PREFIX, "each measurement's name starts so"), **c.constants}
        out.append(c)
    names = [c.name for c in out]
    if len(set(names)) != len(names):
        raise ValueError(f"two measurements give one Java class name: {names}")
    return out


def render(s=None) -> str:
    """The Java source for schema module s (sparkscope.store.schema by default)."""
    s = s or schema
    lists = _shared_lists(s)
    totals = [m.name for m in s.MEASUREMENTS if m.writer in WRITERS and m.name.startswith(s.TASK_TOTALS_PREFIX)]
    out = [
        f"// Generated by `{COMMAND}` from src/sparkscope/store/schema.py: do not edit.",
        "// Change schema.py and run that command; tests/test_java_schema.py fails while this file is stale.",
        "package dev.sparkscope.annotator.core;",
        "",
        "import java.util.Arrays;",
        "import java.util.Collections;",
        "import java.util.List;",
        "",
        "/**",
        " * Every measurement, tag and field name the annotator's writers write, as",
        " * schema.py declares them: the Java sources spell no such name themselves.",
        " */",
        "public final class Schema {",
        "",
        "    private Schema() {",
        "    }",
        "",
        "    /** Tag names most measurements carry. */",
        f"    public static final String APPLICATION = {java_string(s.APPLICATION)};",
        f"    public static final String EXECUTOR = {java_string(s.EXECUTOR)};",
        f"    public static final String STATUS = {java_string(s.STATUS)};",
        "",
        "    /** Spark's ExecutorMetricType names (and TaskPeakExecutionMemory), written as integer fields. */",
        f"    public static final List<String> EXECUTOR_METRICS = {java_list(lists['EXECUTOR_METRICS'])};",
        "",
        "    /** The Spark settings written, as given, to the memory settings measurement. */",
        f"    public static final List<String> MEMORY_SETTINGS = {java_list(lists['MEMORY_SETTINGS'])};",
        "",
        "    /** The executors' task time counters the application totals keep, in this order. */",
        f"    public static final List<String> TASK_TIME_COUNTERS = {java_list(s.TASK_TIME_COUNTERS)};",
    ]
    out += ["", "    /** Each of EXECUTOR_METRICS by name, for the writers that pick one out (the heap, the RSS). */",
            "    public static final class ExecutorMetric {", ""]
    for metric in lists["EXECUTOR_METRICS"]:
        out.append(f"        public static final String {constant_name(metric)} = {java_string(metric)};")
    out += ["", "        private ExecutorMetric() {", "        }", "    }"]
    for c in classes(s):
        out += ["", "    /**"] + [f"     * {line}" for line in c.doc] + ["     */",
                                                                         f"    public static final class {c.name} {{", ""]
        for java, (value, comment) in c.constants.items():
            out.append(f"        /** {comment} */")
            out.append(f"        public static final String {java} = {java_string(value)};")
        if c.name == TASK_TOTALS_CLASS:
            out.append("        /** every measurement, in the order of TASK_TIME_COUNTERS */")
            out.append(f"        public static final List<String> NAMES = {java_list(totals)};")
        out += ["", f"        private {c.name}() {{", "        }", "    }"]
    out += ["}", ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the checked-in file differs, write nothing")
    args = parser.parse_args(argv)
    text = render()
    current = TARGET.read_text() if TARGET.exists() else ""
    if args.check:
        if current == text:
            return 0
        diff = list(difflib.unified_diff(current.splitlines(), text.splitlines(), str(TARGET), "generated",
                                         lineterm="", n=1))
        print("\n".join(diff[:40]), file=sys.stderr)
        print(f"{TARGET.relative_to(ROOT)} is stale: run {COMMAND}", file=sys.stderr)
        return 1
    TARGET.write_text(text)
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
