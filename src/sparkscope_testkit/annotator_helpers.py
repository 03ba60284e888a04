"""What the annotator tests share: rows of one annotation measurement as
dicts, and the series the annotator's measurements hold for one application."""

from __future__ import annotations

import json
import re

from sparkscope.provision.annotator_jar import ensure_annotator_jar
from sparkscope.spark.conf import annotator_properties
from sparkscope.store.schema import TASK_TIME_COUNTERS, TASK_TOTALS_PREFIX
from sparkscope.settings import ROOT

MEASUREMENTS = ("sparkscope_application", "sparkscope_query", "sparkscope_job", "sparkscope_stage",
                "sparkscope_executor",
                # The task time totals (annotator TaskTimeTotals): one series each per application.
                *(TASK_TOTALS_PREFIX + counter for counter in TASK_TIME_COUNTERS))


def annotator_conf(stack) -> dict[str, str]:
    return annotator_properties(stack.settings, ensure_annotator_jar(ROOT, progress=lambda _: None))


def rows(stack, measurement: str, app_id: str, where: str = "") -> list[dict]:
    """Every point of one measurement for one application, as {column: value}, in time order."""
    series = stack.influx(f'SELECT * FROM "{measurement}" WHERE "applicationid" = \'{app_id}\'{where}')
    if not series:
        return []
    columns = series[0]["columns"]
    return [dict(zip(columns, v)) for v in series[0]["values"]]


def series_count(stack, app_id: str) -> int:
    """Series of the annotator's measurements that carry this application's id."""
    total = 0
    for m in MEASUREMENTS:
        result = stack.influx(f'SHOW SERIES EXACT CARDINALITY FROM "{m}" WHERE "applicationid" = \'{app_id}\'')
        total += sum(v[0] for s in result for v in s["values"])
    return total


def marks(stdout: str) -> dict[str, dict]:
    out = {}
    for line in stdout.splitlines():
        if line.startswith("MARK "):
            record = json.loads(line.split(" ", 1)[1])
            out[record.get("name", "mark")] = record
    return out


def printed(stdout: str, key: str):
    match = re.search(rf"^{key} (.*)$", stdout, re.M)
    return json.loads(match.group(1)) if match else None


def app_finished(stack, app_id: str, deadline_s: float = 30.0):
    """Wait for the application's final point: everything before it was sent first."""
    return stack.wait_for(f'SELECT "duration_ms" FROM "sparkscope_application" WHERE "applicationid" = '
                          f'\'{app_id}\' AND "status" = \'FINISHED\'', bool, deadline_s)


JOBS_DIR = ROOT / "tests" / "jobs"
