"""The dashboards in dashboards/: a lint of their rules, and every query of
every panel run through Grafana's /api/ds/query against a real Spark run that
shuffles, caches, spills and writes files (tests/jobs/metrics_job.py)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from sparkscope import dashboards
from sparkscope.dashboards.queries import WHOLE_DISKS, is_counter
from sparkscope.stack import influx
from sparkscope.stack.settings import ROOT
from support.grafana_api import (BROWSER_BUILTINS, SERVER_MACROS, defined_variables, frame_rows, substitute,
                                 used_variables)

BOARDS = {path.name: json.loads(path.read_text()) for path in sorted((ROOT / "dashboards").glob("*.json"))}
DATASOURCE_UIDS = {"sparkscope-influxdb", "__expr__"}
RATE_FUNCTIONS = ("non_negative_derivative", "derivative", "difference", "non_negative_difference")
SPARK_MEASUREMENTS = sorted({line.split(".", 4)[4] for line in
                             (ROOT / "tests" / "data" / "spark-3.5.9-metric-names.txt").read_text().split()
                             if line.count(".") >= 4})


# Panels that are empty on a healthy machine, and the test that fills them.
EMPTY_ON_A_HEALTHY_HOST = {
    "Block I/O outliers": "only I/Os slower than 100 ms; tests/test_disks.py injects a slow disk",
}


def panels(board: dict) -> list[dict]:
    return [p for top in board["panels"] for p in [top, *top.get("panels", [])] if p["type"] != "row"]


def selects(query: str) -> list[tuple[str, str]]:
    """(select list, source) of every SELECT reading a measurement directly:
    a SELECT over a subquery has no source of its own."""
    out = []
    for match in re.finditer(r"SELECT (.*?) FROM (?:\"[^\"]+\"\.)?(\"[^\"]+\"|/(?:[^/\\]|\\.)+/|\()", query):
        if match.group(2) != "(":
            out.append((match.group(1), match.group(2)))
    return out


def measurements(source: str) -> list[str]:
    if source.startswith("/"):
        pattern = re.compile(source[1:-1])
        matched = [m for m in SPARK_MEASUREMENTS if pattern.search(m)]
        assert matched, f"{source} matches no measurement Spark sends"
        return matched
    return [source.strip('"')]


def grouped_by_executor(query: str) -> bool:
    """Whether the outermost SELECT gives one series per executor."""
    outer = query.rsplit(")", 1)[-1] if "(SELECT" in query else query
    return "GROUP BY" in outer and '"executorid"' in outer.split("GROUP BY", 1)[1]


PANELS = [(name, panel) for name, board in BOARDS.items() for panel in panels(board)]
PANEL_IDS = [f"{name}:{panel['title']}" for name, panel in PANELS]
# Dashboards that the metrics run cannot fill, and the test that fills and checks them.
FILLED_ELSEWHERE = {"spark-profiles.json": "tests/test_profiler.py profiles a run and checks every panel"}
RUN_PANELS = [(name, panel) for name, panel in PANELS if name not in FILLED_ELSEWHERE]
RUN_BOARDS = sorted(name for name in BOARDS if name not in FILLED_ELSEWHERE)


# ------------------------------------------------------------------ lint

def test_checked_in_dashboards_are_what_the_builder_writes():
    built = dashboards.build()
    assert sorted(built) == sorted(BOARDS), "dashboards/ and sparkscope.dashboards.build() list different files"
    for name, board in built.items():
        assert (ROOT / "dashboards" / name).read_text() == dashboards.render(board), (
            f"dashboards/{name} differs from src/sparkscope/dashboards/: edit the builder, then run "
            ".venv/bin/python -m sparkscope.dashboards")


def queries_of(board: dict) -> list[tuple[str, str]]:
    """(where, text) of every query and link URL in a dashboard."""
    out = [(f"panel {p['title']}", t["query"]) for p in panels(board) for t in p["targets"] if "query" in t]
    out += [(f"panel {p['title']} link", link["url"]) for p in panels(board)
            for link in p["fieldConfig"]["defaults"].get("links", [])]
    out += [(f"variable {v['name']}", v["query"]) for v in board["templating"]["list"] if v["type"] == "query"]
    out += [(f"annotation {a['name']}", a["target"]["query"]) for a in board["annotations"]["list"]]
    return out


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_every_variable_a_query_uses_is_defined_by_its_dashboard_or_grafana(name):
    # Grafana leaves an undefined $name as literal text, so such a query
    # silently matches nothing: the summary's tables once used $executorid.
    board = BOARDS[name]
    known = defined_variables(board) | set(BROWSER_BUILTINS) | set(SERVER_MACROS) | {"__data", "__value",
                                                                                       "__url_time_range"}
    undefined = {(where, var) for where, text in queries_of(board) for var in used_variables(text) - known}
    assert not undefined, f"{name}: variables it does not define: {sorted(undefined)}"


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_variable_queries_name_the_time_filter_once(name):
    # The UI fills only the first $timeFilter of a variable's query (InfluxDB's
    # metricFindQuery); the next reaches InfluxDB literally and fails.
    for variable in BOARDS[name]["templating"]["list"]:
        assert variable.get("query", "").count("$timeFilter") <= 1, variable["name"]


def test_the_lint_catches_an_undefined_variable():
    board = json.loads(json.dumps(BOARDS["spark-application.json"]))
    board["panels"][1]["targets"][0]["query"] += " AND \"executorid\" =~ /^$executorid$/"
    used = {var for _, text in queries_of(board) for var in used_variables(text)}
    assert "executorid" in used - defined_variables(board)


def test_dashboard_uids_and_titles_are_unique():
    uids = [board["uid"] for board in BOARDS.values()]
    titles = [board["title"] for board in BOARDS.values()]
    assert len(set(uids)) == len(uids) and len(set(titles)) == len(titles)


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_panel_ids_are_unique_and_every_panel_fits_the_grid(name):
    board = BOARDS[name]
    ids = [p["id"] for top in board["panels"] for p in [top, *top.get("panels", [])]]
    assert len(set(ids)) == len(ids), ids
    for panel in panels(board):
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24 and grid["h"] > 0, panel["title"]


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_every_datasource_is_named_by_uid(name):
    board = BOARDS[name]
    refs = [p["datasource"] for p in panels(board)]
    refs += [t["datasource"] for p in panels(board) for t in p["targets"]]
    refs += [v["datasource"] for v in board["templating"]["list"] if "datasource" in v]
    refs += [a["datasource"] for a in board["annotations"]["list"]]
    assert refs and all(isinstance(r, dict) and r.get("uid") in DATASOURCE_UIDS for r in refs), refs


@pytest.mark.parametrize("name,panel", PANELS, ids=PANEL_IDS)
def test_every_panel_has_a_unit_and_a_description_naming_what_it_needs(name, panel):
    assert panel["fieldConfig"]["defaults"].get("unit"), f"{panel['title']}: no unit"
    description = panel.get("description", "")
    assert len(description) > 60, f"{panel['title']}: description too short to say how to read it"
    assert re.search(r"Needs |From Telegraf", description), f"{panel['title']}: says not which setting it needs"


@pytest.mark.parametrize("name,panel", PANELS, ids=PANEL_IDS)
def test_gauges_are_never_rated_and_counters_never_averaged(name, panel):
    for target in panel["targets"]:
        for select_list, source in selects(target.get("query", "")):
            for measurement in measurements(source):
                counter = is_counter(measurement)
                if counter:
                    assert not re.search(r"\b(mean|median|sum)\(", select_list), (
                        f"{panel['title']}: averages counter {measurement}: {select_list}")
                else:
                    assert not any(f"{fn}(" in select_list for fn in RATE_FUNCTIONS), (
                        f"{panel['title']}: rate of gauge {measurement}: {select_list}")


def test_counter_classification_matches_spark_names():
    # Every Dropwizard counter Spark sends ends in .count; the cumulative
    # ExecutorMetrics (GC time/count) and jvmCpuTime are counters too.
    for measurement in SPARK_MEASUREMENTS:
        if measurement.endswith(".count") or measurement in ("MinorGCCount", "jvmCpuTime"):
            assert is_counter(measurement), measurement
        if measurement in ("JVMHeapMemory", "threadpool.activeTasks", "OnHeapUnifiedMemory", "heap.used"):
            assert not is_counter(measurement), measurement


@pytest.mark.parametrize("name,panel", PANELS, ids=PANEL_IDS)
def test_per_executor_graphs_are_labelled_by_executor(name, panel):
    for target in panel["targets"]:
        query = target.get("query", "")
        if panel["type"] == "timeseries" and grouped_by_executor(query):
            assert "$tag_executorid" in target.get("alias", ""), f"{panel['title']}: legend without executor id"


# ------------------------------------------------------------------ real run

@pytest.fixture(scope="module")
def grafana(stack):
    if stack.grafana is None:
        pytest.skip("native Grafana unavailable: see test_grafana.py::test_native_grafana_was_built")
    return stack.grafana


def ui_variables(run) -> dict[str, str]:
    """What the UI substitutes with Prefix=All, Application=this run, Executor=All, Device=All, Interval=auto
    (10 s at the least), and the raw samples that the hidden $rp and $mean_field pick for a
    range of minutes; substitute() uses only those the dashboard defines."""
    return {"username": ".*", "applicationid": run.app_id, "executorid": ".*", "interval": "10s",
            "device": WHOLE_DISKS, "rp": "sparkscope", "mean_field": "value",
            "peak_raw_samples": "", "peak_rolled_samples": "", "peak_rp": "sparkscope",
            # the run's executors and driver, all drawn (fewer than $top), as Grafana writes a multi-value regex
            "top": "20", "drawn": "(0|1|driver)"}


def run_window(run) -> tuple[int, int]:
    return run.started_ms - 60_000, run.ended_ms + 60_000


def executors_of(frames: list[dict]) -> set[str]:
    found = set()
    for frame in frames:
        for field in frame["schema"]["fields"]:
            if "executorid" in (field.get("labels") or {}):
                found.add(field["labels"]["executorid"])
    found |= {row["executorid"] for row in frame_rows(frames) if row.get("executorid")}
    return found


def non_empty(frames: list[dict]) -> bool:
    for frame in frames:
        values = frame.get("data", {}).get("values", [])
        if any(v is not None for column in values[1:] for v in column):
            return True
    return False


@pytest.mark.parametrize("name,panel", RUN_PANELS, ids=[f"{n}:{p['title']}" for n, p in RUN_PANELS])
def test_every_panel_query_returns_data_for_the_run(stack, grafana, metrics_run, name, panel):
    board, (start, end) = BOARDS[name], run_window(metrics_run)
    # Panels that read the end of the range ("now"): end it mid-run for them.
    if any("${__to}" in t.get("query", "") for t in panel["targets"]):
        end = (metrics_run.started_ms + metrics_run.ended_ms) // 2
    values = ui_variables(metrics_run)
    if any("$task_scope" in t.get("query", "") for t in panel["targets"]):
        values = resolve_hidden(grafana, board, values, ("task_totals", "task_scope"), start, end)
    targets = [dict(t, query=substitute(t["query"], board, values, start, end))
               if "query" in t else dict(t) for t in panel["targets"]]
    for target in targets:
        target.update(intervalMs=10_000, maxDataPoints=500)
    scoped = {t["refId"] for t in panel["targets"] if "$task_scope" in t.get("query", "")}
    sent_names = {row[0] for series in stack.influx("SHOW MEASUREMENTS") for row in series["values"]}
    frames = grafana.query(targets, str(start), str(end))
    for target in targets:
        if target.get("hide"):
            continue
        got = frames.get(target["refId"], [])
        if panel["title"] in EMPTY_ON_A_HEALTHY_HOST:
            continue
        query = target.get("query", "")
        if target["refId"] in scoped and not non_empty(got):
            # One of two queries under one alias by design (queries.task_time): the other must draw.
            twins = [t for t in targets if t.get("alias") == target.get("alias") and t is not target]
            assert len(twins) == 1 and non_empty(frames.get(twins[0]["refId"], [])), f"{target.get('alias')}: no data"
            continue
        read = {source.strip('"') for _, source in selects(query)}
        if read and not read & sent_names and not non_empty(got):
            continue  # read by name for runs that send it: a file system scheme or a collector this run lacks
        assert non_empty(got), f"{panel['title']} {target['refId']}: no data: {target.get('query') or target}"
        if not grouped_by_executor(query):
            continue
        # One series per executor that sent the metric (all of them for most).
        source = selects(query)[-1][1]
        sent = influx.query(stack.settings.influx_url,
                            f'SHOW TAG VALUES FROM {source} WITH KEY = "executorid" '
                            f"WHERE \"applicationid\" = '{metrics_run.app_id}'", stack.settings.database)
        expected = {value for series in sent for _, value in series["values"]}
        assert expected >= {"0", "1"}, f"{source}: executors 0 and 1 sent nothing: {expected}"
        assert executors_of(got) == expected, f"{panel['title']} {target['refId']}: {sorted(executors_of(got))}"


def test_the_summary_numbers_agree_with_influxdb(stack, grafana, metrics_run):
    """Spot-check that the summary's aggregation is right, not just non-empty:
    peak heap of any executor = the max InfluxDB holds."""
    board = BOARDS["spark-application.json"]
    panel = next(p for p in panels(board) if p["title"] == "Peak memory")
    start, end = run_window(metrics_run)
    target = dict(panel["targets"][0],
                  query=substitute(panel["targets"][0]["query"], board, ui_variables(metrics_run), start, end))
    frames = grafana.query([target], str(start), str(end))
    shown = max(v for f in frames["A"] for v in f["data"]["values"][1] if v is not None)
    stored = stack.influx(f"SELECT max(\"value\") FROM \"JVMHeapMemory\" WHERE \"applicationid\" = "
                          f"'{metrics_run.app_id}' AND \"executorid\" != 'driver'")[0]["values"][0][1]
    assert shown == stored > 50 * 2**20



def resolve_hidden(grafana, board: dict, values: dict[str, str], names: tuple[str, ...], start: int,
                   end: int) -> dict[str, str]:
    """Hidden variables resolved through Grafana in the board's order, each
    with those before it, as the browser does; a multi-value one as the
    regex Grafana writes for it, an empty answer as empty."""
    out = dict(values)
    for variable in board["templating"]["list"]:
        if variable["name"] not in names:
            continue
        # Grafana's UI fills only the first $timeFilter of a variable's query (the
        # server would fill them all here): a second one reaches InfluxDB as is.
        assert variable["query"].count("$timeFilter") <= 1, f"${variable['name']}: $timeFilter twice"
        target = {"refId": "A", "datasource": variable["datasource"], "rawQuery": True, "resultFormat": "table",
                  "query": substitute(variable["query"], board, out, start, end)}
        frames = grafana.query([target], str(start), str(end))["A"]
        # A raw query comes back as a (time, value) frame per selected column; the first is the values.
        found = [str(v) for v in (frames[0]["data"]["values"][1] if frames else [])]
        out[variable["name"]] = ("(" + "|".join(found) + ")" if variable.get("multi") and len(found) > 1
                                 else (found[0] if found else ""))
    return out


def test_task_time_reads_the_annotators_totals_for_all_executors_and_their_own_counters_for_a_pick(
        stack, grafana, metrics_run):
    """The live task time graph, its hidden $task_scope resolved through
    Grafana as the browser does: with Executor = All it reads the
    annotator's per-application totals (one series a counter), with
    executors picked, or over a range without totals, their own counters.
    The totals end at exactly the sum of the executors' last counter values,
    and the graph drawn from them adds up to those totals."""
    board = BOARDS["spark-executors.json"]
    panel = next(p for p in panels(board) if p["title"] == "Task time by component")
    start, end = run_window(metrics_run)
    names = ("task_totals", "task_scope")
    every = resolve_hidden(grafana, board, ui_variables(metrics_run), names, start, end)
    picked = resolve_hidden(grafana, board, dict(ui_variables(metrics_run), executorid="(0|1)"), names, start, end)
    earlier = resolve_hidden(grafana, board, ui_variables(metrics_run), names, start - 7_200_000, start - 3_600_000)
    assert (every["task_scope"], picked["task_scope"], earlier["task_scope"]) == ("(?:)", "(?:.+)", "(?:.+)"), (
        every, picked, earlier)
    app = f"\"applicationid\" = '{metrics_run.app_id}'"
    by_alias: dict[str, dict[str, dict]] = {}
    for target in panel["targets"]:
        measurement = re.search(r'FROM "\$rp"\."([^"]+)"', target["query"]).group(1)
        side = "totals" if measurement.startswith("sparkscope_app.") else "executors"
        by_alias.setdefault(target["alias"], {})[side] = dict(target, measurement=measurement)
    assert len(by_alias) == 6 and all(len(pair) == 2 for pair in by_alias.values()), by_alias.keys()
    for alias, pair in by_alias.items():
        counter = pair["executors"]["measurement"]
        assert pair["totals"]["measurement"] == f"sparkscope_app.{counter}", (alias, pair)
        total = stack.influx(f'SELECT last("value") FROM "sparkscope_app.{counter}" WHERE {app}')[0]["values"][0][1]
        summed = stack.influx(f'SELECT sum("v") FROM (SELECT last("value") AS "v" FROM "{counter}" WHERE {app} '
                              'GROUP BY "executorid")')[0]["values"][0][1]
        assert total == summed, (counter, total, summed)
        scale = float(re.search(r"1s\) / (\d+)", pair["totals"]["query"]).group(1))
        # The totals' first 10 s bucket (the graphs' $interval here): the rates start after it.
        first_ms, first = stack.influx(
            f'SELECT max("value") FROM "sparkscope_app.{counter}" WHERE {app} AND time >= {start}ms '
            f"AND time <= {end}ms GROUP BY time(10s) fill(none) LIMIT 1")[0]["values"][0]
        drawn = {}
        for name, values, drawing in (("all", every, "totals"), ("picked", picked, "executors")):
            queries = [dict(pair[side], query=substitute(pair[side]["query"], board, values, start, end),
                            refId=side, intervalMs=10_000, maxDataPoints=500) for side in pair]
            for query in queries:
                query.pop("measurement")
            frames = grafana.query(queries, str(start), str(end))
            # The scope's side draws one line; the other side returns nothing.
            assert len(frames.get(drawing, [])) == 1 and not non_empty(
                frames.get("executors" if drawing == "totals" else "totals", [])), (name, alias, frames)
            times, rates = frames[drawing][0]["data"]["values"][:2]
            # Each bucket's rate times the time since the bucket before it: the counter's growth.
            times = [first_ms, *times] if name == "all" else times
            spans = zip(times, times[1:], rates[-len(times) + 1:])
            drawn[name] = sum(r * (t - before) / 1000 for before, t, r in spans)
        if counter in ("runTime.count", "cpuTime.count"):
            assert total > 0 and drawn["all"] > 0 and drawn["picked"] > 0, (counter, total, drawn)
        # All: the graph draws the totals' whole growth after their first bucket.
        assert drawn["all"] * scale == pytest.approx(total - first, rel=1e-6, abs=1e-6), (counter, drawn, total)
        # A pick of every executor draws their counters' growth after each one's first bucket: not more.
        assert drawn["picked"] * scale <= total * (1 + 1e-9), (counter, drawn, total)


def test_memory_peaks_read_through_the_rollup_check_equal_the_raw_highest(stack, grafana, metrics_run):
    """The sampled peak table reads the minute rollup for the whole minutes of
    the range when $peak_rp says it holds every raw sample, raw samples
    otherwise: either way each column equals max() over the raw samples.
    The range runs to now, so once the run is minutes old its minutes are
    rolled up by the stack's own continuous query and read from there."""
    board = BOARDS["spark-application.json"]
    panel = next(p for p in panels(board) if p["title"] == "Peak memory per executor, sampled")
    start, end = metrics_run.started_ms - 60_000, max(int(time.time() * 1000), metrics_run.ended_ms + 60_000)
    values = resolve_hidden(grafana, board, ui_variables(metrics_run),
                            ("peak_raw_samples", "peak_rolled_samples", "peak_rp"), start, end)
    assert values["peak_rp"] in ("sparkscope", "sparkscope_1m"), values
    for target in panel["targets"]:
        # A gauge through $peak_rp, or one whose last value is its highest (heap.max) read plainly.
        measurement = re.search(r'FROM (?:"\$peak_rp"\.)?(\S+) WHERE', target["query"]).group(1)
        query = dict(target, query=substitute(target["query"], board, values, start, end))
        shown = {f["schema"]["fields"][1]["labels"]["executorid"]: f["data"]["values"][1][0]
                 for f in grafana.query([query], str(start), str(end))[target["refId"]]}
        stored = {s["tags"]["executorid"]: s["values"][0][1] for s in stack.influx(
            f'SELECT max("value") FROM {measurement} WHERE "applicationid" = \'{metrics_run.app_id}\' '
            f'AND time >= {start}ms AND time <= {end}ms GROUP BY "executorid"')}
        assert shown == stored and shown, (measurement, values, shown, stored)


def test_sizing_reads_the_heap_once_for_its_size_and_the_unified_capacity(stack, grafana, metrics_run):
    """The sizing table's configured heap and the unified capacity Spark
    derives from it come from one read of heap.max, as two columns: the heap
    equal to its highest raw sample, the capacity (heap - 300 MiB) x 0.6."""
    board = BOARDS["spark-application.json"]
    panel = next(p for p in panels(board) if p["title"].startswith("Sizing:"))
    heap_targets = [t for t in panel["targets"] if '"heap.max"' in t.get("query", "")]
    assert len(heap_targets) == 1, [t.get("query") for t in panel["targets"]]
    start, end = metrics_run.started_ms - 60_000, max(int(time.time() * 1000), metrics_run.ended_ms + 60_000)
    values = resolve_hidden(grafana, board, ui_variables(metrics_run),
                            ("peak_raw_samples", "peak_rolled_samples", "peak_rp"), start, end)
    target = heap_targets[0]
    query = dict(target, query=substitute(target["query"], board, values, start, end))
    rows: dict[str, dict[str, float]] = {}
    for frame in grafana.query([query], str(start), str(end))[target["refId"]]:
        field = frame["schema"]["fields"][1]  # one (time, value) frame per executor and column
        rows.setdefault(field["labels"]["executorid"], {})[field["config"]["displayNameFromDS"]] = (
            frame["data"]["values"][1][0])
    stored = {s["tags"]["executorid"]: s["values"][0][1] for s in stack.influx(
        f'SELECT max("value") FROM "heap.max" WHERE "applicationid" = \'{metrics_run.app_id}\' '
        f'AND time >= {start}ms AND time <= {end}ms GROUP BY "executorid"')}
    assert stored and set(rows) == set(stored), (rows, stored)
    for executor, heap in stored.items():
        assert rows[executor]["heap (sampled)"] == heap, (executor, rows[executor], heap)
        assert rows[executor]["unified capacity at fraction 0.6"] == pytest.approx((heap - 300 * 2**20) * 0.6), (
            executor, rows[executor])


@pytest.mark.parametrize("name", ["spark-executors.json", "spark-application.json"])
def test_graphs_and_the_sampled_peak_table_show_the_executors_with_the_highest_heap_peaks(
        stack, grafana, metrics_run, name):
    """$drawn, what the live per-executor graphs and the summary's sampled
    peak table filter on: the picked executors, at most $top (Executors
    drawn, Executors shown), ranked by their highest heap sample in the
    range (the summary's through $peak_rp, as its columns read)."""
    board = BOARDS[name]
    start, end = run_window(metrics_run)
    ranked = sorted(((s["values"][0][1], s["tags"]["executorid"]) for s in stack.influx(
        f'SELECT max("value") FROM "JVMHeapMemory" WHERE "applicationid" = \'{metrics_run.app_id}\' '
        f'AND time >= {start}ms AND time <= {end}ms GROUP BY "executorid"')), reverse=True)
    assert len(ranked) == 3, ranked
    hidden = ("peak_raw_samples", "peak_rolled_samples", "peak_rp", "drawn")
    for top in (1, 2, 100000):
        values = resolve_hidden(grafana, board, dict(ui_variables(metrics_run), top=str(top)), hidden,
                                start, end)
        wanted = sorted(executor for _, executor in ranked[:top])
        assert sorted(values["drawn"].strip("()").split("|")) == wanted, (top, values["drawn"], ranked)
    if name == "spark-application.json":
        return  # the summary has no Executor picker
    # Picking executors in Executor ranks among those only.
    picked = dict(ui_variables(metrics_run), top="1", executorid="(0|1)")
    best_of_two = max((peak, e) for peak, e in ranked if e in ("0", "1"))[1]
    assert resolve_hidden(grafana, board, picked, ("drawn",), start, end)["drawn"] == best_of_two


def test_counter_totals_read_by_their_last_value_equal_their_highest(stack, grafana, metrics_run):
    """The per-executor counters read last() (fast: the end of each series),
    which is right only if each counter's last value is its highest: checked
    on a real run, column by column, against max() straight from InfluxDB."""
    board = BOARDS["spark-application.json"]
    panel = next(p for p in panels(board) if p["title"] == "Work per executor")
    start, end = run_window(metrics_run)
    for target in panel["targets"]:
        assert "last(" in target["query"], target["query"]
        measurement = re.search(r'FROM "([^"]+)" WHERE', target["query"]).group(1)
        query = dict(target, query=substitute(target["query"], board, ui_variables(metrics_run), start, end))
        # One (time, value) frame per executor, its id a label of the value field.
        shown = {f["schema"]["fields"][1]["labels"]["executorid"]: f["data"]["values"][1][0]
                 for f in grafana.query([query], str(start), str(end))[target["refId"]]}
        stored = {s["tags"]["executorid"]: s["values"][0][1] for s in stack.influx(
            f'SELECT max("value") FROM "{measurement}" WHERE "applicationid" = \'{metrics_run.app_id}\' '
            f'AND time >= {start}ms AND time <= {end}ms GROUP BY "executorid"')}
        assert shown == stored and len(shown) >= 2, (measurement, shown, stored)


def test_executors_alive_counts_those_reporting_at_the_end_of_the_range(grafana, metrics_run):
    """Mid-run both executors report; a minute after the run none does (the panel then shows 0)."""
    board = BOARDS["spark-executors.json"]
    panel = next(p for p in panels(board) if p["title"] == "Executors alive")
    start, _ = run_window(metrics_run)

    def alive(end_ms: int) -> list:
        target = dict(panel["targets"][0],
                      query=substitute(panel["targets"][0]["query"], board, ui_variables(metrics_run), start, end_ms))
        return [v for f in grafana.query([target], str(start), str(end_ms))["A"]
                for v in f["data"]["values"][1] if v is not None]

    assert alive((metrics_run.started_ms + metrics_run.ended_ms) // 2) == [2]
    assert alive(metrics_run.ended_ms + 60_000) == []
    assert panel["fieldConfig"]["defaults"]["noValue"] == "0"


def busy_whole_disks() -> set[str]:
    """This machine's whole disks (what Device=All matches) that have done I/O."""
    found = set()
    for line in Path("/proc/diskstats").read_text().splitlines():
        cols = line.split()
        if re.fullmatch(WHOLE_DISKS, cols[2]) and int(cols[3]) + int(cols[7]) > 0:
            found.add(cols[2])
    return found


@pytest.mark.parametrize("name", RUN_BOARDS)
def test_variable_queries_offer_this_run_and_its_executors(grafana, metrics_run, name):
    board, (start, end) = BOARDS[name], run_window(metrics_run)
    given = ui_variables(metrics_run)
    if "task_totals" in defined_variables(board):  # $task_scope's query reads it
        given = resolve_hidden(grafana, board, given, ("task_totals",), start, end)
    for variable in board["templating"]["list"]:
        if variable["type"] != "query":
            continue
        target = {"refId": "A", "datasource": variable["datasource"], "rawQuery": True,
                  "query": substitute(variable["query"], board, given, start, end),
                  "resultFormat": "table"}
        frames = grafana.query([target], str(start), str(end))["A"]
        values = {row.get("value") or row.get("Value") for row in frame_rows(frames)}
        values |= {v for f in frames for column in f["data"]["values"][1:] for v in column}
        wanted = {"username": {"spark"}, "applicationid": {metrics_run.app_id},
                  "executorid": {"0", "1", "driver"}, "device": busy_whole_disks(),
                  "rp": {"sparkscope"}, "mean_field": {"value"},
                  # counts of a few minutes' samples, or none: any answer; the source one of two
                  "peak_raw_samples": set(), "peak_rolled_samples": set(), "peak_rp": set(),
                  "drawn": {"0", "1", "driver"},
                  # a count of the annotator's totals: any; Executor = All on a run with them: the totals
                  "task_totals": set(), "task_scope": {"(?:)"}}[variable["name"]]
        assert wanted <= values, f"variable {variable['name']}: {values}"
        if variable["name"] == "peak_rp":
            assert len(values & {"sparkscope", "sparkscope_1m"}) == 1, values


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_annotation_queries_run_and_show_the_runs_queries(grafana, metrics_run, name):
    board, (start, end) = BOARDS[name], run_window(metrics_run)
    for annotation in board["annotations"]["list"]:
        target = dict(annotation["target"], refId="A", datasource=annotation["datasource"],
                      query=substitute(annotation["target"]["query"], board, ui_variables(metrics_run), start, end))
        frames = grafana.query([target], str(start), str(end))["A"]
        rows = frame_rows(frames)
        if annotation["name"] in ("SQL queries", "Jobs", "Stages", "Executors added/removed"):
            assert rows and all(row.get("text") for row in rows), f"{annotation['name']}: {rows[:3]}"


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_grafana_serves_the_dashboard_as_provisioned(grafana, name):
    local = BOARDS[name]
    served = grafana.dashboard(local["uid"])
    assert served["title"] == local["title"]
    assert [p["title"] for p in panels(served)] == [p["title"] for p in panels(local)]
    search = grafana.request(f"/api/search?query={local['title'].replace(' ', '%20')}")
    assert [hit["uid"] for hit in search if hit.get("type") == "dash-db"] == [local["uid"]]
