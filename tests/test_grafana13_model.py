"""The model of Grafana 13 (sparkscope_testkit/grafana13.py) beside 12.4's, checked without
servers: where the two differ, each rule set gives its own answer, and a dashboard that only
Grafana 13 breaks is refused by the 13 rules and opened by the 12.4 ones."""

from __future__ import annotations

import copy
import json

import pytest

from sparkscope_testkit.grafana12 import Dashboard12, ModelError
from sparkscope_testkit.grafana13 import Dashboard13, conversion_losses, in_regex_literal, regex_literals
from test_grafana12_model import (DASHBOARDS, DS, HOUR, NOW, FakeInflux, board, panel, picker, query_var,
                                  tag_values, target)


def opened(rules, *variables: dict, answers: dict | None = None, **options):
    return rules(board(*variables), FakeInflux(answers), NOW - 6 * HOUR, NOW, **options)


def sent(dash, query: str) -> str:
    [request] = dash.panel_requests(panel(target(query)))
    return request.query


RUN = {'KEY = "app"': tag_values("app-1.2")}


# ------------------------------------------------------------------ regex literals as the plugin finds them

@pytest.mark.parametrize("query,bodies", [
    ('SELECT "v" FROM "m" WHERE "a" =~ /^x$/', ["^x$"]),
    ('SELECT "v" FROM /^jvm.*/ WHERE time > 0', ["^jvm.*"]),
    ('SELECT mean("v") FROM "m" GROUP BY /exec/', ["exec"]),
    ('SELECT "v" / 2 FROM "m"', []),                       # after an operand: a division
    ('SELECT max("v") / 1048576 FROM "m"', []),            # after ')': a division
    ("SELECT \"v\" FROM \"m\" WHERE \"a\" = '/not/'", []),  # inside a string
    ('SELECT "v" FROM "m" -- =~ /x/\nWHERE "a" !~ /y/', ["y"]),
])
def test_regex_literals_are_found_where_influxql_opens_them(query, bodies):
    assert regex_literals(query) == bodies


def test_every_reference_form_but_brackets_counts_inside_a_literal():
    for form in ("$app", "${app}", "${app:raw}"):
        assert in_regex_literal("app", f'SELECT 1 FROM "m" WHERE "a" =~ /^{form}$/'), form
    assert not in_regex_literal("app", 'SELECT 1 FROM "m" WHERE "a" =~ /^$apps$/')  # another name
    assert not in_regex_literal("app", "SELECT 1 FROM \"m\" WHERE \"a\" = '$app'")


# ------------------------------------------------------------------ where 12.4 and 13 differ

def test_braced_single_value_in_a_regex_literal_is_escaped_by_13_only():
    query = 'SELECT "v" FROM "m" WHERE "a" =~ /^${app}$/'
    assert sent(opened(Dashboard12, picker("app"), answers=RUN), query).endswith("/^app-1.2$/")
    assert sent(opened(Dashboard13, picker("app"), answers=RUN), query).endswith("/^app-1\\.2$/")


def test_13_escapes_a_single_value_in_every_spot_once_a_regex_literal_holds_it():
    query = "SELECT \"v\" FROM \"m\" WHERE \"a\" =~ /^$app$/ AND \"b\" = '$app'"
    assert sent(opened(Dashboard13, picker("app"), answers=RUN), query) == (
        "SELECT \"v\" FROM \"m\" WHERE \"a\" =~ /^app-1\\.2$/ AND \"b\" = 'app-1\\.2'")


def test_outside_any_regex_literal_a_single_value_goes_in_raw_under_13():
    query = "SELECT \"v\" FROM \"m\" WHERE \"a\" = '$app'"
    assert sent(opened(Dashboard13, picker("app"), answers=RUN), query).endswith("'app-1.2'")


def test_13_escapes_in_a_variable_query_where_12_never_does():
    crafted = 'x$/ ; DROP MEASUREMENT "c" ; SELECT 1 FROM "a" WHERE "b" =~ /^y'
    answers = {'KEY = "app"': tag_values(crafted), 'KEY = "executor"': tag_values("1")}
    executor = query_var("executor", 'SHOW TAG VALUES FROM "m" WITH KEY = "executor" WHERE "app" =~ /^$app$/')
    with pytest.raises(ModelError, match="more than one statement"):
        opened(Dashboard12, picker("app"), executor, answers=answers)
    dash = opened(Dashboard13, picker("app"), executor, answers=answers)
    assert dash.variables["executor"].request.endswith("/^x\\$\\/ ; DROP MEASUREMENT \"c\" ; SELECT 1 FROM \"a\" "
                                                       "WHERE \"b\" =~ \\/\\^y$/")


def test_numbers_go_in_raw_and_multi_values_as_an_escaped_alternation_under_both():
    answers = {'KEY = "n"': tag_values("10s"), 'KEY = "m"': tag_values("a.b", "c")}
    multi = picker("m", multi=True, includeAll=True)
    for rules in (Dashboard12, Dashboard13):
        dash = opened(rules, picker("n"), multi, answers=answers)
        assert sent(dash, 'SELECT "v" FROM "m" WHERE "x" =~ /^$n$/ GROUP BY time($n)').endswith("time(10s)")
        assert "=~ /^(a\\.b|c)$/" in sent(dash, 'SELECT "v" FROM "m" WHERE "x" =~ /^$m$/')


def test_an_explicit_format_wins_under_both():
    for rules in (Dashboard12, Dashboard13):
        dash = opened(rules, picker("app"), answers=RUN)
        assert sent(dash, 'SELECT "v" FROM "m" WHERE "a" =~ /^${app:raw}$/').endswith("/^app-1.2$/")
        assert sent(dash, "SELECT \"v\" FROM \"m\" WHERE \"a\" = '${app:regex}'").endswith("'app-1\\.2'")


def test_13_refuses_to_guess_a_list_outside_a_regex_literal():
    answers = {'KEY = "all"': tag_values("a", "b")}
    include_all = picker("all", includeAll=True)
    dash = opened(Dashboard13, include_all, answers=answers)
    assert dash.variables["all"].is_all
    with pytest.raises(ModelError, match="include All, not multi-value"):
        sent(dash, "SELECT \"v\" FROM \"m\" WHERE \"a\" = '$all'")
    assert sent(dash, 'SELECT "v" FROM "m" WHERE "a" =~ /^$all$/').endswith("/^(a|b)$/")


def test_13_variable_queries_get_the_time_filter_in_ms():
    variable = query_var("app", 'SHOW TAG VALUES FROM "m" WITH KEY = "app" WHERE $timeFilter')
    dash12 = opened(Dashboard12, variable, relative_from="now-6h")
    dash13 = opened(Dashboard13, variable, relative_from="now-6h")
    assert dash12.variables["app"].request.endswith("time >= now() - 6h and time <= now()")
    assert dash13.variables["app"].request.endswith(f"time >= {NOW - 6 * HOUR}ms and time <= {NOW}ms")


def test_13_refuses_a_two_column_picker_that_12_lists_as_a_union():
    two = {"name": "m", "columns": ["time", "id", "first"], "values": [[1, "a", 5]]}
    variable = query_var("app", 'SELECT "id", "first" FROM (SELECT first("v") FROM "m" GROUP BY "id")')
    assert opened(Dashboard12, variable, answers={"SELECT": [two]}).variables["app"].options_values() == ["a", "5"]
    with pytest.raises(ModelError, match="select one column"):
        opened(Dashboard13, variable, answers={"SELECT": [two]})


def annotation(**more) -> dict:
    return {"name": "Jobs", "datasource": DS, "enable": True, "iconColor": "red",
            "target": {"query": 'SELECT "text", "tags" FROM "events" WHERE $timeFilter', "rawQuery": True,
                       "fromAnnotations": True, "textColumn": "text"}, **more}


def test_13_reads_annotation_columns_from_the_query_only():
    answers = {"events": [{"name": "events", "columns": ["time", "text", "tags"], "values": [[1, "t", "a,b"]]}]}
    moved = annotation(tagsColumn="tags")
    [event] = Dashboard12(board(annotations=[moved]), FakeInflux(answers), NOW - HOUR, NOW).annotation_events(moved)
    assert event["tags"] == ["a", "b"]
    with pytest.raises(ModelError, match="reads the query's columns only"):
        Dashboard13(board(annotations=[moved]), FakeInflux(answers), NOW - HOUR, NOW).annotation_events(moved)


# ------------------------------------------------------------------ the v1 -> v2 conversion

def test_the_shipped_dashboards_lose_nothing_in_the_conversion():
    for path in DASHBOARDS:
        assert conversion_losses(json.loads(path.read_text())) == [], path.name


def with_a_repeated_panel_id(path) -> dict:
    """A dashboard 12.4 opens (it renumbers a repeated id) and 13's conversion breaks."""
    dashboard = json.loads(path.read_text())
    leaves = [p for top in dashboard["panels"] for p in [top, *top.get("panels", [])] if p["type"] != "row"]
    leaves[1]["id"] = leaves[0]["id"]
    return dashboard


def test_a_repeated_panel_id_is_refused_by_13_and_opened_by_12():
    dashboard = with_a_repeated_panel_id(DASHBOARDS[0])
    [loss] = conversion_losses(dashboard)
    assert "both become element panel-" in loss
    answers = {"": [{"name": "m", "columns": ["time", "value"], "values": [[1, "x"]]}]}
    Dashboard12(copy.deepcopy(dashboard), FakeInflux(answers), NOW - HOUR, NOW)
    with pytest.raises(ModelError, match="loses part of it"):
        Dashboard13(dashboard, FakeInflux(answers), NOW - HOUR, NOW)
