"""The annotator jar's layers point one way (the Java twin of test_layers): the
root package holds the entry points users name and may use everything; each
product package (events, memory, streaming, container, profiler) uses the core
and itself only, never another product nor the entry points; the core uses no
product. Read from the main sources' package and import declarations and
from fully qualified dev.sparkscope.annotator.X. references in their code."""

from __future__ import annotations

import re
from pathlib import Path

from sparkscope.settings import ROOT

JAVA_MAIN = ROOT / "annotator" / "src" / "main" / "java"
BASE = "dev.sparkscope.annotator"
ROOT_PACKAGE = "(root)"
CORE = "core"
FEATURES = ("events", "memory", "streaming", "container", "proctree", "profiler")

PACKAGE = re.compile(r"^\s*package\s+([\w.]+)\s*;", re.M)
IMPORT = re.compile(r"^\s*import\s+(?:static\s+)?([\w.]+(?:\.\*)?)\s*;", re.M)
QUALIFIED = re.compile(r"(?<![\w.])" + re.escape(BASE) + r"((?:\.\w+)+)")
COMMENTS_AND_STRINGS = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)+\'', re.S)


def layer(name: str) -> str | None:
    """dev.sparkscope.annotator.events.StageStats -> events; dev.sparkscope.annotator.AnnotatorListener
    -> (root); anything outside the jar's packages -> None."""
    if name != BASE and not name.startswith(BASE + "."):
        return None
    rest = name[len(BASE) + 1:].split(".") if name != BASE else []
    # A lower-case first segment is a subpackage; an upper-case one a class of the root package.
    return rest[0] if rest and rest[0][:1].islower() else ROOT_PACKAGE


def references(root: Path) -> list[tuple[str, str, str]]:
    """(file, its layer, the layer it references) for every reference to another layer."""
    found = []
    for path in sorted(root.rglob("*.java")):
        text = path.read_text()
        declared = PACKAGE.search(text)
        here = layer(declared.group(1)) if declared else None
        if here is None:
            continue
        names = IMPORT.findall(text)
        code = COMMENTS_AND_STRINGS.sub(" ", IMPORT.sub(" ", PACKAGE.sub(" ", text)))
        names += [BASE + m for m in QUALIFIED.findall(code)]
        for name in names:
            there = layer(name)
            if there is not None and there != here:
                found.append((str(path.relative_to(root)), here, there))
    return found


def problems(root: Path) -> list[str]:
    out = []
    for file, here, there in references(root):
        known = {ROOT_PACKAGE, CORE, *FEATURES}
        if here not in known or there not in known:
            out.append(f"{file}: package {here if here not in known else there} is neither the core nor a declared "
                       f"product: add it to FEATURES or fold it into one")
        elif here == CORE:
            out.append(f"{file}: the core uses {there}")
        elif here in FEATURES and there != CORE:
            out.append(f"{file}: product {here} uses {there}; products use the core only")
    return sorted(set(out))


def packages(root: Path) -> set[str]:
    return {layer(m.group(1)) for p in root.rglob("*.java") if (m := PACKAGE.search(p.read_text()))} - {None}


def test_each_product_package_uses_the_core_only_and_the_core_no_product():
    assert {ROOT_PACKAGE, CORE, *FEATURES} == packages(JAVA_MAIN)
    assert len(FEATURES) >= 4
    edges = references(JAVA_MAIN)
    # The scan sees the edges at all: the entry points reach into the products.
    assert any(here == ROOT_PACKAGE and there == "events" for _, here, there in edges)
    assert any(here == "profiler" and there == CORE for _, here, there in edges)
    assert problems(JAVA_MAIN) == []


def write(root: Path, package: str, name: str, body: str) -> None:
    path = root.joinpath(*package.split("."), f"{name}.java")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"package {package};\n\n{body}\n")


def test_the_check_fails_on_a_product_using_another_or_the_entry_points_and_on_the_core_using_a_product(tmp_path):
    write(tmp_path, BASE, "AnnotatorListener",
          f"import {BASE}.events.AnnotationRecorder;\nimport {BASE}.core.Point;\npublic class AnnotatorListener {{}}")
    write(tmp_path, f"{BASE}.core", "Point", "public final class Point {}")
    write(tmp_path, f"{BASE}.events", "AnnotationRecorder",
          f"import {BASE}.core.Point;\npublic final class AnnotationRecorder {{}}")
    assert problems(tmp_path) == []  # a tree that keeps the rule passes

    write(tmp_path, f"{BASE}.memory", "ExecutorPeakEvents",
          f"import {BASE}.AnnotatorListener;\nimport static {BASE}.events.AnnotationRecorder.oneLine;\n"
          "final class ExecutorPeakEvents {}")
    write(tmp_path, f"{BASE}.streaming", "StreamingQueries",
          "final class StreamingQueries {\n"
          "    // dev.sparkscope.annotator.profiler.X in a comment is no reference\n"
          f"    String s = \"{BASE}.container.Y\";\n"
          f"    int n = {BASE}.events.AnnotationRecorder.MAX_DESCRIPTION;\n}}")
    write(tmp_path, f"{BASE}.core", "Writer", f"import {BASE}.container.*;\nfinal class Writer {{}}")
    write(tmp_path, f"{BASE}.reports", "Report", f"import {BASE}.core.Point;\nfinal class Report {{}}")
    assert problems(tmp_path) == [
        "dev/sparkscope/annotator/core/Writer.java: the core uses container",
        "dev/sparkscope/annotator/memory/ExecutorPeakEvents.java: product memory uses (root); products use the "
        "core only",
        "dev/sparkscope/annotator/memory/ExecutorPeakEvents.java: product memory uses events; products use the "
        "core only",
        "dev/sparkscope/annotator/reports/Report.java: package reports is neither the core nor a declared product: "
        "add it to FEATURES or fold it into one",
        "dev/sparkscope/annotator/streaming/StreamingQueries.java: product streaming uses events; products use the "
        "core only",
    ]
