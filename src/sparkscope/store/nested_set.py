"""Collapsed stacks ("frame;frame;frame count", one line per distinct stack, as
async-profiler, py-spy and the thread sampler produce) to the nested set
Grafana's flame graph panel draws.

The panel reads rows in order and places each one after its previous sibling,
so the rows must be a depth-first walk of the tree, each frame's value the sum
of its children's plus its own self value. A profile of a busy JVM has tens of
thousands of distinct frames; frames narrower than `min_share` of the total
are folded into their parent's self value, so a profile stays a few thousand
rows and the panel stays fast, while the totals stay exact."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator, Mapping, Sequence

DEFAULT_MIN_SHARE = 0.0005  # 0.05 %: at 2,000 px one frame is under a pixel wide
MAX_DEPTH = 256


@dataclass(frozen=True)
class Row:
    level: int
    value: int
    self_value: int
    label: str


@dataclass
class _Node:
    label: str
    value: int = 0
    self_value: int = 0
    children: dict[str, "_Node"] = field(default_factory=dict)


def parse_collapsed(lines: Iterable[str]) -> dict[tuple[str, ...], int]:
    """Collapsed text to {stack (root first): weight}. Lines that are not
    "stack count" are skipped, not fatal: one bad line from a profiler must
    not lose the rest of a profile."""
    stacks: dict[tuple[str, ...], int] = {}
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = tuple(f for f in stack.split(";") if f)
        if frames and int(count):
            stacks[frames] = stacks.get(frames, 0) + int(count)
    return stacks


def build(stacks: Mapping[Sequence[str], int], root_label: str) -> _Node:
    root = _Node(root_label)
    for frames, weight in stacks.items():
        if weight <= 0:
            continue
        root.value += weight
        node = root
        for label in list(frames)[:MAX_DEPTH]:
            node = node.children.setdefault(label, _Node(label))
            node.value += weight
        node.self_value += weight
    return root


def rows(stacks: Mapping[Sequence[str], int], root_label: str,
         min_share: float = DEFAULT_MIN_SHARE, scale: int = 1) -> list[Row]:
    """The nested set, depth first, widest child first (the panel keeps the
    order it is given, and widest-first reads best). Every value is multiplied
    by `scale` (e.g. the sampling interval in ns, so the panel shows time)."""
    root = build(stacks, root_label)
    if not root.value:
        return []
    cutoff = root.value * min_share
    out: list[Row] = []

    def walk(node: _Node, level: int) -> None:
        kept = [c for c in node.children.values() if c.value >= cutoff]
        folded = node.value - node.self_value - sum(c.value for c in kept)
        out.append(Row(level, node.value * scale, (node.self_value + folded) * scale, node.label))
        for child in sorted(kept, key=lambda c: (-c.value, c.label)):
            walk(child, level + 1)

    # Recursion depth is bounded by MAX_DEPTH frames per stack.
    walk(root, 0)
    return out


def widest_leaves(rows_: Sequence[Row], n: int = 5) -> list[tuple[str, int]]:
    """The frames with the most self time, summed over the tree: what a reader
    looks for first ("where does the time go")."""
    totals: dict[str, int] = {}
    for row in rows_:
        if row.self_value and row.level > 0:  # the root's self is only the folded narrow frames
            totals[row.label] = totals.get(row.label, 0) + row.self_value
    return sorted(totals.items(), key=lambda item: -item[1])[:n]


def iter_stacks(rows_: Sequence[Row]) -> Iterator[tuple[tuple[str, ...], int]]:
    """The inverse of rows(): (stack, self value) per frame with self time,
    root excluded. Used to merge profiles and by the HTML page's tests."""
    path: list[str] = []
    for row in rows_:
        del path[row.level:]
        path.append(row.label)
        if row.self_value and row.level > 0:
            yield tuple(path[1:]), row.self_value
