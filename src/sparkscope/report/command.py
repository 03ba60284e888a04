"""`./sparkscope report [RUN]`: the verdict and --conf lines in the
terminal (or, --json, the same facts as one JSON object), the whole report
in one HTML file."""

from __future__ import annotations

import argparse
import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

from sparkscope.command_line import REPORTS_DIR, add_run_argument
from sparkscope.compare.command import finding_line
from sparkscope.compare.comparison import Comparison, compare
from sparkscope.errors import SparkscopeError
from sparkscope.report.advice import advise, gc_share, human, spilled, streaming_lines
from sparkscope.report.capacity import (capacity, capacity_advice, capacity_document, connect_line, connect_users,
                                       prices_of, summary_line)
from sparkscope.store.figures import Prices
from sparkscope.report.run_facts import READ_TIMEOUT_S, REPORT_ROLLUP, RunFacts, RunReader
from sparkscope.settings import load_settings
from sparkscope.stack import metrics_reads
from sparkscope.text import clean
from sparkscope.store.schema import JVM_HEAP_MEMORY, ON_HEAP_EXECUTION_MEMORY

EARLIER_RUNS = 5


def run_summary(run: RunFacts) -> dict[str, Any]:
    workers = run.workers().values()
    return {"app_id": run.app_id, "duration_ms": run.duration_ms,
            "finished": datetime.fromtimestamp((run.ended_ms or run.started_ms) / 1000, tz=timezone.utc)
            .strftime("%Y-%m-%d %H:%M:%S UTC"),
            "peak_heap": max((e.peaks.get(JVM_HEAP_MEMORY) or 0 for e in workers), default=None),
            "peak_execution": max((e.peaks.get(ON_HEAP_EXECUTION_MEMORY) or 0 for e in workers), default=None),
            "gc_share": gc_share(run), "spilled": spilled(run)}


def compared(reader: RunReader, app_id: str) -> Optional[Comparison]:
    """The run against its job's baseline (compare's defaults); None when it cannot be read."""
    try:
        return compare(reader.store, app_id)
    except SparkscopeError:
        return None


def make_report(reader: RunReader, app_id: str | None, out_dir: Path,
                prices: Prices = Prices(), usual: Optional[Comparison] = None) -> tuple[Path, Any, RunFacts, list]:
    from sparkscope.report.page import render  # plotly: loaded only when a page is drawn

    app_id = app_id or reader.latest_app()
    usual = usual or compared(reader, app_id)
    run = reader.read(app_id)
    advice = advise(run)
    earlier = [r.app_id for r in reader.finished_runs(run.app_name)
               if r.app_id != app_id and r.started_ms <= run.started_ms][:EARLIER_RUNS]
    runs = [run_summary(run)] + [run_summary(reader.read(a)) for a in earlier]
    heap = max((e.heap_max or 0 for e in run.workers().values()), default=None) or None
    out_dir.mkdir(parents=True, exist_ok=True)
    # The id may come from InfluxDB (latest_app), written by anyone who reaches the events port.
    path = out_dir / f"sparkscope-report-{re.sub(r'[^A-Za-z0-9_.-]', '_', app_id)}.html"
    path.write_text(render(run, advice, runs, heap, capacity(run, prices), usual), encoding="utf-8")
    return path, advice, run, runs


def print_verdict(advice, runs, path: Path, out=print, run=None, prices: Prices = Prices()) -> None:
    raw_out = out
    out = lambda line: raw_out(clean(line))  # noqa: E731 (stored ids and names reach the terminal)
    out(advice.summary)
    for line in advice.containers:
        out(f"  container: {line}")
    for line in streaming_lines(run) if run is not None else []:
        out(f"  {line}")
    for r in advice.recommendations:
        out(f"  {r.key}={r.value}: {r.reason}")
    if advice.recommendations:
        out("paste into spark-submit:  " + " ".join(advice.conf_lines()))
    for note in advice.notes:
        out(f"  note: {note}")
    if run is not None:
        cap = capacity(run, prices)
        out(summary_line(cap))
        for line in capacity_advice(run, cap):
            out(f"  {line}")
        line = connect_line(connect_users(run, cap))
        if line:
            out(f"  {line}")
    if len(runs) > 1:
        out(f"earlier runs of the same name: {len(runs) - 1} (compared in the report)")
        for r in runs:
            share = f"{r['gc_share']:.0%}" if r.get("gc_share") is not None else "n/a"
            out(f"  {r['app_id']}: {(r['duration_ms'] or 0) / 1000:.0f} s, peak heap {human(r['peak_heap'])}, "
                f"GC {share}, spilled {human(r['spilled'])}")
    out(f"report: {path}")


def report_document(run: RunFacts, advice, runs: list, path: Path, prices: Prices = Prices(),
                    usual: Optional[Comparison] = None) -> dict[str, Any]:
    """report --json: what the terminal verdict says, as data (times in ms since
    the epoch, sizes in bytes, shares as fractions; None where unknown); comparison:
    compare --json's object for the run, None when it could not be read."""
    workers = run.workers()
    peak = lambda name: max((e.peaks[name] for e in workers.values() if e.peaks.get(name) is not None),  # noqa: E731
                            default=None)
    return {
        "run": run.app_id, "app_name": run.app_name, "ending": run.ending,
        "started_ms": run.started_ms, "ended_ms": run.ended_ms, "duration_ms": run.duration_ms,
        "executors": [{"id": e.executor_id, "cores": e.cores, "heap_max": e.heap_max, "live_set": e.live_set,
                       "peaks": dict(e.peaks)} for e in workers.values()],
        "peaks": {"heap": peak(JVM_HEAP_MEMORY), "execution": peak(ON_HEAP_EXECUTION_MEMORY)},
        "verdict": advice.verdict, "summary": advice.summary, "gc_share": advice.gc_share,
        "spilled": advice.spilled, "containers": list(advice.containers),
        "streaming": streaming_lines(run),
        "recommendations": [{"key": r.key, "value": r.value, "reason": r.reason, "had": r.had}
                            for r in advice.recommendations],
        "conf": advice.conf_lines(), "notes": list(advice.notes),
        "capacity": capacity_document(run, capacity(run, prices)),
        "earlier_runs": runs[1:], "report": str(path),
        "comparison": usual.document() if usual is not None else None,
    }


def cmd_report(args: argparse.Namespace) -> int:
    settings = load_settings()
    reader = RunReader(settings.influx_reader, settings.database,
                       metrics_reads(settings, READ_TIMEOUT_S, REPORT_ROLLUP))
    prices = prices_of(settings)
    app_id = args.app_id or reader.latest_app()
    usual = compared(reader, app_id)
    path, advice, run, runs = make_report(reader, app_id, Path(args.out), prices, usual)
    if args.json:
        print(json.dumps(report_document(run, advice, runs, path, prices, usual), indent=2))
    else:
        print_verdict(advice, runs, path, run=run, prices=prices)
        if usual is not None and usual.baseline:
            print(clean(f"compared with usual (job {usual.job}, {len(usual.baseline)} earlier runs): "
                        f"{len(usual.regressions)} worse, {len(usual.improvements)} better"))
            for f in usual.regressions:
                print(clean(f"  worse: {finding_line(f)}"))
    return 0


def register(sub) -> None:
    report = sub.add_parser("report", help="how much memory a run really needed: verdict, --conf advice, and "
                                           "an HTML report that opens offline")
    add_run_argument(report, "the newest finished run")
    report.add_argument("--out", default=REPORTS_DIR,
                        help=f"directory for the HTML file, from the working directory (default {REPORTS_DIR}/)")
    report.add_argument("--json", action="store_true",
                        help="print the report's facts as one JSON object instead of the verdict")
    report.set_defaults(func=cmd_report)
