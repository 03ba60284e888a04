"""Is this run worse than usual? A run against its job's baseline: the last
runs of the same job (Run.job) that FINISHED before it, or the runs a user
names; each of its figures and each phase's judged by compare/rule.py
against the same figure of the baseline's matching phases
(compare/matching.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from sparkscope.compare.matching import RUN, Phase, match
from sparkscope.compare.phases import RunPhases, read_run
from sparkscope.compare.rule import REGRESSION, UNITS, judge
from sparkscope.errors import SparkscopeError, UsageError
from sparkscope.store.reads import Reads, Run

BASELINE_RUNS = 5  # the last N finished runs of the job, by default


@dataclass(frozen=True)
class Finding:
    kind: str  # run, query, job or stage
    name: str  # what a person recognises: the job, a description, a call site (#k of n)
    metric: str  # a name of rule.UNITS
    baseline: float  # the baseline's median
    value: float
    limit: float  # the bound of the usual it crossed
    ident: str = ""  # the phase's id in this run, e.g. "stage 7"

    def document(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "metric": self.metric, "unit": UNITS[self.metric],
                "baseline": self.baseline, "value": self.value, "limit": self.limit, "id": self.ident or None}


@dataclass
class Comparison:
    run: Run
    baseline: list[Run]
    regressions: list[Finding] = field(default_factory=list)
    improvements: list[Finding] = field(default_factory=list)
    new: list[Phase] = field(default_factory=list)  # phases of the run that no baseline run had
    missing: list[Phase] = field(default_factory=list)  # phases of the newest baseline run this run lacks
    notes: list[str] = field(default_factory=list)

    @property
    def job(self) -> str:
        return self.run.job or self.run.name

    def document(self) -> dict[str, Any]:
        """compare --json, and the report's comparison member."""
        unmatched = lambda phases: [{"kind": p.kind, "name": p.name, "id": p.ident} for p in phases]  # noqa: E731
        return {"run": self.run.app_id, "job": self.job, "running": self.run.running,
                "baseline": [r.app_id for r in self.baseline],
                "regressions": [f.document() for f in self.regressions],
                "improvements": [f.document() for f in self.improvements],
                "new_phases": unmatched(self.new), "missing_phases": unmatched(self.missing),
                "notes": list(self.notes)}


def baseline_runs(reads: Reads, run: Run, named: Sequence[str] = (), last: int = BASELINE_RUNS) -> list[Run]:
    """The runs named, else the job's last `last` FINISHED runs that started before this one."""
    if named:
        out = []
        for app_id in named:
            found = reads.run(app_id)
            if found is None:
                raise SparkscopeError(f"baseline run {app_id} is not in InfluxDB: ./sparkscope report lists "
                                      "earlier runs of a job; leave --baseline out to take the job's last runs")
            if app_id == run.app_id:
                raise UsageError(f"{app_id} is the run compared: name other runs with --baseline")
            out.append(found)
        return sorted(out, key=lambda r: r.started_ms, reverse=True)  # newest first, as the job's own
    if last < 1:
        raise UsageError(f"--last {last}: compare with at least one earlier run")
    return [r for r in reads.job_runs(run.job or run.name)
            if r.app_id != run.app_id and r.started_ms < run.started_ms][:last]


def judge_all(kind: str, name: str, ident: str, value_of: dict[str, float], baselines: list[dict[str, float]],
              out: Comparison, partial: bool = False) -> None:
    for metric in sorted(value_of):
        verdict = judge(metric, [b.get(metric) for b in baselines], value_of[metric], whole_run=kind == RUN)
        if verdict is None or (partial and verdict.direction != REGRESSION):
            continue  # a run still going has less of everything so far: only what is already worse counts
        finding = Finding(kind, name, metric, verdict.baseline, value_of[metric], verdict.limit, ident)
        (out.regressions if verdict.direction == REGRESSION else out.improvements).append(finding)


def compare_phases(current: RunPhases, earlier: list[RunPhases]) -> Comparison:
    """The findings of one run against its baseline runs, already read."""
    run = current.run
    out = Comparison(run, [e.run for e in earlier])
    if run.running:
        out.notes.append("the run is still going: compared as far as it got (the phases that ended, "
                         "its totals so far)")
    if not earlier:
        out.notes.append(f"no baseline: no earlier finished run of job {out.job!r} (set spark.sparkscope.job "
                         "to the same name on each run of a recurring job, or name runs with --baseline)")
        return out
    judge_all(RUN, out.job, run.app_id, current.figures, [e.figures for e in earlier], out, partial=run.running)
    matches = [match(current.phases, e.phases) for e in earlier]
    for i, phase in enumerate(current.phases):
        counterparts = [m[i].figures for m in matches if i in m]
        if not counterparts:
            out.new.append(phase)
            continue
        judge_all(phase.kind, phase.name, phase.ident, phase.figures, counterparts, out)
    matched_in_newest = {id(p) for p in matches[0].values()}
    out.missing = [p for p in earlier[0].phases if id(p) not in matched_in_newest]
    if out.new or out.missing:
        if run.running and not out.new:
            out.notes.append(f"{len(out.missing)} phase(s) of the baseline not reached yet")
        else:
            out.notes.append(f"the job's phases changed since {earlier[0].run.app_id}: {len(out.new)} new, "
                             f"{len(out.missing)} gone (listed, not compared)")
    return out


def compare(reads: Reads, app_id: Optional[str] = None, named: Sequence[str] = (),
            last: int = BASELINE_RUNS) -> Comparison:
    """Read a run (default: the newest finished one) and its baseline, and compare."""
    if app_id is None:
        finished = reads.finished_runs()
        if not finished:
            raise SparkscopeError("no finished Spark application with the sparkscope annotator in InfluxDB yet: "
                                  "run a job with the flags of ./sparkscope conf, then ./sparkscope compare")
        run = finished[0]
    else:
        found = reads.run(app_id)
        if found is None:
            raise SparkscopeError(f"application {app_id} is not in InfluxDB: check the id (./sparkscope compare "
                                  "without one takes the newest finished run)")
        run = found
    baseline = baseline_runs(reads, run, named, last)
    return compare_phases(read_run(reads, run), [read_run(reads, b) for b in baseline])
