"""Spark profiles: the flame graphs the profilers stored (the JVM profiler
plugin, on demand or continuous; the thread sampler's off-CPU kernel stacks;
py-spy for Python workers), one profile at a time, picked by application,
kind, executor and time range. The summary's stage tables link here with the
stage's time range and its slowest executor."""

from __future__ import annotations

from typing import Any

from sparkscope.dashboards.layout import (SORT_AS_QUERIED, SORT_NUMERICAL, Panel, Row,
                                          _variable)
from sparkscope.dashboards.queries import newest_first, raw
from sparkscope.store.schema import FLAME_MEASUREMENT, PROFILES_MEASUREMENT

PROFILED = '"applicationid" =~ /^${applicationid:regex}$/'
IN_PICK = f'{PROFILED} AND "kind" =~ /^${{kind:regex}}$/ AND "executorid" =~ /^${{executorid:regex}}$/'
NEEDS_PROFILER = ("Needs a profile: ./sparkscope profile takes one (with the profiler plugin, "
                  "spark.plugins=dev.sparkscope.annotator.ProfilerPlugin, which ./sparkscope conf adds); "
                  "spark.sparkscope.profiler.continuous=cpu takes them all the time; the stack's thread "
                  "sampler adds kinds offcpu and python.")


def variables() -> list[dict[str, Any]]:
    return [
        _variable("applicationid", "Application",
                  newest_first("applicationid", f'SELECT first("samples") FROM "{PROFILES_MEASUREMENT}" '
                               'WHERE $timeFilter GROUP BY "applicationid"'),
                  sort=SORT_AS_QUERIED,
                  description="Applications with a profile in the time range, the newest first."),
        _variable("kind", "Kind",
                  f'SHOW TAG VALUES FROM "{PROFILES_MEASUREMENT}" WITH KEY = "kind" WHERE '
                  + PROFILED,
                  multi=False, includeAll=True, allValue=".*",
                  current={"selected": True, "text": ["All"], "value": ["$__all"]},
                  description="cpu: time on CPU; wall: every thread, running and waiting; alloc: bytes "
                              "allocated; lock: contended locks; offcpu: kernel stacks of waiting task threads; "
                              "python: PySpark workers (py-spy)."),
        _variable("executorid", "Executor",
                  f'SHOW TAG VALUES FROM "{FLAME_MEASUREMENT}" WITH KEY = "executorid" WHERE '
                  + PROFILED,
                  sort=SORT_NUMERICAL, multi=False, includeAll=True, allValue=".*",
                  current={"selected": True, "text": ["All"], "value": ["$__all"]},
                  description="Executors with a profile; 'driver' is the driver JVM (local mode)."),
        # Each profile: the whole window ("all threads") and a cut per busiest
        # stage. Newest first, so the dashboard opens on the latest profile.
        _variable("profile", "Profile",
                  f'SELECT "profile" FROM "{PROFILES_MEASUREMENT}" WHERE {IN_PICK} AND $timeFilter '
                  "ORDER BY time DESC",
                  sort=SORT_AS_QUERIED,
                  description="One profile: its start (UTC), executor, kind, length, and 'all threads' or the "
                              "stage it was cut to."),
    ]


def _flame_graph() -> Panel:
    rows = raw(f'SELECT "level", "value", "self", "label" FROM "{FLAME_MEASUREMENT}" '
               f"WHERE {PROFILED} AND \"profile\" =~ /^${{profile:regex}}$/ AND $timeFilter", result_format="table")
    # The unit comes with the profile (ns of CPU or wall time; bytes for alloc).
    unit = raw(f'SELECT last("unit") AS "unit" FROM "{PROFILES_MEASUREMENT}" '
               f"WHERE {PROFILED} AND \"profile\" =~ /^${{profile:regex}}$/ AND $timeFilter", result_format="table")
    panel = Panel(
        "Flame graph: $profile",
        "Each bar is a frame; its width is its share of the samples, its children are what it called. Read "
        "it from the top: the first level under the root is the stage a task thread was running ('JVM and "
        "Spark service threads' are the rest: GC, shuffle, heartbeats), then, in wall mode, 'running' or "
        "'waiting' (parked, sleeping, blocked in a read or a lock), then the Java stack. Click a frame to "
        "zoom, search to find a method; the table beside it ranks frames by self time. " + NEEDS_PROFILER,
        [rows, unit], "ns", kind="flamegraph", width=24, height=22, min=None)
    panel.transformations = [{"id": "configFromData", "options": {
        "configRefId": "B", "mappings": [{"fieldName": "unit", "handlerKey": "unit"}],
        "applyTo": {"id": "byType", "options": "number"}}}]
    return panel


def _profiles_table() -> Panel:
    query = ('SELECT "executorid" AS "executor", "kind", "stage", "seconds", "samples", "top" AS "most self time", '
             f'"profile" FROM "{PROFILES_MEASUREMENT}" WHERE {IN_PICK} AND $timeFilter')
    table = raw(query, result_format="table")
    link = {"title": "Show this profile",
            "url": "/d/${__dashboard.uid}?var-applicationid=${applicationid:percentencode}&var-kind=${kind:percentencode}"
                   "&var-executorid=${executorid}&var-profile=${__data.fields.profile}&${__url_time_range}"}
    return Panel(
        "Profiles in the time range",
        "Every stored profile of the application in the time range, newest first: executor, kind, the stage "
        "it was cut to (empty: all threads of the window), length, samples and the frame with the most self "
        "time. Click a profile to show it above. " + NEEDS_PROFILER,
        [table], "none", kind="table", width=24, height=9, min=None,
        options={"sortBy": [{"displayName": "Time", "desc": True}]},
        overrides=[{"matcher": {"id": "byName", "options": "profile"},
                    "properties": [{"id": "links", "value": [link]}]},
                   {"matcher": {"id": "byName", "options": "seconds"},
                    "properties": [{"id": "unit", "value": "s"}]}])


def rows() -> list[Row]:
    return [Row("Profile", [_flame_graph()]), Row("Profiles", [_profiles_table()])]



