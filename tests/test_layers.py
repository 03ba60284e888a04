"""Layers point one way: no import cycle between the parts of the package (a
subpackage, or a module at the top), counting the imports inside functions,
which run later but tie the parts together just the same."""

from __future__ import annotations

import ast
from pathlib import Path

from sparkscope.settings import ROOT

PACKAGE = ROOT / "src" / "sparkscope"


def part_of(module: str) -> str:
    """sparkscope.stack.native -> stack; sparkscope.influx -> influx."""
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


def test_no_import_cycle_between_the_parts_of_the_package():
    edges = imports(PACKAGE)
    assert ("stack", "threadprobe") in edges  # the scan sees imports at all (the native runner starts the probes)
    assert ("report", "stack") in edges
    problems = [described(edges, c) for c in cycles(edges)]
    assert not problems, "\n".join(problems)


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
