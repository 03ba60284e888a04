"""Both dashboards in a real browser (Debian's Chromium, driven by Playwright)
against Grafana's own web UI, for real runs: the demo's TPC-DS queries and
the metrics job (shuffle, cache, spill, file writes), both with the annotator.

A person opens the live dashboard while a run goes on and expects to see it
with no clicks; picks an older run from the Application picker; reads the
summary. Every check here is what they would see: a panel error, "No data"
where the run has data, a query sent with an unresolved `$variable`, a
console error, a legend or stat named "A" or "C". Screenshots of each view
are saved under the test's artifact dir (pytest's basetemp) for a person to
look at.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from sparkscope import dashboards
from sparkscope.dashboards.uids import LIVE_UID, SUMMARY_UID
from sparkscope.demo.run import DemoOptions, run_demo
from support.browser_checks import check_clean, grafana_page


@pytest.fixture(scope="module")
def page(stack):
    yield from grafana_page(stack)


@pytest.fixture(scope="module")
def tpcds_run(stack, metrics_run):
    """The demo's first TPC-DS queries, run after the metrics job so that it is the newest application."""
    lines: list[str] = []
    options = DemoOptions(scale=0.01, queries="q3,q7", sink_period_s=1, timeout_s=300)
    result = run_demo(stack.settings, options, "native", out=lines.append)
    assert result.exit_code == 0, "\n".join(lines)
    return result


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


def test_the_live_dashboard_opened_plainly_shows_the_newest_run(page, tpcds_run, shots):
    page.open(LIVE_UID)
    assert page.variable_value("Application") == tpcds_run.app_id
    page.screenshot(shots / "live-opened-plainly.png")
    check_clean(page, "live dashboard opened with no clicks")


@pytest.mark.parametrize("uid", [LIVE_UID, SUMMARY_UID])
def test_a_run_picked_from_the_picker_fills_every_panel(page, metrics_run, tpcds_run, shots, uid):
    page.open(uid, f"from={metrics_run.started_ms - 60_000}&to=now")
    page.pick("Application", metrics_run.app_id)
    assert page.variable_value("Application") == metrics_run.app_id
    page.screenshot(shots / f"{uid}-metrics-run.png")
    check_clean(page, f"{uid}, metrics run picked")
    # Every panel was drawn and so checked: a panel beyond the viewport is never loaded.
    board = next(b for b in dashboards.build().values() if b["uid"] == uid)
    titles = {p["title"] for top in board["panels"] for p in [top, *top.get("panels", [])] if p["type"] != "row"}
    assert titles <= {view.title for view in page.panels()}, "panels never drawn: viewport too short?"


def test_the_summary_of_the_tpcds_run_names_its_queries(page, tpcds_run, shots):
    page.open(SUMMARY_UID)
    assert page.variable_value("Application") == tpcds_run.app_id
    page.screenshot(shots / "summary-tpcds.png")
    check_clean(page, "summary of the TPC-DS run")
    text = "\n".join(line for view in page.panels() for line in view.lines)
    assert "q3" in text and "q7" in text, "the summary does not name the TPC-DS queries that ran"


def test_a_row_of_the_applications_table_opens_that_run_over_its_own_time_range(page, metrics_run, tpcds_run):
    page.open(LIVE_UID)
    # One row per run: its RUNNING and FINISHED points merged into one.
    listed = next(view for view in page.panels() if view.title == "Applications")
    ids = [line for line in listed.lines if re.fullmatch(r"(app|local)-[0-9-]+", line)]
    assert metrics_run.app_id in ids and tpcds_run.app_id in ids and len(ids) == len(set(ids)), listed.lines
    columns = ["started", "applicationid", "name", "user", "Spark", "run time"]
    assert [line for line in listed.lines if line in columns] == columns, listed.lines
    table = page.page.get_by_test_id("data-testid Panel header Applications")
    table.get_by_text(metrics_run.app_id, exact=True).first.click()
    page.page.get_by_role("link", name="Summary of this application").first.click()
    page.page.wait_for_url(lambda url: f"/d/{SUMMARY_UID}" in url)
    page.wait_loaded()
    query = parse_qs(urlparse(page.page.url).query)
    assert query["var-applicationid"] == [metrics_run.app_id]
    # The run's own range: from its start (the annotator's, up to a few seconds after
    # spark-submit began) to its end.
    start, end = int(query["from"][0]), int(query["to"][0])
    assert metrics_run.started_ms <= start < end <= metrics_run.ended_ms, (start, end, metrics_run)
    assert page.variable_value("Application") == metrics_run.app_id


def test_a_broken_query_is_caught_by_the_browser_check(page, stack, metrics_run):
    """The check itself can fail: a panel whose query InfluxDB rejects shows
    an error, and check_clean reports it (a dashboard posted for this test only)."""
    board = {"uid": "sparkscope-broken-probe", "title": "probe", "schemaVersion": 38,
             "panels": [{"id": 1, "type": "stat", "title": "Broken", "gridPos": {"h": 4, "w": 6, "x": 0, "y": 0},
                         "datasource": {"type": "influxdb", "uid": "sparkscope-influxdb"},
                         "targets": [{"refId": "A", "rawQuery": True, "resultFormat": "time_series",
                                      "datasource": {"type": "influxdb", "uid": "sparkscope-influxdb"},
                                      "query": 'SELECT mean("value") FROM "JVMHeapMemory" WHERE '
                                               '"applicationid" = \'$undefined_variable\' AND $timeFilter '
                                               'GROUP BY time(10s) fill(nonsense)'}]}]}
    stack.grafana.request("/api/dashboards/db", {"dashboard": board, "overwrite": True})
    try:
        page.open(board["uid"])
        with pytest.raises(AssertionError) as caught:
            check_clean(page, "probe")
        message = str(caught.value)
        assert "$undefined_variable" in message and "Broken" in message, message
    finally:
        stack.grafana.request(f"/api/dashboards/uid/{board['uid']}", method="DELETE")
