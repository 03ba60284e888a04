"""`./sparkscope compare [RUN] [--baseline RUN ...] [--last N] [--json]`: is
this run worse than usual? A table of what is worse and what is better than
the job's baseline, by run and by phase; exit 1 when anything is worse, so
that a scheduler can stop a pipeline on it."""

from __future__ import annotations

import argparse
import json
from typing import Callable

from sparkscope.command_line import OK, REGRESSED, add_run_argument, positive_int
from sparkscope.compare.comparison import BASELINE_RUNS, Comparison, Finding, compare
from sparkscope.compare.rule import BYTES, COUNT, MEMORY, RATIO, RSS, SHARE, STORAGE, TIME, UNITS
from sparkscope.settings import load_settings
from sparkscope.stack import metrics_reads
from sparkscope.text import clean


def figure_text(metric: str, value: float) -> str:
    """A figure in the unit a person reads it in."""
    unit = UNITS[metric]
    if unit == TIME:
        return f"{value / 1000:.1f} s"
    if unit in (BYTES, MEMORY, RSS, STORAGE):
        return f"{value / 1024 ** 3:.2f} GiB" if abs(value) >= 1024 ** 3 else f"{value / 1024 ** 2:.0f} MiB"
    if unit == SHARE:
        return f"{value:.0%}"
    if unit == RATIO:
        return f"{value:.1f}x"
    assert unit == COUNT
    return f"{value:.0f}"


def finding_line(f: Finding) -> str:
    where = f" [{f.ident}]" if f.ident and f.kind != "run" else ""
    return (f"{f.kind:6} {f.name}{where}: {f.metric} {figure_text(f.metric, f.value)}, "
            f"usually {figure_text(f.metric, f.baseline)} (limit {figure_text(f.metric, f.limit)})")


def print_comparison(c: Comparison, out: Callable[[str], None] = print) -> None:
    raw_out = out
    out = lambda line: raw_out(clean(line))  # noqa: E731 (stored ids and names reach the terminal)
    state = " (still running)" if c.run.running else ""
    out(f"run {c.run.app_id}{state}, job {c.job}")
    if c.baseline:
        out(f"baseline: {len(c.baseline)} run(s): {', '.join(r.app_id for r in c.baseline)}")
    for note in c.notes:
        out(f"note: {note}")
    if c.baseline:
        out(f"worse than usual: {len(c.regressions) or 'nothing'}")
        for f in c.regressions:
            out(f"  {finding_line(f)}")
        out(f"better than usual: {len(c.improvements) or 'nothing'}")
        for f in c.improvements:
            out(f"  {finding_line(f)}")
    for title, phases in (("new in this run (not compared)", c.new),
                          ("in the baseline, not in this run", c.missing)):
        if phases:
            out(f"{title}: {len(phases)}")
            for p in phases:
                out(f"  {p.kind:6} {p.name} [{p.ident}]")


def cmd_compare(args: argparse.Namespace) -> int:
    settings = load_settings()
    reads = metrics_reads(settings, timeout_s=60.0)
    comparison = compare(reads, args.app_id, tuple(args.baseline), args.last)
    if args.json:
        print(json.dumps(comparison.document(), indent=2))
    else:
        print_comparison(comparison)
    return REGRESSED if comparison.regressions else OK


def register(sub) -> None:
    parser = sub.add_parser("compare", help="is this run worse than usual? each figure of a run and of its "
                                            "queries, jobs and stages against the job's earlier runs "
                                            "(exit 1 when something is worse)")
    add_run_argument(parser, "the newest finished run")
    parser.add_argument("--baseline", nargs="+", default=[], metavar="RUN",
                        help="compare with these runs (default: the job's last finished runs before RUN)")
    parser.add_argument("--last", type=positive_int("--last"), default=BASELINE_RUNS, metavar="N",
                        help=f"how many of the job's last finished runs make the baseline (default {BASELINE_RUNS})")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object: run, job, baseline (ids), regressions and improvements (each "
                             "with kind, name, metric, baseline and value), phases new and missing, notes")
    parser.set_defaults(func=cmd_compare)
