"""The dashboards in dashboards/: a lint of their rules, and every query of
every panel run through Grafana's /api/ds/query against a real Spark run that
shuffles, caches, spills and writes files (tests/jobs/metrics_job.py)."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from pathlib import Path

import pytest

from sparkscope import dashboards
from sparkscope.dashboards.queries import WHOLE_DISKS, is_counter
from sparkscope.generate.steps import COMMAND
from sparkscope.store import influx
from sparkscope.settings import ROOT
from sparkscope_testkit.grafana12 import Dashboard12, ModelError
from sparkscope_testkit.grafana13 import RULE_SETS

BOARDS = {path.name: json.loads(path.read_text()) for path in sorted((ROOT / "dashboards").glob("*.json"))}
DATASOURCE_UIDS = {"sparkscope-influxdb", "__expr__"}
RATE_FUNCTIONS = ("non_negative_derivative", "derivative", "difference", "non_negative_difference")
SPARK_MEASUREMENTS = sorted({line.split(".", 4)[4] for line in
                             (ROOT / "tests" / "data" / "spark-3.5.9-metric-names.txt").read_text().split()
                             if line.count(".") >= 4})


# Panels that are empty on a healthy machine, and the test that fills them.
METRICS_APP_NAME = "sparkscope-test-metrics"  # tests/jobs/metrics_job.py's appName
EMPTY_ON_A_HEALTHY_HOST = {
    "Block I/O outliers": "only I/Os slower than 100 ms; tests/test_disks.py injects a slow disk",
    **{title: "only runs with streaming queries; tests/test_streaming.py runs two"
       for title in ("Input rate vs processing rate", "Batch duration vs trigger interval",
                     "Event-time lag and source backlog", "State rows and memory per stateful operator")},
    "Task time by Spark Connect session": "only a Spark Connect server's jobs; tests/test_connect.py runs one",
}
# Targets (panel, alias) empty for a run without the condition they show, and the test that has it.
EMPTY_WITHOUT = {
    ("Container memory against its limit", "$tag_executorid limit"):
        "only containers with a memory limit; tests/test_containers.py runs executors in limited cgroups",
    ("What fills the container: JVM, Python, other", "limit"):
        "only containers with a memory limit; tests/test_containers.py runs executors in limited cgroups",
    ("Run time: this run and its job's usual", "usual (median)"):
        "only runs of a job that ran before; tests/test_compare.py runs one job six times and checks the row",
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
            f"dashboards/{name} differs from src/sparkscope/dashboards/: edit the builder, then run {COMMAND}")


def queries_of(board: dict) -> list[tuple[str, str]]:
    """(where, text) of every query and link URL in a dashboard."""
    out = [(f"panel {p['title']}", t["query"]) for p in panels(board) for t in p["targets"] if "query" in t]
    out += [(f"panel {p['title']} link", link["url"]) for p in panels(board)
            for link in p["fieldConfig"]["defaults"].get("links", [])]
    out += [(f"variable {v['name']}", v["query"]) for v in board["templating"]["list"] if v["type"] == "query"]
    out += [(f"annotation {a['name']}", a["target"]["query"]) for a in board["annotations"]["list"]]
    return out


# What Grafana 12 fills besides a dashboard's own variables, in our queries and links.
GRAFANA_BUILTINS = {"__from", "__to", "timeFilter", "__interval", "__interval_ms", "__data", "__value",
                    "__url_time_range", "__dashboard"}
VARIABLE = re.compile(r"\$\{(\w+)[^}]*\}|\$(\w+)|\[\[(\w+)[^\]]*\]\]")


def defined_variables(board: dict) -> set[str]:
    return {v["name"] for v in board["templating"]["list"]}


def used_variables(text: str) -> set[str]:
    """Variables a query or link uses; $tag_x, $col and $m are alias patterns, not in queries."""
    return {m.group(1) or m.group(2) or m.group(3) for m in VARIABLE.finditer(text)}


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_every_variable_a_query_uses_is_defined_by_its_dashboard_or_grafana(name):
    # Grafana leaves an undefined $name as literal text, so such a query
    # silently matches nothing: the summary's tables once used $executorid.
    board = BOARDS[name]
    known = defined_variables(board) | GRAFANA_BUILTINS
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
            read = set(re.findall(r'\(\s*"(\w+)"', select_list)) or {"value"}
            for measurement in measurements(source):
                kinds = {is_counter(measurement, field) for field in read}
                assert len(kinds) == 1, f"{panel['title']}: one select mixes counters and gauges: {select_list}"
                if kinds.pop():
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
# Each dashboard opened as Grafana 12.4 and as Grafana 13 open it
# (sparkscope_testkit/grafana12.py, grafana13.py): its variables resolved on the
# real InfluxDB, each query interpolated by that version's rules and sent as
# Grafana's backend sends it. Users run either, so every real-run test runs both.


@pytest.fixture(params=sorted(RULE_SETS), ids=sorted(RULE_SETS))
def rules(request):
    return RULE_SETS[request.param]


def run_window(run) -> tuple[int, int]:
    return run.started_ms - 60_000, run.ended_ms + 60_000


def opened(stack, run, name: str, start: int | None = None, end: int | None = None, rules=Dashboard12,
           **url_vars):
    """The dashboard on this run (as its link from the Applications table opens it)."""
    window = run_window(run)
    return stack.open_dashboard(BOARDS[name], window[0] if start is None else start,
                                window[1] if end is None else end, rules=rules,
                                url_vars={"applicationid": run.app_id, **url_vars})


def non_empty(series: list[dict]) -> bool:
    return any(v is not None for s in series for row in s.get("values", []) for v in row[1:])


def executors_of(series: list[dict]) -> set[str]:
    found = {s["tags"]["executorid"] for s in series if "executorid" in (s.get("tags") or {})}
    for s in series:
        if "executorid" in s["columns"]:
            column = s["columns"].index("executorid")
            found |= {row[column] for row in s["values"] if row[column]}
    return found


def by_executor(series: list[dict]) -> dict[str, float]:
    """{executor: value} of a query with one series per executor and one value each."""
    return {s["tags"]["executorid"]: s["values"][0][1] for s in series}


def stored_max(stack, run, measurement: str, start: int, end: int) -> dict[str, float]:
    return by_executor(stack.influx(
        f'SELECT max("value") FROM "{measurement}" WHERE "applicationid" = \'{run.app_id}\' '
        f'AND time >= {start}ms AND time <= {end}ms GROUP BY "executorid"'))


def picker_problems(dash, known: dict[str, set[str]]) -> list[str]:
    """What a person would call broken in the pickers: an option that is not
    one of the values the variable stands for (a number beside the run ids)."""
    problems = []
    for name, allowed in known.items():
        if name not in dash.variables:
            continue
        values = {value for _, value in dash.variables[name].options}
        if not values <= allowed:
            problems.append(f"${name} offers {sorted(values - allowed)[:5]} beside {sorted(values & allowed)[:5]}")
    return problems


def known_values(stack, run) -> dict[str, set[str]]:
    """Straight from InfluxDB: what each picker may hold."""
    def tag_values(measurement: str, key: str, where: str = "") -> set[str]:
        return {v for s in stack.influx(f'SHOW TAG VALUES FROM "{measurement}" WITH KEY = "{key}"{where}')
                for _, v in s["values"]}
    app = f" WHERE \"applicationid\" = '{run.app_id}'"
    executors = tag_values("JVMHeapMemory", "executorid", app)
    return {"username": tag_values("JVMHeapMemory", "username"), "applicationid": tag_values("JVMHeapMemory",
            "applicationid"), "executorid": executors, "drawn": executors, "device": tag_values("diskio", "name")}


@pytest.mark.parametrize("name", RUN_BOARDS)
def test_opened_plainly_the_dashboard_selects_the_newest_run_and_its_pickers_hold_only_ids(
        stack, metrics_run, name, rules):
    start, end = run_window(metrics_run)
    dash = stack.open_dashboard(BOARDS[name], start, end, rules=rules)
    # The newest run, straight from InfluxDB: the driver's first heap sample that is latest in the range.
    firsts = stack.influx('SELECT first("value") FROM "JVMHeapMemory" WHERE "executorid" = \'driver\' '
                          f'AND time >= {start}ms AND time <= {end}ms GROUP BY "applicationid"')
    newest = max(firsts, key=lambda s: s["values"][0][0])["tags"]["applicationid"]
    assert dash.variables["applicationid"].current == [newest]
    assert metrics_run.app_id in {v for _, v in dash.variables["applicationid"].options}
    assert not picker_problems(dash, known_values(stack, metrics_run))


def test_the_picker_check_fails_on_a_picker_that_selects_two_columns(stack, metrics_run, rules):
    """A run picker that also selects its first sample lists numbers in
    Grafana 12: the check above must see it (this is how the picker was).
    The Grafana 13 rules refuse such a picker outright (the plugin takes one
    field per frame, and which one is not modelled)."""
    board = json.loads(json.dumps(BOARDS["spark-executors.json"]))
    picker = next(v for v in board["templating"]["list"] if v["name"] == "applicationid")
    picker["query"] = ('SELECT "applicationid", "first" FROM (SELECT first("value") FROM "JVMHeapMemory" '
                       "WHERE \"executorid\" = 'driver' AND $timeFilter GROUP BY \"applicationid\") "
                       "ORDER BY time DESC")
    start, end = run_window(metrics_run)
    if rules is not Dashboard12:
        with pytest.raises(ModelError, match="select one column"):
            stack.open_dashboard(board, start, end, rules=rules)
        return
    dash = stack.open_dashboard(board, start, end, rules=rules)
    problems = picker_problems(dash, known_values(stack, metrics_run))
    assert any(p.startswith("$applicationid offers") for p in problems), problems


@pytest.mark.parametrize("name,panel", RUN_PANELS, ids=[f"{n}:{p['title']}" for n, p in RUN_PANELS])
def test_every_panel_query_returns_data_for_the_run(stack, metrics_run, name, panel, rules):
    start, end = run_window(metrics_run)
    # Panels that read the end of the range ("now"): end it mid-run for them.
    if any("${__to}" in t.get("query", "") for t in panel["targets"]):
        end = (metrics_run.started_ms + metrics_run.ended_ms) // 2
    dash = opened(stack, metrics_run, name, start, end, rules=rules)
    results = dash.run_panel(panel)
    scoped = {t["refId"] for t in panel["targets"] if "task_scope" in t.get("query", "")}
    sent_names = {row[0] for series in stack.influx("SHOW MEASUREMENTS") for row in series["values"]}
    for target in panel["targets"]:
        if target.get("hide") or panel["title"] in EMPTY_ON_A_HEALTHY_HOST:
            continue
        if (panel["title"], target.get("alias")) in EMPTY_WITHOUT:
            continue
        if "'NO_END_SEEN'" in target.get("query", ""):
            continue  # runs whose driver was killed: tests/test_faults.py kills one and reads this target
        got = results.get(target["refId"], [])
        query = target.get("query", "")
        if target["refId"] in scoped and not non_empty(got):
            # One of two queries under one alias by design (queries.task_time): the other must draw.
            twins = [t for t in panel["targets"] if t.get("alias") == target.get("alias") and t is not target]
            assert len(twins) == 1 and non_empty(results.get(twins[0]["refId"], [])), f"{target.get('alias')}: no data"
            continue
        read = {source.strip('"') for _, source in selects(query)}
        if read and not read & sent_names and not non_empty(got):
            continue  # read by name for runs that send it: a file system scheme or a collector this run lacks
        assert non_empty(got), f"{panel['title']} {target['refId']}: no data: {query or target}"
        if not grouped_by_executor(query):
            continue
        # One series per executor that sent the metric (all of them for most).
        source = selects(query)[-1][1]
        sent = influx.query(stack.settings.influx_reader,
                            f'SHOW TAG VALUES FROM {source} WITH KEY = "executorid" '
                            f"WHERE \"applicationid\" = '{metrics_run.app_id}'", stack.settings.database)
        expected = {value for series in sent for _, value in series["values"]}
        assert expected >= {"0", "1"}, f"{source}: executors 0 and 1 sent nothing: {expected}"
        assert executors_of(got) == expected, f"{panel['title']} {target['refId']}: {sorted(executors_of(got))}"


# Transformations run in Grafana's browser code, which the model does not
# run: each kind is named with what it does to our frames.
UNMODELLED_TRANSFORMATIONS = {
    "merge": "joins the tables of a panel's queries into one, row by row on equal columns (executorid)",
    "organize": "renames and orders columns",
    "convertFieldType": "reads a string column as a number or time",
    "configFromData": "takes a field's unit from another query's result",
    "joinByField": "joins the frames of one query (a run each) into one table, a row per value of a column "
                   "(stage_id)",
    "groupBy": "one row per value of the grouped columns (a Connect session), the others summed or counted",
}


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_transformations_are_only_the_listed_kinds(name):
    """Grafana runs transformations in the browser; the model does not. Each
    one is a kind listed above (printed with its panel), and every query a
    transformed panel reads is checked for data like any other
    (test_every_panel_query_returns_data_for_the_run): what a transformation
    gets is checked, what it makes of it is not."""
    for panel in panels(BOARDS[name]):
        kinds = [t["id"] for t in panel.get("transformations", [])]
        assert set(kinds) <= set(UNMODELLED_TRANSFORMATIONS), (panel["title"], kinds)
        if kinds:
            print(f"not run by the model: {name}: {panel['title']}: {', '.join(kinds)}")


def test_the_summary_peak_headline_is_the_exact_peak_of_the_sizing_table(stack, metrics_run, rules):
    """One screen, one answer: the summary's Peak memory stat shows the
    annotator's exact peaks, equal to the highest of the sizing table's rows
    and not below any Graphite sample; the live dashboard's sampled stats say
    "sampled" in their names."""
    name = "spark-application.json"
    dash = opened(stack, metrics_run, name, rules=rules)
    stat = next(p for p in panels(BOARDS[name]) if p["title"] == "Peak memory")
    sizing = next(p for p in panels(BOARDS[name]) if p["title"].startswith("Sizing:"))
    shown = {t["alias"]: s["values"][0][1] for t in stat["targets"] for s in dash.run_panel(stat)[t["refId"]]}
    rows = [dict(zip(s["columns"], row)) for s in dash.run_panel(sizing)["A"] for row in s["values"]]
    executors = [row for row in rows if row["executorid"] != "driver"]
    assert shown["heap, executors"] == max(row["peak heap"] for row in executors) > 50 * 2**20, (shown, rows)
    assert shown["RSS, executors"] == max(row["JVM RSS"] for row in executors), (shown, rows)
    sampled = stack.influx(f"SELECT max(\"value\") FROM \"JVMHeapMemory\" WHERE \"applicationid\" = "
                           f"'{metrics_run.app_id}' AND \"executorid\" != 'driver'")[0]["values"][0][1]
    assert shown["heap, executors"] >= sampled
    live_stats = [t["alias"] for p in panels(BOARDS["spark-executors.json"]) if p["title"] in ("Peak heap", "Peak RSS")
                  for t in p["targets"]]
    assert live_stats and all(alias.endswith("(sampled)") for alias in live_stats), live_stats


def test_task_time_reads_the_annotators_totals_for_all_executors_and_their_own_counters_for_a_pick(
        stack, metrics_run, rules):
    """The live task time graph, its hidden $task_scope resolved as Grafana
    12 resolves it: with Executor = All it reads the annotator's
    per-application totals (one series a counter), with executors picked, or
    over a range without totals, their own counters. The totals end at
    exactly the sum of the executors' last counter values, and the graph
    drawn from them adds up to those totals."""
    name = "spark-executors.json"
    panel = next(p for p in panels(BOARDS[name]) if p["title"] == "Task time by component")
    start, end = run_window(metrics_run)
    every = opened(stack, metrics_run, name, rules=rules)
    picked = opened(stack, metrics_run, name, rules=rules, executorid=["0", "1"])
    earlier = opened(stack, metrics_run, name, start - 7_200_000, start - 3_600_000, rules=rules)
    assert [d.variables["task_scope"].current for d in (every, picked, earlier)] == [
        ["(?:)"], ["(?:.+)"], ["(?:.+)"]]
    assert every.interval(panel)[1] == 10_000 or every.variables["bucket"].current == ["10s"]
    app = f"\"applicationid\" = '{metrics_run.app_id}'"
    by_alias: dict[str, dict[str, dict]] = {}
    for target in panel["targets"]:
        measurement = re.search(r'FROM "\$rp"\."([^"]+)"', target["query"]).group(1)
        side = "totals" if measurement.startswith("sparkscope_app.") else "executors"
        by_alias.setdefault(target["alias"], {})[side] = dict(target, measurement=measurement)
    assert len(by_alias) == 6 and all(len(pair) == 2 for pair in by_alias.values()), by_alias.keys()
    drawn_by = {"all": every.run_panel(panel), "picked": picked.run_panel(panel)}
    for alias, pair in by_alias.items():
        counter = pair["executors"]["measurement"]
        assert pair["totals"]["measurement"] == f"sparkscope_app.{counter}", (alias, pair)
        total = stack.influx(f'SELECT last("value") FROM "sparkscope_app.{counter}" WHERE {app}')[0]["values"][0][1]
        summed = stack.influx(f'SELECT sum("v") FROM (SELECT last("value") AS "v" FROM "{counter}" WHERE {app} '
                              'GROUP BY "executorid")')[0]["values"][0][1]
        assert total == summed, (counter, total, summed)
        scale = float(re.search(r"1s\) / (\d+)", pair["totals"]["query"]).group(1))
        # The totals' first 10 s bucket (the graphs' $bucket here): the rates start after it.
        first_ms, first = stack.influx(
            f'SELECT max("value") FROM "sparkscope_app.{counter}" WHERE {app} AND time >= {start}ms '
            f"AND time <= {end}ms GROUP BY time(10s) fill(none) LIMIT 1")[0]["values"][0]
        drawn = {}
        for name_, drawing in (("all", "totals"), ("picked", "executors")):
            results = drawn_by[name_]
            other = "executors" if drawing == "totals" else "totals"
            # The scope's side draws one line; the other side returns nothing.
            assert len(results[pair[drawing]["refId"]]) == 1 and not non_empty(results[pair[other]["refId"]]), (
                name_, alias, results[pair[drawing]["refId"]])
            rows = results[pair[drawing]["refId"]][0]["values"]
            times, rates = [r[0] for r in rows], [r[1] for r in rows]
            # Each bucket's rate times the time since the bucket before it: the counter's growth.
            times = [first_ms, *times] if name_ == "all" else times
            spans = zip(times, times[1:], rates[-len(times) + 1:])
            drawn[name_] = sum(r * (t - before) / 1000 for before, t, r in spans)
        if counter in ("runTime.count", "cpuTime.count"):
            assert total > 0 and drawn["all"] > 0 and drawn["picked"] > 0, (counter, total, drawn)
        # All: the graph draws the totals' whole growth after their first bucket.
        assert drawn["all"] * scale == pytest.approx(total - first, rel=1e-6, abs=1e-6), (counter, drawn, total)
        # A pick of every executor draws their counters' growth after each one's first bucket: not more.
        assert drawn["picked"] * scale <= total * (1 + 1e-9), (counter, drawn, total)


def test_memory_peaks_read_through_the_rollup_check_equal_the_raw_highest(stack, metrics_run, rules):
    """The sampled peak table reads the minute rollup for the whole minutes of
    the range when $peak_rp says it holds every raw sample, raw samples
    otherwise: either way each column equals max() over the raw samples.
    The range runs to now, so once the run is minutes old its minutes are
    rolled up by the stack's own continuous query and read from there."""
    name = "spark-application.json"
    panel = next(p for p in panels(BOARDS[name]) if p["title"] == "Peak memory per executor, sampled")
    start, end = metrics_run.started_ms - 60_000, max(int(time.time() * 1000), metrics_run.ended_ms + 60_000)
    dash = opened(stack, metrics_run, name, start, end, rules=rules)
    assert dash.variables["peak_rp"].current[0] in ("sparkscope", "sparkscope_1m"), dash.variables["peak_rp"]
    results = dash.run_panel(panel)
    for target in panel["targets"]:
        # A gauge through $peak_rp, or one whose last value is its highest (heap.max) read plainly.
        measurement = re.search(r'FROM (?:"\$peak_rp"\.)?"(\S+)" WHERE', target["query"]).group(1)
        shown = by_executor(results[target["refId"]])
        stored = stored_max(stack, metrics_run, measurement, start, end)
        assert shown == stored and shown, (measurement, shown, stored)


def test_sizing_reads_the_heap_once_for_its_size_and_the_unified_capacity(stack, metrics_run, rules):
    """The sizing table's configured heap and the unified capacity Spark
    derives from it come from one read of heap.max, as two columns: the heap
    equal to its highest raw sample, the capacity (heap - 300 MiB) x 0.6."""
    name = "spark-application.json"
    panel = next(p for p in panels(BOARDS[name]) if p["title"].startswith("Sizing:"))
    heap_targets = [t for t in panel["targets"] if '"heap.max"' in t.get("query", "")]
    assert len(heap_targets) == 1, [t.get("query") for t in panel["targets"]]
    start, end = metrics_run.started_ms - 60_000, max(int(time.time() * 1000), metrics_run.ended_ms + 60_000)
    results = opened(stack, metrics_run, name, start, end, rules=rules).run_panel(panel)[heap_targets[0]["refId"]]
    rows = {s["tags"]["executorid"]: dict(zip(s["columns"], s["values"][0])) for s in results}
    stored = stored_max(stack, metrics_run, "heap.max", start, end)
    assert stored and set(rows) == set(stored), (rows, stored)
    for executor, heap in stored.items():
        assert rows[executor]["heap (sampled)"] == heap, (executor, rows[executor], heap)
        assert rows[executor]["unified capacity at fraction 0.6"] == pytest.approx((heap - 300 * 2**20) * 0.6), (
            executor, rows[executor])


@pytest.mark.parametrize("name", ["spark-executors.json", "spark-application.json"])
def test_graphs_and_the_sampled_peak_table_show_the_executors_with_the_highest_heap_peaks(
        stack, metrics_run, name, rules):
    """$drawn, what the live per-executor graphs and the summary's sampled
    peak table filter on: the picked executors, at most $top (Executors
    drawn, Executors shown), ranked by their highest heap sample in the
    range (the summary's through $peak_rp, as its columns read)."""
    start, end = run_window(metrics_run)
    ranked = sorted(((peak, executor) for executor, peak in
                     stored_max(stack, metrics_run, "JVMHeapMemory", start, end).items()), reverse=True)
    assert len(ranked) == 3, ranked
    for top, text in ((1, "10"), (2, "20"), (100000, "all")):
        dash = opened(stack, metrics_run, name, rules=rules, top=str(top))
        wanted = sorted(executor for _, executor in ranked[:top])
        assert sorted(dash.variables["drawn"].options_values()) == wanted, (top, dash.variables["drawn"], ranked)
    if name == "spark-application.json":
        return  # the summary has no Executor picker
    # Picking executors in Executor ranks among those only.
    best_of_two = max((peak, e) for peak, e in ranked if e in ("0", "1"))[1]
    dash = opened(stack, metrics_run, name, rules=rules, top="1", executorid=["0", "1"])
    assert dash.variables["drawn"].options_values() == [best_of_two]


def test_counter_totals_read_by_their_last_value_equal_their_highest(stack, metrics_run, rules):
    """The per-executor counters read last() (fast: the end of each series),
    which is right only if each counter's last value is its highest: checked
    on a real run, column by column, against max() straight from InfluxDB."""
    name = "spark-application.json"
    panel = next(p for p in panels(BOARDS[name]) if p["title"] == "Work per executor")
    start, end = run_window(metrics_run)
    results = opened(stack, metrics_run, name, rules=rules).run_panel(panel)
    for target in panel["targets"]:
        assert "last(" in target["query"], target["query"]
        measurement = re.search(r'FROM "([^"]+)" WHERE', target["query"]).group(1)
        shown = by_executor(results[target["refId"]])
        stored = stored_max(stack, metrics_run, measurement, start, end)
        assert shown == stored and len(shown) >= 2, (measurement, shown, stored)


def test_executors_alive_counts_those_reporting_at_the_end_of_the_range(stack, metrics_run, rules):
    """Mid-run both executors report; a minute after the run none does (the panel then shows 0)."""
    name = "spark-executors.json"
    panel = next(p for p in panels(BOARDS[name]) if p["title"] == "Executors alive")
    start, _ = run_window(metrics_run)

    def alive(end_ms: int) -> list:
        results = opened(stack, metrics_run, name, start, end_ms, rules=rules).run_panel(panel)
        return [v for s in results["A"] for row in s["values"] for v in row[1:] if v is not None]

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
def test_variables_offer_this_run_and_its_executors(stack, metrics_run, name, rules):
    dash = opened(stack, metrics_run, name, rules=rules)
    wanted = {"username": {"spark"}, "applicationid": {metrics_run.app_id},
              "executorid": {"0", "1", "driver"}, "device": busy_whole_disks(),
              "rp": {"sparkscope"}, "mean_field": {"value"}, "bucket": {"10s"},
              # counts of a few minutes' samples, or none: any answer; the source one of two
              "peak_raw_samples": set(), "peak_rolled_samples": set(), "peak_rp": set(),
              "drawn": {"0", "1", "driver"}, "top": {"20"},
              # a count of the annotator's totals: any; Executor = All on a run with them: the totals
              "task_totals": set(), "task_scope": {"(?:)"},
              # local-cluster[2,1,...]: one core per executor, from the annotator's added events
              "executor_cores": {"1"},
              # the summary's: the run's job (no spark.sparkscope.job: its application name), and the
              # job's finished runs up to the range's end, this one among them
              "job": {METRICS_APP_NAME}, "runs": {metrics_run.app_id}}
    for name_, variable in dash.variables.items():
        values = {value for _, value in variable.options}
        assert wanted[name_] <= values, f"variable {name_}: {values}"
    assert len({v for _, v in dash.variables["peak_rp"].options} & {"sparkscope", "sparkscope_1m"}) == 1


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_annotation_queries_run_and_show_the_runs_queries(stack, metrics_run, name, rules):
    dash = opened(stack, metrics_run, name, rules=rules)
    for annotation in BOARDS[name]["annotations"]["list"]:
        events = dash.annotation_events(annotation)
        if annotation["name"] in ("SQL queries", "Jobs", "Stages", "Executors added/removed"):
            assert events and all(event.get("text") for event in events), f"{annotation['name']}: {events[:3]}"


# ------------------------------------------------------------------ data is never code

# Run ids anyone who reaches Telegraf's events listener can write, each
# crafted to close the position it lands in and start a statement of its own:
# inside /.../, inside '...', after a backslash.
CRAFTED_RUNS = [
    'x$/ ; DROP MEASUREMENT "canary" ; SELECT count("value") FROM "JVMHeapMemory" WHERE "applicationid" =~ /^y',
    "x' ; DROP MEASUREMENT \"canary\" ; SELECT * FROM \"JVMHeapMemory\" WHERE \"applicationid\" = 'y",
    "x\\' ; DROP MEASUREMENT \"canary\" ; SELECT * FROM \"a\" WHERE \"b\" = '",
]


# The second each crafted run was written at: each test takes a later one.
CRAFTED_WRITTEN_AT = [0]


def line_protocol_tag(value: str) -> str:
    # InfluxDB 1.x keeps a backslash in a tag value as it is, unless it escapes one of these.
    return value.replace(",", "\\,").replace("=", "\\=").replace(" ", "\\ ")


@pytest.mark.parametrize("crafted", CRAFTED_RUNS, ids=["regex", "quote", "backslash"])
def test_a_crafted_run_id_drops_nothing_and_every_query_stays_one_statement(stack, crafted):
    """The attack of the security review: a run id that is InfluxQL. Spark's
    measurements cannot carry one (Graphite splits on whitespace, and the
    events listener takes sparkscope's own measurements only), but the
    profiler's can: stored through the real listener, it is the newest
    profiled run, so the profiles dashboard opened plainly selects it. The
    live and summary dashboards get it through a link (?var-applicationid=).
    Every variable, panel and annotation query runs as Grafana 12.4 and as
    Grafana 13 send it (the models refuse a second statement), and the canary
    is still there. One write, both rule sets: the crafted run must be the
    newest profiled run when the profiles dashboard is opened."""
    # A second of its own (the runs are told apart by time: the newest is selected), and a
    # profile id of its own to wait for (an earlier crafted run's point must not end the wait).
    now_s = max(int(time.time()), CRAFTED_WRITTEN_AT[-1] + 1)
    CRAFTED_WRITTEN_AT.append(now_s)
    influx.write(stack.settings.influx_writer, stack.settings.database, f"canary value=1 {now_s - 5}")
    # As the profile writers write it (schema.py): executorid is a field of sparkscope_profiles.
    lines = [f"sparkscope_profiles,applicationid={line_protocol_tag(crafted)},kind=cpu "
             f'samples=1i,executorid="0",profile="p-{now_s}" {now_s}',
             f"JVMHeapMemory,applicationid={line_protocol_tag(crafted)},executorid=driver value=1 {now_s}"]
    request = urllib.request.Request(f"{stack.settings.events_url}/write?db={stack.settings.database}&precision=s",
                                     data="\n".join(lines).encode(), method="POST")
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 204
    stack.wait_for(f'SELECT count("samples") FROM "sparkscope_profiles" WHERE "profile" = \'p-{now_s}\'',
                   lambda s: bool(s) and s[0]["values"][0][1] >= 1)
    window = ((now_s - 600) * 1000, (now_s + 60) * 1000)
    for rules in RULE_SETS.values():
        profiles = stack.open_dashboard(BOARDS["spark-profiles.json"], *window, rules=rules)
        assert profiles.variables["applicationid"].current == [crafted], rules.__name__
        opened_boards = [(name, stack.open_dashboard(BOARDS[name], *window, rules=rules,
                                                       url_vars={"applicationid": crafted}))
                         for name in RUN_BOARDS] + [("spark-profiles.json", profiles)]
        for name, dash in opened_boards:
            for panel in panels(BOARDS[name]):
                dash.run_panel(panel)
            for annotation in BOARDS[name]["annotations"]["list"]:
                dash.annotation_events(annotation)
    assert stack.influx('SELECT count("value") FROM "canary"'), "the canary measurement was dropped"
    # The forged Spark point never reached InfluxDB (Spark's metrics come over Graphite only).
    assert not stack.influx(f'SELECT count("value") FROM "JVMHeapMemory" WHERE time >= {now_s}s '
                            f"AND \"executorid\" = 'driver' AND \"username\" = ''")


def test_the_crafted_run_check_fails_on_a_variable_query_with_the_run_id_unescaped(stack):
    """Grafana 12 does not escape a single value in a variable query, even
    inside /^...$/: a board written as ours once was sends the attacker's
    statements, and opening it must fail here (it runs after the test above
    stored the crafted runs). Grafana 13's plugin escapes it there, so this
    failure is 12.4's alone (tests/test_grafana13_model.py shows both)."""
    board = json.loads(json.dumps(BOARDS["spark-executors.json"]))
    picker = next(v for v in board["templating"]["list"] if v["name"] == "executorid")
    picker["query"] = picker["query"].replace("${applicationid:regex}", "$applicationid")
    now_ms = int(time.time() * 1000)
    with pytest.raises(ModelError, match="more than one statement"):
        stack.open_dashboard(board, now_ms - 600_000, now_ms + 60_000,
                             url_vars={"applicationid": CRAFTED_RUNS[0]})
