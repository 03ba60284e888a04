"""Which phase of one run is which phase of another: SQL queries, jobs and
stages matched by what identifies them across runs (their key: the
description, job group and call site) and their position in the run.

The phases of each kind are taken in the order the run ran them and aligned
by their keys' longest common subsequence: same-named phases (a PySpark
job's stages are all `count at NativeMethodAccessorImpl.java:0`) match in
turn, first with first; a phase added or removed between the two (the code
changed) is left without a counterpart, never paired with a neighbour of
another key. Keys never repeat a run's id or a number that changes from run
to run (stage and job ids, execution ids, times).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable, Sequence

RUN, QUERY, JOB, STAGE = "run", "query", "job", "stage"
KINDS = (QUERY, JOB, STAGE)


@dataclass
class Phase:
    kind: str  # QUERY, JOB or STAGE
    key: Hashable  # what identifies it across runs
    label: str  # what a person recognises it by: description or call site
    order: int  # its position among the run's phases of its kind (execution, job or stage id)
    figures: dict[str, float] = field(default_factory=dict)  # rule.UNITS names -> value
    ended: bool = True
    ident: str = ""  # its id in its own run, e.g. "stage 7"
    name: str = ""  # label, with its place among same-labelled phases when there are several

    def __post_init__(self):
        self.name = self.name or self.label


def name_by_position(phases: list[Phase]) -> list[Phase]:
    """Phases in run order, each same-labelled one named with its place (#2 of 3)."""
    phases = sorted(phases, key=lambda p: p.order)
    total: dict[tuple[str, str], int] = {}
    for p in phases:
        total[p.kind, p.label] = total.get((p.kind, p.label), 0) + 1
    seen: dict[tuple[str, str], int] = {}
    for p in phases:
        seen[p.kind, p.label] = seen.get((p.kind, p.label), 0) + 1
        n = total[p.kind, p.label]
        p.name = p.label if n == 1 else f"{p.label} (#{seen[p.kind, p.label]} of {n})"
    return phases


def align(run: Sequence[Hashable], other: Sequence[Hashable]) -> dict[int, int]:
    """Index in run -> index in other, for the longest common subsequence of the two
    key sequences; among equally long alignments, earlier phases pair first."""
    n, m = len(run), len(other)
    # longest[i][j]: the longest common subsequence of run[i:] and other[j:]
    longest = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            longest[i][j] = (longest[i + 1][j + 1] + 1 if run[i] == other[j]
                             else max(longest[i + 1][j], longest[i][j + 1]))
    pairs, i, j = {}, 0, 0
    while i < n and j < m:
        if run[i] == other[j] and longest[i][j] == longest[i + 1][j + 1] + 1:
            pairs[i] = j
            i, j = i + 1, j + 1
        elif longest[i + 1][j] >= longest[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


def match(run: list[Phase], other: list[Phase]) -> dict[int, Phase]:
    """For each phase of run (its index in run order) its counterpart in other, of
    the same kind; phases without one are absent."""
    out: dict[int, Phase] = {}
    for kind in KINDS:
        mine = [(i, p) for i, p in enumerate(run) if p.kind == kind]
        theirs = sorted((p for p in other if p.kind == kind), key=lambda p: p.order)
        mine.sort(key=lambda ip: ip[1].order)
        for a, b in align([p.key for _, p in mine], [p.key for p in theirs]).items():
            out[mine[a][0]] = theirs[b]
    return out
