"""How a profile is stored, one layout for every profiler (the JVM plugin
writes the same points from Java; annotator/README.md documents both):

- sparkscope_flame (tags applicationid, executorid, kind): one point per
  nested-set row, fields level, value, self, label and profile (the profile's
  id). A profile's rows are stamped start + slot * SLOT_NS + row index, in
  nanoseconds, so InfluxDB returns them in depth-first order, and several
  profiles of one executor and kind that start in the same millisecond (the
  whole window and its per-stage cuts) cannot overwrite each other.
- sparkscope_profiles (tags applicationid, kind): one point per profile, for
  pickers and tables: profile, executorid, stage, seconds, samples, unit and
  top (the frame with the most self time).

Only applicationid, executorid and kind are tags, so a month-long application
profiled every minute adds no series beyond one per executor and kind."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

from sparkscope.store import influx, lineprotocol
from sparkscope.store.nested_set import Row, widest_leaves
from sparkscope.store.schema import FLAME_MEASUREMENT, PROFILES_MEASUREMENT

ROWS = FLAME_MEASUREMENT
PROFILES = PROFILES_MEASUREMENT
SLOT_NS = 100_000_000  # rows of one profile must fit in 100 ms of nanoseconds
KINDS = ("cpu", "wall", "alloc", "lock", "offcpu", "python")
UNIT = {"alloc": "bytes"}  # everything else is time, in ns


@dataclass(frozen=True)
class Profile:
    application_id: str
    executor_id: str
    kind: str
    start_ms: int
    seconds: float
    stage: str = ""  # "" = all threads of the window; else "stage 3.0"
    slot: int = 0

    @property
    def profile_id(self) -> str:
        return profile_id(self.executor_id, self.kind, self.start_ms, self.seconds, self.stage)


def profile_id(executor_id: str, kind: str, start_ms: int, seconds: float, stage: str = "") -> str:
    """Readable and unique per executor, kind, start and stage, e.g.
    "2026-11-23 18:40:05 exec 1 cpu 30s stage 3.0"."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(start_ms / 1000))
    return f"{stamp} exec {executor_id} {kind} {seconds_text(seconds)}s {stage or 'all threads'}"


def seconds_text(seconds: float) -> str:
    """A profile's length in its id: the float as line protocol writes it,
    without a whole number's ".0" (30.0 -> "30", 2.5 -> "2.5"); ProfileLines.java
    writes the same from Point.floatText."""
    text = lineprotocol.field_value(float(seconds))
    return text[:-2] if text.endswith(".0") else text


escape_tag = lineprotocol.tag_value  # the thread sampler's periods.py writes its tags with it


def lines(profile: Profile, rows_: Sequence[Row], samples: int) -> list[str]:
    """Line protocol for one profile: its rows and its index point."""
    if not rows_:
        return []
    if len(rows_) >= SLOT_NS:
        raise ValueError(f"{len(rows_)} rows do not fit one profile slot")
    series = lineprotocol.series_key(ROWS, {"applicationid": profile.application_id,
                                            "executorid": profile.executor_id, "kind": profile.kind})
    pid = profile.profile_id
    base = profile.start_ms * 1_000_000 + profile.slot * SLOT_NS
    out = [lineprotocol.series_line(series, {"level": r.level, "value": r.value, "self": r.self_value,
                                             "label": r.label, "profile": pid}, base + i)
           for i, r in enumerate(rows_)]
    top = widest_leaves(rows_, 1)
    out.append(lineprotocol.line(
        PROFILES, {"applicationid": profile.application_id, "kind": profile.kind},
        {"profile": pid, "executorid": profile.executor_id, "stage": profile.stage,
         "seconds": float(profile.seconds), "samples": int(samples), "unit": UNIT.get(profile.kind, "ns"),
         "top": top[0][0] if top else ""}, base))
    return out


def read_rows(influx_url: str, database: str, application_id: str, profile: str) -> list[Row]:
    """A stored profile's rows back, in depth-first order."""
    series = influx.query(influx_url, f"SELECT level, value, self, label FROM {ROWS} "
                          f"WHERE applicationid = {influx.string_literal(application_id)} "
                          f"AND profile = {influx.string_literal(profile)}",
                          database, epoch="ns")
    out: list[Row] = []
    for s in series:
        for _, level, value, self_value, label in s["values"]:
            out.append(Row(int(level), int(value), int(self_value), str(label)))
    return out


def stage_cuts(influx_url: str, database: str, application_id: str, kind: str) -> list[dict]:
    """The per-stage cuts stored with the run's profiles of a kind: profile, stage, samples, top."""
    series = influx.query(influx_url, f"SELECT profile, stage, samples, top FROM {influx.identifier(PROFILES)} "
                          f"WHERE applicationid = {influx.string_literal(application_id)} "
                          f"AND kind = {influx.string_literal(kind)} AND stage <> ''", database)
    return [dict(zip(s["columns"], v)) for s in series for v in s["values"]]
