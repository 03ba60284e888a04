"""Layers point one way. Each part of the package (a subpackage, or a module at
the top) has a rank in LAYERS and imports only parts of its own rank or
below; no import cycle between parts; the store and the probes, which the
probes' images copy whole, import the standard library and each other alone,
at the top of their modules. Imports inside functions count: they run later
but tie the parts together just the same."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from sparkscope.settings import ROOT

PACKAGE = ROOT / "src" / "sparkscope"


def part_of(module: str) -> str:
    """sparkscope.stack.native -> stack; sparkscope.store.influx -> influx."""
    return module.split(".")[1] if module.count(".") else module


def imports(package: Path) -> dict[tuple[str, str], list[str]]:
    """(from part, to part) -> where, for every import statement anywhere in
    the package's modules, relative ones resolved."""
    name = package.name
    edges: dict[tuple[str, str], list[str]] = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package).with_suffix("").parts
        here = parts[:-1]  # the package a module is in; for __init__.py, the package itself
        source = parts[0] if len(parts) > 1 else parts[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = list(here[:len(here) - node.level + 1])
                    targets = [".".join([name, *base, *([node.module] if node.module else [])])]
                else:
                    targets = [node.module or ""]
                if targets[0] in (name, f"{name}."):  # from sparkscope import influx, schema
                    targets = [f"{name}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in targets:
                if target.startswith(name + "."):
                    to = target.split(".")[1]
                    if to != source:
                        edges.setdefault((source, to), []).append(f"{path.relative_to(package)}:{node.lineno}")
    return edges


def cycles(edges: dict[tuple[str, str], list[str]]) -> list[list[str]]:
    """Each cycle once, as the parts in order (the first part repeated at the end)."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    found: set[tuple[str, ...]] = set()

    def walk(path: list[str]) -> None:
        for nxt in sorted(graph.get(path[-1], ())):
            if nxt == path[0]:
                i = path.index(min(path))
                found.add(tuple(path[i:] + path[:i]))
            elif nxt not in path and nxt > path[0]:
                walk(path + [nxt])

    for start in sorted(graph):
        walk([start])
    return [list(c) + [c[0]] for c in sorted(found)]


def described(edges, cycle: list[str]) -> str:
    return " -> ".join(cycle) + "  (" + "; ".join(
        f"{a}->{b} at {edges[a, b][0]}" for a, b in zip(cycle, cycle[1:])) + ")"


# Lowest first. A part may import its own rank and the ranks below it.
LAYERS = (
    ("base", {"errors", "text", "versions"}),  # no sparkscope import at all
    ("store", {"store"}),  # the schema, line protocol, InfluxDB, the read layer
    ("probes", {"probes"}),  # agents on Spark's hosts: the store's writers
    ("runtime", {"process", "settings"}),  # processes and the user's configuration
    ("build", {"provision", "spark"}),  # what is built or installed, Spark's settings and submit
    ("stack", {"stack"}),  # running the services
    ("generators", {"dashboards", "alerts", "chart", "ingest_guard", "generate"}),  # checked-in files
    ("commands", {"command_line", "report", "compare", "top", "profiles", "demo", "cli", "__main__"}),  # what users run
)
# Parts whose images copy them whole: the standard library and these parts only.
SELF_CONTAINED = {"store": {"store", "errors"}, "probes": {"probes", "store", "errors"}, "errors": set()}


def rank_of(part: str, layers=LAYERS) -> int:
    for rank, (_, parts) in enumerate(layers):
        if part in parts:
            return rank
    raise AssertionError(f"{part} has no layer: add it to LAYERS in tests/test_layers.py")


def upward(edges, layers=LAYERS) -> list[str]:
    """Every import of a part above the importer's rank, with where it is."""
    return [f"{a} ({layers[rank_of(a, layers)][0]}) imports {b} ({layers[rank_of(b, layers)][0]}) at {where[0]}"
            for (a, b), where in sorted(edges.items()) if rank_of(b, layers) > rank_of(a, layers)]


def test_each_part_imports_only_its_own_layer_and_the_layers_below():
    edges = imports(PACKAGE)
    assert ("stack", "probes") in edges  # the scan sees imports at all (the native runner starts the probes)
    parts = {p for edge in edges for p in edge}
    unranked = sorted(p for p in parts if not any(p in names for _, names in LAYERS))
    assert not unranked, f"parts without a layer in LAYERS: {unranked}"
    assert not upward(edges), "\n".join(upward(edges))


def test_no_import_cycle_between_the_parts_of_the_package():
    edges = imports(PACKAGE)
    problems = [described(edges, c) for c in cycles(edges)]
    assert not problems, "\n".join(problems)


def foreign_imports(package: Path, part: str, allowed: set[str]) -> list[str]:
    """Imports in a self-contained part that are neither the standard library nor
    an allowed part, and any sparkscope import placed inside a function."""
    out = []
    root = package / part if (package / part).is_dir() else package / f"{part}.py"
    for path in sorted(root.rglob("*.py") if root.is_dir() else [root]):
        tree = ast.parse(path.read_text(), str(path))
        top_level = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            elif isinstance(node, ast.ImportFrom):
                names = [package.name + ".relative"]  # relative: inside the package, resolved as its own part
            else:
                continue
            where = f"{path.relative_to(package)}:{node.lineno}"
            for name in names:
                head = name.split(".")[0]
                if head == package.name:
                    inner = name.split(".")[1] if "." in name else ""
                    if inner and inner != "relative" and inner not in allowed:
                        out.append(f"{where} imports {name}")
                    elif id(node) not in top_level:
                        out.append(f"{where} imports {name} inside a function")
                elif head not in sys.stdlib_module_names and head != "__future__":
                    out.append(f"{where} imports {name}, not in the standard library")
    return out


@pytest.mark.parametrize("part", sorted(SELF_CONTAINED))
def test_the_store_and_the_probes_need_nothing_but_the_standard_library_and_each_other(part):
    assert not foreign_imports(PACKAGE, part, SELF_CONTAINED[part])


def test_an_import_up_the_layers_a_foreign_module_or_a_hidden_import_is_found(tmp_path):
    pkg = tmp_path / "pkg"
    for part in ("low", "high"):
        (pkg / part).mkdir(parents=True)
        (pkg / part / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "low" / "a.py").write_text("import json\nimport yaml\nfrom pkg.high import b\n\n"
                                      "def later():\n    from pkg.low import c\n")
    (pkg / "high" / "b.py").write_text("from pkg.low import a\n")
    layers = (("bottom", {"low"}), ("top", {"high"}))
    assert upward(imports(pkg), layers) == ["low (bottom) imports high (top) at low/a.py:3"]
    assert foreign_imports(pkg, "low", {"low"}) == [
        "low/a.py:2 imports yaml, not in the standard library",
        "low/a.py:3 imports pkg.high",
        "low/a.py:6 imports pkg.low inside a function"]
    assert foreign_imports(pkg, "high", {"high", "low"}) == []


def test_a_cycle_through_an_import_inside_a_function_is_found(tmp_path):
    pkg = tmp_path / "pkg"
    for part in ("low", "high", "top"):
        (pkg / part).mkdir(parents=True)
        (pkg / part / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "base.py").write_text("X = 1\n")
    (pkg / "low" / "a.py").write_text("from pkg import base\n\ndef later():\n    from pkg.high.b import y\n    return y\n")
    (pkg / "high" / "b.py").write_text("from ..low import a\ny = 2\n")
    (pkg / "top" / "c.py").write_text("from pkg.high import b\nfrom pkg import base\n")
    edges = imports(pkg)
    assert set(edges) == {("low", "base"), ("low", "high"), ("high", "low"), ("top", "high"), ("top", "base")}
    assert cycles(edges) == [["high", "low", "high"]]
    assert "low/a.py:4" in described(edges, cycles(edges)[0])
