"""The model of Grafana 12 (sparkscope_testkit/grafana12.py), checked without servers: a
fake InfluxDB records what the model sends and answers canned series."""

from __future__ import annotations

import copy
import io
import json
import re
import urllib.error
from pathlib import Path

import pytest

from sparkscope_testkit import grafana12
from sparkscope_testkit.grafana12 import (Dashboard12, ModelError, check_single_statement, escape_regex, js_number_to_string,
                               series_names)

DASHBOARDS = sorted((Path(__file__).resolve().parents[1] / "dashboards").glob("*.json"))
DS = {"type": "influxdb", "uid": "sparkscope-influxdb"}
EXPR = {"type": "__expr__", "uid": "__expr__"}
NOW = 1_700_000_000_000
HOUR = 3_600_000
CRAFTED = 'x$/ ; DROP MEASUREMENT "canary" ; SELECT 1 FROM "a" WHERE "b" =~ /^y'


class FakeInflux:
    """send(query, rp): the first answer whose key is in the query, else no series."""

    def __init__(self, answers: dict[str, list[dict]] | None = None):
        self.answers = answers or {}
        self.sent: list[tuple[str, str | None]] = []

    def __call__(self, query: str, rp: str | None = None) -> list[dict]:
        self.sent.append((query, rp))
        for key, series in self.answers.items():
            if key in query:
                return copy.deepcopy(series)
        return []


def tag_values(*values: str) -> list[dict]:
    return [{"name": "m", "columns": ["key", "value"], "values": [["k", v] for v in values]}]


def query_var(name: str, query: str, **spec) -> dict:
    return {"name": name, "type": "query", "datasource": DS, "query": query, "refresh": 2, "sort": 0,
            "multi": False, "includeAll": False, "current": {}, **spec}


def picker(name: str = "v", **spec) -> dict:
    """A variable whose options are the tag values answered for 'KEY = "<name>"'."""
    return query_var(name, f'SHOW TAG VALUES FROM "m" WITH KEY = "{name}"', **spec)


def board(*variables: dict, panels: list[dict] | None = None, annotations: list[dict] | None = None) -> dict:
    return {"uid": "test", "timezone": "browser", "templating": {"list": list(variables)},
            "annotations": {"list": annotations or []}, "panels": panels or []}


def target(query: str, ref_id: str = "A", **more) -> dict:
    return {"datasource": DS, "refId": ref_id, "rawQuery": True, "resultFormat": "time_series", "query": query,
            "alias": "", **more}


def panel(*targets: dict, w: int = 24, **more) -> dict:
    return {"id": 1, "type": "timeseries", "title": "p", "datasource": DS,
            "gridPos": {"h": 8, "w": w, "x": 0, "y": 0}, "targets": list(targets), **more}


def opened(*variables: dict, answers: dict | None = None, start: int = NOW - 6 * HOUR, end: int = NOW,
           **options) -> Dashboard12:
    return Dashboard12(board(*variables), FakeInflux(answers), start, end, **options)


def sent_query(dash: Dashboard12, query: str, **panel_options) -> str:
    [request] = dash.panel_requests(panel(target(query), **panel_options))
    return request.query


# ---------------------------------------------------------------- InfluxDB over HTTP, as Grafana's backend asks


class Answer(io.BytesIO):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_influx_http_asks_with_epoch_ms_and_basic_auth_and_reads_the_first_statement_only(monkeypatch):
    asked = []

    def fake_open(request, timeout):
        asked.append(request)
        return Answer(json.dumps({"results": [
            {"statement_id": 0, "series": [{"name": "m", "columns": ["time", "v"], "values": [[1, 2]]}]},
            {"statement_id": 1, "series": [{"name": "other", "columns": ["time", "v"], "values": [[3, 4]]}]},
        ]}).encode())

    monkeypatch.setattr(grafana12, "_open", fake_open)
    send = grafana12.influx_http("http://127.0.0.1:8086/", "spark", user="u", password="p")
    series = send('SELECT "v" FROM "m"', "sparkscope_1m")
    assert series == [{"name": "m", "columns": ["time", "v"], "values": [[1, 2]]}]
    url = asked[0].full_url
    assert url.startswith("http://127.0.0.1:8086/query?") and asked[0].get_method() == "GET"
    assert "db=spark" in url and "epoch=ms" in url and "rp=sparkscope_1m" in url
    assert "q=SELECT+%22v%22+FROM+%22m%22" in url
    assert asked[0].get_header("Authorization") == "Basic dTpw"
    grafana12.influx_http("http://h:1", "spark")("SELECT 1", None)
    assert asked[1].get_header("Authorization") is None and "rp=" not in asked[1].full_url


def test_influx_http_raises_on_an_error_of_the_first_statement_and_on_http_errors(monkeypatch):
    monkeypatch.setattr(grafana12, "_open", lambda request, timeout: Answer(
        b'{"results": [{"statement_id": 0, "error": "retention policy not found: x"}]}'))
    with pytest.raises(ModelError, match="retention policy not found"):
        grafana12.influx_http("http://h:1", "spark")("SELECT 1", "x")

    def refused(request, timeout):
        raise urllib.error.HTTPError(request.full_url, 400, "Bad Request", {},
                                     io.BytesIO(b'{"error":"error parsing query"}'))

    monkeypatch.setattr(grafana12, "_open", refused)
    with pytest.raises(ModelError, match="HTTP 400.*error parsing query"):
        grafana12.influx_http("http://h:1", "spark")("SELEC 1", None)

    def unreachable(request, timeout):
        raise urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))

    monkeypatch.setattr(grafana12, "_open", unreachable)
    with pytest.raises(ModelError, match="not reachable.*sparkscope up"):
        grafana12.influx_http("http://h:1", "spark")("SELECT 1", None)


# ---------------------------------------------------------------- query variables: options and selection


def test_a_picker_selecting_two_columns_offers_the_numbers_of_the_second_as_runs():
    """The defect the model must expose: every non-time column becomes options."""
    runs = query_var("applicationid", 'SELECT "applicationid", "first" FROM (SELECT first("value") FROM '
                     '"JVMHeapMemory" WHERE $timeFilter GROUP BY "applicationid") ORDER BY time DESC')
    dash = opened(runs, answers={"first": [{"name": "JVMHeapMemory", "columns": ["time", "applicationid", "first"],
                                            "values": [[2, "app-2", 1.0], [1, "app-1", 1024.5]]}]})
    variable = dash.variables["applicationid"]
    assert variable.options_values() == ["app-2", "app-1", "1", "1024.5"]
    assert variable.current == ["app-2"]


def test_numbers_become_options_as_javascript_writes_them():
    count = query_var("n", 'SELECT count("value") FROM "m"')
    dash = opened(count, answers={"count": [{"name": "m", "columns": ["time", "count"], "values": [[0, 7]]}]})
    assert dash.variables["n"].options == [("7", "7")]


@pytest.mark.parametrize("number,text", [(1.0, "1"), (2.5, "2.5"), (1024, "1024"), (1e21, "1e+21"),
                                         (1e-7, "1e-7"), (0.000001, "0.000001"), (123456789.0, "123456789"),
                                         (0.1 + 0.2, "0.30000000000000004"), (-0.0, "0"), (-3.5, "-3.5")])
def test_js_number_to_string(number, text):
    assert js_number_to_string(number) == text


def test_the_saved_selection_is_kept_while_it_is_an_option():
    answers = {'"v"': tag_values("a", "b", "c")}
    assert opened(picker(current={"text": "b", "value": "b"}), answers=answers).variables["v"].current == ["b"]
    assert opened(picker(current={"text": "z", "value": "z"}), answers=answers).variables["v"].current == ["a"]
    with_all = picker(includeAll=True, current={"text": "z", "value": "z"})
    assert opened(with_all, answers=answers).variables["v"].is_all
    # Matched by its text when its value is gone.
    top = {"name": "top", "type": "custom", "query": "10,all : 100000", "current": {"text": "all", "value": "99"}}
    assert opened(top).variables["top"].current == ["100000"]


def test_a_url_value_wins_and_is_kept_even_when_no_option_holds_it():
    answers = {'"v"': tag_values("a", "b", "c")}
    assert opened(picker(), answers=answers, url_vars={"v": "c"}).variables["v"].current == ["c"]
    kept = opened(picker(), answers=answers, url_vars={"v": "gone"}).variables["v"]
    assert kept.current == ["gone"] and kept.kept_from_url
    multi = opened(picker(multi=True), answers=answers, url_vars={"v": ["b", "gone"]}).variables["v"]
    assert multi.current == ["b", "gone"]
    top = {"name": "top", "type": "custom", "query": "10,all : 100000", "current": {"text": "10", "value": "10"}}
    assert opened(top, url_vars={"top": "all"}).variables["top"].current == ["100000"]
    all_of = picker(multi=True, includeAll=True, allValue=".*")
    assert opened(all_of, answers=answers, url_vars={"v": "All"}).variables["v"].is_all
    # The custom all value in the URL means All for a single-value variable; a multi-value one
    # gets the URL's values as a list, which is never equal to it: kept as a value, escaped.
    assert opened(dict(all_of, multi=False), answers=answers, url_vars={"v": ".*"}).variables["v"].is_all
    literal = opened(all_of, answers=answers, url_vars={"v": ".*"})
    assert literal.variables["v"].current == [".*"] and literal.variables["v"].kept_from_url
    assert sent_query(literal, 'SELECT 1 FROM "m" WHERE "x" =~ /^$v$/').endswith("/^(\\.\\*)$/")
    with pytest.raises(ModelError, match="no such variable"):
        opened(picker(), answers=answers, url_vars={"typo": "a"})


def test_without_options_a_variable_is_empty_or_all():
    single = opened(picker())
    assert single.variables["v"].current == [""]
    assert sent_query(single, "SELECT 0$v - 1 FROM \"m\" WHERE \"x\" = '$v'") == \
        "SELECT 0 - 1 FROM \"m\" WHERE \"x\" = ''"
    assert sent_query(opened(picker(multi=True)), 'SELECT 1 FROM "m" WHERE "x" =~ /^$v$/') == \
        'SELECT 1 FROM "m" WHERE "x" =~ /^()$/'
    all_no_value = opened(picker(multi=True, includeAll=True))
    assert all_no_value.variables["v"].is_all
    assert sent_query(all_no_value, 'SELECT 1 FROM "m" WHERE "x" =~ /^$v$/').endswith("/^()$/")
    all_value = opened(picker(multi=True, includeAll=True, allValue=".*"))
    assert sent_query(all_value, 'SELECT 1 FROM "m" WHERE "x" =~ /^$v$/').endswith("/^.*$/")


def test_variables_resolve_in_list_order_and_see_the_ones_above():
    first = picker("a")
    second = query_var("b", "SHOW TAG VALUES FROM \"m\" WITH KEY = \"b\" WHERE \"a\" = '$a'")
    fake = FakeInflux({'KEY = "a"': tag_values("one"), 'KEY = "b"': tag_values("two")})
    dash = Dashboard12(board(first, second), fake, NOW - HOUR, NOW)
    assert [q for q, _ in fake.sent] == ['SHOW TAG VALUES FROM "m" WITH KEY = "a"',
                                         "SHOW TAG VALUES FROM \"m\" WITH KEY = \"b\" WHERE \"a\" = 'one'"]
    assert dash.variables["b"].request == fake.sent[1][0]
    with pytest.raises(ModelError, match="list order"):
        Dashboard12(board(second, first), FakeInflux(), NOW - HOUR, NOW)


def test_a_variable_regex_keeps_its_capture_and_named_groups():
    values = {'"v"': tag_values("app-10", "app-9", "app-1", "other", "app-9")}
    captured = opened(picker(regex="/app-(\\d+)/"), answers=values).variables["v"]
    assert captured.options == [("10", "10"), ("9", "9"), ("1", "1")]
    named = opened(picker(regex="/(?<text>[^:]+):(?<value>.+)/"),
                   answers={'"v"': tag_values("Alice:1", "Bob:2")}).variables["v"]
    assert named.options == [("Alice", "1"), ("Bob", "2")]
    every = opened(picker(regex="/([0-9])/g"), answers={'"v"': tag_values("a1b2")}).variables["v"]
    assert every.options_values() == ["1", "2"]
    with pytest.raises(ModelError, match="without /"):
        opened(picker(regex="app-.*"), answers=values)


@pytest.mark.parametrize("sort,expected", [
    (0, ["b10", "b9", "a1", "C2"]),
    (1, ["C2", "a1", "b10", "b9"]),           # alphabetical: code units, upper case first
    (2, ["b9", "b10", "a1", "C2"]),
    (3, ["a1", "C2", "b9", "b10"]),           # numerical: the text's first digits
    (4, ["b10", "b9", "C2", "a1"]),
    (5, ["a1", "b10", "b9", "C2"]),           # alphabetical, case-insensitive
    (6, ["C2", "b9", "b10", "a1"]),
    (7, ["a1", "b9", "b10", "C2"]),           # natural
    (8, ["C2", "b10", "b9", "a1"]),
])
def test_sort_modes(sort, expected):
    dash = opened(picker(sort=sort), answers={'"v"': tag_values("b10", "b9", "a1", "C2", "b9")})
    assert dash.variables["v"].options_values() == expected


def test_custom_variables_split_on_commas_with_text_value_pairs():
    custom = {"name": "c", "type": "custom", "query": "10,20 , all : 100000,a\\,b", "current": {}}
    assert opened(custom).variables["c"].options == [("10", "10"), ("20", "20"), ("all", "100000"),
                                                    ("a,b", "a,b")]


# ---------------------------------------------------------------- formatting in panel queries


ABC = {'"v"': tag_values("a.b", "c", "d")}


def test_a_multi_value_variable_is_an_escaped_group_wherever_it_stands():
    dash = opened(picker(multi=True), answers=ABC, url_vars={"v": ["a.b", "c"]})
    assert sent_query(dash, "SELECT 1 FROM \"m\" WHERE \"x\" =~ /^$v$/ AND \"y\" = '$v'") == \
        "SELECT 1 FROM \"m\" WHERE \"x\" =~ /^(a\\.b|c)$/ AND \"y\" = '(a\\.b|c)'"
    one = opened(picker(multi=True), answers=ABC, url_vars={"v": ["c"]})
    assert sent_query(one, 'SELECT 1 FROM "m" WHERE "x" =~ /^$v$/').endswith("/^(c)$/")
    numbers = opened(picker(multi=True), answers={'"v"': tag_values("1", "2")}, url_vars={"v": ["1", "2"]})
    assert sent_query(numbers, 'SELECT 1 FROM "m" WHERE "x" =~ /^$v$/').endswith("/^(1|2)$/")


def test_all_is_every_option_and_a_custom_all_value_goes_in_raw():
    every = opened(picker(multi=True, includeAll=True, current={"text": ["All"], "value": ["$__all"]}),
                   answers=ABC)
    assert sent_query(every, 'SELECT 1 FROM "m" WHERE "x" =~ /^$v$/').endswith("/^(a\\.b|c|d)$/")
    assert every.variables["v"].current == ["a.b", "c", "d"] and every.variables["v"].text == "All"
    custom = opened(picker(multi=True, includeAll=True, allValue="(?:a|b).*",
                           current={"text": ["All"], "value": ["$__all"]}), answers=ABC)
    for form in ("$v", "${v}", "[[v]]", "${v:regex}", "${v:pipe}", "${v:singlequote}"):
        assert sent_query(custom, f'SELECT 1 FROM "m" WHERE "x" =~ /^{form}$/').endswith("/^(?:a|b).*$/"), form
    assert sent_query(custom, "SELECT 1 FROM \"m\" WHERE \"x\" = '${v:text}'").endswith("'All'")


def test_a_single_value_is_escaped_only_as_dollar_name_between_slashes():
    dash = opened(picker(), answers=ABC, url_vars={"v": "a.b"})
    assert sent_query(dash, 'SELECT 1 FROM "m" WHERE "x" =~ /^$v$/').endswith("/^a\\.b$/")
    assert sent_query(dash, 'SELECT 1 FROM "m" WHERE "x" =~ /^${v}$/').endswith("/^a.b$/")
    assert sent_query(dash, 'SELECT 1 FROM "m" WHERE "x" =~ /^[[v]]$/').endswith("/^a.b$/")
    assert sent_query(dash, "SELECT 1 FROM \"m\" WHERE \"x\" = '$v'").endswith("'a.b'")
    assert sent_query(dash, 'SELECT 1 FROM "m" WHERE "x" =~ /^${v:regex}$/').endswith("/^a\\.b$/")


def test_a_value_that_starts_with_a_number_goes_in_raw():
    dash = opened(picker(), answers={'"v"': tag_values("1.5x(")}, url_vars={"v": "1.5x("})
    assert sent_query(dash, 'SELECT 1 FROM "m" WHERE "x" =~ /^$v$/').endswith("/^1.5x($/")


def test_the_model_refuses_to_guess_the_escaping_of_a_value_used_in_and_out_of_slashes():
    dash = opened(picker(), answers=ABC, url_vars={"v": "a.b"})
    with pytest.raises(ModelError, match="not certain"):
        sent_query(dash, "SELECT 1 FROM \"m\" WHERE \"x\" =~ /^$v$/ AND \"y\" = '${v}'")
    # An include-All single-value variable with a value picked: once escaped wherever it stood.
    all_single = opened(picker(includeAll=True), answers=ABC, url_vars={"v": "a.b"})
    assert sent_query(all_single, 'SELECT 1 FROM "m" WHERE "x" =~ /^$v$/').endswith("/^a\\.b$/")
    with pytest.raises(ModelError, match="not certain"):
        sent_query(all_single, "SELECT 1 FROM \"m\" WHERE \"y\" = '$v'")
    # A value with nothing to escape is the same either way.
    plain = opened(picker(includeAll=True), answers=ABC, url_vars={"v": "c"})
    assert sent_query(plain, "SELECT 1 FROM \"m\" WHERE \"y\" = '$v'").endswith("'c'")


@pytest.mark.parametrize("fmt,values,expected", [
    ("regex", ["a.b", "c"], "(a\\.b|c)"), ("regex", ["a.b"], "a\\.b"), ("pipe", ["a.b", "c"], "a.b|c"),
    ("csv", ["a.b", "c"], "a.b,c"), ("glob", ["a.b", "c"], "{a.b,c}"), ("glob", ["c"], "c"),
    ("raw", ["a.b", "c"], "a.b,c"), ("singlequote", ["it's", "c"], "'it\\'s','c'"),
    ("doublequote", ['a"b', "c"], '"a\\"b","c"'), ("json", ["a.b", "c"], '["a.b","c"]'),
    ("percentencode", ["a b", "c"], "%7Ba%20b%2Cc%7D"), ("text", ["a.b", "c"], "a.b + c"),
    ("distributed", ["a.b", "c", "d"], "a.b,v=c,v=d"), ("join: - ", ["a", "c"], "a - c"),
    ("sqlstring", ["it's"], "'it''s'"),
])
def test_explicit_formats(fmt, values, expected):
    answers = {'"v"': tag_values(*values, "other")}
    dash = opened(picker(multi=True), answers=answers, url_vars={"v": values})
    assert dash.interpolate(f"${{v:{fmt}}}") == expected


def test_an_unknown_or_unmodelled_format_is_refused():
    dash = opened(picker(), answers=ABC)
    with pytest.raises(ModelError, match="unknown variable format"):
        dash.interpolate("${v:nope}")
    with pytest.raises(ModelError, match="not modelled"):
        dash.interpolate("${v:lucene}")
    with pytest.raises(ModelError, match="__from and \\$__to only"):
        dash.interpolate("${v:date:YYYY}")


# ---------------------------------------------------------------- variable queries: nothing escaped


def test_a_variable_query_inserts_a_crafted_run_id_unescaped():
    """A single value is never escaped in a variable's query, even in /^$v$/: a
    run id can end the regex and add statements. Panels escape it."""
    runs = query_var("applicationid", 'SHOW TAG VALUES FROM "m" WITH KEY = "applicationid"')
    dash = opened(runs, answers={"applicationid": tag_values(CRAFTED, "app-1")})
    assert dash.variables["applicationid"].current == [CRAFTED]
    reads = 'SELECT count("value") FROM "m" WHERE "applicationid" =~ /^$applicationid$/ AND $timeFilter'
    sent = dash.interpolate(reads, where="variable")
    assert f"/^{CRAFTED}$/" in sent
    with pytest.raises(ModelError, match="more than one statement"):
        check_single_statement(sent)
    # The same text in a panel: escaped, one regex, one statement.
    assert f"/^{escape_regex(CRAFTED)}$/" in sent_query(dash, reads)
    # A dashboard whose next variable reads it cannot be opened.
    samples = query_var("samples", reads)
    with pytest.raises(ModelError, match='more than one statement.*DROP MEASUREMENT "canary"'):
        Dashboard12(board(runs, samples), FakeInflux({"KEY": tag_values(CRAFTED)}), NOW - HOUR, NOW)
    # Through the URL, too: Grafana keeps a URL value no option holds.
    linked = opened(runs, answers={"applicationid": tag_values("app-1")}, url_vars={"applicationid": CRAFTED})
    assert linked.variables["applicationid"].kept_from_url
    assert f"/^{CRAFTED}$/" in linked.interpolate(reads, where="variable")


def test_a_variable_query_writes_its_first_time_filter_relative_to_now():
    dash = opened(relative_from="now-6h")
    assert dash.interpolate("SELECT 1 FROM \"m\" WHERE $timeFilter AND ($timeFilter)", where="variable") == (
        f"SELECT 1 FROM \"m\" WHERE time >= now() - 6h and time <= now() AND "
        f"(time >= {NOW - 6 * HOUR}ms and time <= {NOW}ms)")
    assert dash.interpolate("$timeFilter", where="panel") == f"time >= {NOW - 6 * HOUR}ms and time <= {NOW}ms"
    assert dash.interpolate("$timeFilter", where="annotation") == f"time >= {NOW - 6 * HOUR}ms and time <= {NOW}ms"
    assert opened().interpolate("$timeFilter", where="variable") == \
        f"time >= {NOW - 6 * HOUR}ms and time <= {NOW}ms"


# ---------------------------------------------------------------- what the model refuses


@pytest.mark.parametrize("query", [
    'SELECT 1 FROM "a"; DROP MEASUREMENT "b"',
    'SELECT 1 FROM "a";',
    'SELECT 1 FROM "a" -- ; DROP MEASUREMENT "b"',
    'SELECT 1 FROM "a" WHERE "x" =~ /^a$/ ; SELECT 2 FROM "b"',
])
def test_a_second_statement_is_refused(query):
    with pytest.raises(ModelError, match="more than one statement"):
        sent_query(opened(), query)


@pytest.mark.parametrize("query", [
    "SELECT 1 FROM \"a\" WHERE \"x\" = 'a;b'",
    'SELECT 1 FROM "a;b"',
    'SELECT 1 FROM "a" WHERE "x" =~ /a;b\\/;/',
    "SELECT 1 FROM \"a\" WHERE \"x\" = 'it\\'s;'",
])
def test_a_semicolon_in_a_string_identifier_or_regex_is_one_statement(query):
    assert sent_query(opened(), query) == query


@pytest.mark.parametrize("query,message", [
    ('SELECT 1 FROM "m" WHERE "x" = \'$nope\'', "neither a variable"),
    ('SELECT 1 FROM "m" WHERE time > now() - $__range', "not supported by the InfluxDB datasource"),
    ('SELECT 1 FROM "m" WHERE time > now() - ${__range_s}s', "not supported"),
    ('SELECT 1 FROM "m" WHERE time > now() - $__range_ms', "not supported"),
    ('SELECT derivative(1, $__rate_interval) FROM "m"', "not supported"),
    ('SELECT 1 FROM "m" WHERE $__timeFilter(time)', "not supported"),
    ('SELECT 1 FROM "m" WHERE "x" = \'$tag_host\'', "legal in aliases only"),
    ('SELECT 1 FROM "m" WHERE "x" = \'$1\'', "legal in aliases only"),
    ('SELECT 1 FROM "m" WHERE ${timeFilter}', "plain \\$timeFilter"),
    ('SELECT 1 FROM "m" WHERE "x" = \'${v.field}\'', "field paths"),
])
def test_what_grafana_would_leave_literal_is_refused(query, message):
    with pytest.raises(ModelError, match=message):
        sent_query(opened(picker(), answers=ABC), query)


def test_aliases_may_use_alias_patterns_and_name_the_series():
    dash = opened()
    aliased = target('SELECT mean("v") FROM "m" WHERE $timeFilter GROUP BY "host"', alias="$tag_host $col [[m]]")
    [request] = dash.panel_requests(panel(aliased))
    assert request.alias == "$tag_host $col [[m]]"
    series = [{"name": "cpu", "tags": {"host": "h1"}, "columns": ["time", "mean"], "values": [[0, 1]]}]
    assert series_names(aliased, series) == ["h1 mean cpu"]
    with pytest.raises(ModelError, match="no tag 'disk'"):
        series_names(dict(aliased, alias="$tag_disk"), series)
    with pytest.raises(ModelError, match="neither a variable"):
        dash.panel_requests(panel(dict(aliased, alias="$nope")))


def test_targets_the_model_does_not_send_as_grafana_would_are_refused():
    dash = opened()
    with pytest.raises(ModelError, match="builder-mode"):
        dash.panel_requests(panel(target('SELECT 1 FROM "m"', rawQuery=False)))
    with pytest.raises(ModelError, match="stale builder tags"):
        dash.panel_requests(panel(target('SELECT 1 FROM "m"', tags=[{"key": "a", "value": "b"}])))
    with pytest.raises(ModelError, match="not the provisioned InfluxDB"):
        dash.panel_requests(panel(target('SELECT 1 FROM "m"', datasource={"type": "prometheus", "uid": "p"})))
    with pytest.raises(ModelError, match="timeFrom"):
        dash.panel_requests(panel(target('SELECT 1 FROM "m"'), timeFrom="1h"))
    [request] = dash.panel_requests(panel(target('SELECT 1 FROM "m"', policy="sparkscope_1m", hide=True)))
    assert request.rp == "sparkscope_1m" and request.hidden
    with pytest.raises(ModelError, match="adhoc"):
        opened({"name": "f", "type": "adhoc", "datasource": DS})


# ---------------------------------------------------------------- intervals


@pytest.mark.parametrize("range_ms,w,options,expected", [
    (6 * HOUR, 24, {}, ("10s", 10_000)),                         # 11.25 s rounds to 10 s
    (30 * 60_000, 12, {}, ("5s", 5_000)),                        # 1.9 s rounds to 2 s: the datasource's 5 s wins
    (7 * 24 * HOUR, 24, {}, ("5m", 300_000)),
    (30 * 24 * HOUR, 24, {}, ("20m", 1_200_000)),
    (HOUR, 24, {"maxDataPoints": 100}, ("30s", 30_000)),          # maxDataPoints before the width
    (HOUR, 24, {"interval": "1m"}, ("1m", 60_000)),              # the panel's min interval
    (HOUR, 24, {"interval": "90s"}, ("1m", 90_000)),             # text floored to its largest unit
    (5 * 60_000, 24, {"interval": "1ms"}, ("200ms", 200)),
    (730 * 24 * HOUR, 1, {}, ("7d", 604_800_000)),               # one week is written 7d (viewport 1200: 50 px)
])
def test_interval_table(range_ms, w, options, expected):
    dash = opened(start=NOW - range_ms, end=NOW, viewport_px=1200 if w == 1 else 1920)
    the_panel = panel(target('SELECT 1 FROM "m"'), w=w, **options)
    assert dash.interval(the_panel) == expected
    assert sent_query(dash, 'SELECT mean("v") FROM "m" GROUP BY time($__interval), time($interval) '
                      'LIMIT $__interval_ms', w=w, **options) == (
        f'SELECT mean("v") FROM "m" GROUP BY time({expected[0]}), time({expected[0]}) LIMIT {expected[1]}')


def test_an_interval_of_a_year_or_an_unknown_width_is_handled_as_grafana_does():
    assert opened(start=NOW - 6 * HOUR).interval(None) == ("30s", 30_000)   # 500 px when unknown
    ten_years = opened(start=NOW - 3650 * 24 * HOUR, viewport_px=240)
    with pytest.raises(ModelError, match="not an InfluxQL duration"):
        ten_years.interval(panel(target('SELECT 1 FROM "m"'), w=1))
    # A panel that does not use the interval is sent all the same.
    assert sent_query(ten_years, 'SELECT 1 FROM "m"', w=1) == 'SELECT 1 FROM "m"'
    with pytest.raises(ModelError, match="annotation query"):
        opened().interpolate("GROUP BY time($__interval)", where="annotation")


AUTO = {"name": "interval", "type": "interval", "auto": True, "auto_count": 200, "auto_min": "10s",
        "query": "10s,30s,1m", "current": {"text": "auto", "value": "$__auto_interval_interval"}}


@pytest.mark.parametrize("range_ms,expected", [(6 * HOUR, "2m"), (30 * 60_000, "10s"), (5 * 60_000, "10s"),
                                               (7 * 24 * HOUR, "1h")])
def test_an_auto_interval_variable_is_calculated_from_the_range(range_ms, expected):
    dash = opened(AUTO, start=NOW - range_ms)
    assert dash.variables["interval"].current == [expected]
    # A dashboard variable named interval wins over the panel's interval.
    assert sent_query(dash, 'SELECT 1 FROM "m" GROUP BY time($interval)') == \
        f'SELECT 1 FROM "m" GROUP BY time({expected})'


def test_an_interval_variable_keeps_a_fixed_pick():
    fixed = dict(AUTO, current={"text": "1m", "value": "1m"})
    assert opened(fixed).variables["interval"].current == ["1m"]
    assert opened(fixed, url_vars={"interval": "$__auto_interval_interval"}).variables["interval"].current == ["2m"]
    assert opened(AUTO, url_vars={"interval": "30s"}).variables["interval"].current == ["30s"]


# ---------------------------------------------------------------- time macros and dates


FROM = 1_710_058_542_123   # 2024-03-10T08:15:42.123Z (Paris: UTC+1)
TO = 1_719_835_200_000     # 2024-07-01T12:00:00Z (Paris: UTC+2)


@pytest.mark.parametrize("zone,text,expected", [
    ("UTC", "${__from:date:YYYY-MM-DD[T]HH:mm:00Z}", "2024-03-10T08:15:00+00:00"),
    ("Europe/Paris", "${__from:date:YYYY-MM-DD[T]HH:mm:00Z}", "2024-03-10T09:15:00+01:00"),
    ("Europe/Paris", "${__to:date:YYYY-MM-DD[T]HH:mm:00Z}", "2024-07-01T14:00:00+02:00"),
    ("Europe/Paris", "${__from:date:ddd, Do MMM YYYY h:mm:ss.SSS A ZZ}", "Sun, 10th Mar 2024 9:15:42.123 AM +0100"),
    ("Europe/Paris", "${__from:date}", "2024-03-10T08:15:42.123Z"),
    ("Europe/Paris", "${__from:date:iso}", "2024-03-10T08:15:42.123Z"),
    ("UTC", "${__from:date:seconds}", "1710058542"),
    ("UTC", "${__from:date:ms} $__from ${__to}", f"{FROM} {FROM} {TO}"),
    ("UTC", "${__from:date:X x}", f"1710058542 {FROM}"),
    ("America/New_York", "${__from:date:YYYY-MM-DD HH:mm Z}", "2024-03-10 04:15 -04:00"),  # a DST day
])
def test_date_formats_in_the_viewers_time_zone(zone, text, expected):
    dash = opened(start=FROM, end=TO, timezone=zone)
    assert dash.interpolate(text) == expected


def test_an_unmodelled_moment_token_is_refused():
    dash = opened(start=FROM, end=TO)
    for fmt in ("wo", "YYYY-[W]WW", "gggg", "N"):
        with pytest.raises(ModelError, match="moment.js format token"):
            dash.interpolate("${__from:date:" + fmt + "}")


# ---------------------------------------------------------------- panels: expressions, annotations


def series(values: list[list], tags: dict | None = None, column: str = "v") -> dict:
    return {"name": "m", **({"tags": tags} if tags else {}), "columns": ["time", column], "values": values}


def test_a_math_expression_divides_series_joined_on_time_and_hides_its_inputs():
    fake = FakeInflux({'"gc"': [series([[1000, 10.0], [2000, 20.0]])],
                       '"run"': [series([[1000, 100.0], [3000, 50.0]])]})
    dash = Dashboard12(board(), fake, NOW - HOUR, NOW)
    share = panel(target('SELECT sum("v") FROM "gc"', "A", hide=True),
                  target('SELECT sum("v") FROM "run"', "B", hide=True),
                  {"datasource": EXPR, "type": "math", "expression": "$A / $B", "refId": "C"})
    assert dash.run_panel(share) == {"C": [{"name": "C", "tags": {}, "columns": ["time", "C"],
                                            "values": [[1000, 0.1]]}]}
    assert len(fake.sent) == 2


def test_a_math_expression_joins_series_by_labels_and_leaves_hidden_unused_queries_unsent():
    fake = FakeInflux({'"gc"': [series([[0, 1.0]], {"executorid": "1"}), series([[0, 3.0]], {"executorid": "2"})],
                       '"run"': [series([[0, 0.0]], {"executorid": "1"}), series([[0, 6.0]], {"executorid": "2"})],
                       '"unused"': [series([[0, 1.0]])]})
    dash = Dashboard12(board(), fake, NOW - HOUR, NOW)
    share = panel(target('SELECT "v" FROM "gc"', "A"), target('SELECT "v" FROM "run"', "B", hide=True),
                  target('SELECT "v" FROM "unused"', "D", hide=True),
                  {"datasource": EXPR, "type": "math", "expression": "${A} * 2 / $B", "refId": "C"})
    got = dash.run_panel(share)
    assert sorted(got) == ["A", "C"] and not any('"unused"' in q for q, _ in fake.sent)
    by_executor = {s["tags"]["executorid"]: s["values"] for s in got["C"]}
    assert by_executor == {"1": [[0, float("inf")]], "2": [[0, 1.0]]}
    with pytest.raises(ModelError, match="math only"):
        dash.run_panel(panel(target('SELECT "v" FROM "gc"'),
                             {"datasource": EXPR, "type": "reduce", "expression": "$A", "refId": "C"}))


def test_annotation_columns_map_by_name_to_regions_and_points():
    query = "SELECT \"text\", \"end_time_ms\", \"status\" FROM \"q\" WHERE \"applicationid\" =~ /^$v$/ AND $timeFilter"
    fake = FakeInflux({'KEY = "v"': tag_values("a.b"),
                       '"q"': [{"name": "q", "columns": ["time", "text", "end_time_ms", "status"],
                                "values": [[1000, "q1", 5000.0, "SUCCEEDED"], [2000, "q2", None, "RUNNING, slow"]]}]})
    dash = Dashboard12(board(picker()), fake, NOW - HOUR, NOW, relative_from="now-1h")
    annotation = {"name": "SQL", "datasource": DS, "enable": True,
                  "target": {"query": query, "rawQuery": True, "textColumn": "text", "tagsColumn": "status",
                             "timeEndColumn": "end_time_ms"}}
    assert dash.annotation_events(annotation) == [
        {"time": 1000, "timeEnd": 5000, "title": None, "text": "q1", "tags": ["SUCCEEDED"]},
        {"time": 2000, "timeEnd": None, "title": None, "text": "q2", "tags": ["RUNNING", "slow"]}]
    assert fake.sent[-1][0].endswith(f"=~ /^a\\.b$/ AND time >= {NOW - HOUR}ms and time <= {NOW}ms")
    point = dict(annotation, target=dict(annotation["target"], timeEndColumn=None, textColumn="missing"))
    with pytest.raises(ModelError, match="'missing'"):
        dash.annotation_events(point)


# ---------------------------------------------------------------- our dashboards


def outer_columns(query: str) -> list[str]:
    """The columns InfluxDB names for a query's outermost SELECT."""
    start = re.match(r"\s*SELECT\s+", query, re.I).end()
    depth, end = 0, start
    while end < len(query):
        depth += {"(": 1, ")": -1}.get(query[end], 0)
        if depth == 0 and query[end:end + 6].upper() == " FROM ":
            break
        end += 1
    items, depth, item = [], 0, ""
    for c in query[start:end]:
        depth += {"(": 1, ")": -1}.get(c, 0)
        if c == "," and depth == 0:
            items, item = items + [item], ""
        else:
            item += c
    names = []
    for item in items + [item]:
        alias = re.search(r'\bAS\s+"([^"]+)"\s*$', item.strip(), re.I)
        function = re.match(r"\s*(\w+)\(", item)
        # A cast ("status"::tag) names the column by the key alone.
        bare = re.sub(r"::(tag|field|integer|float|string|boolean)$", "", item.strip())
        names.append(alias.group(1) if alias else function.group(1) if function else bare.strip('"'))
    return names


PLAUSIBLE = {"applicationid": "app-20240101000000-0000", "executorid": "1", "executor": "1", "rp": "sparkscope",
             "mean_field": "value", "bucket": "10s", "executors": ".*", "profile": "p-1", "kind": "cpu",
             "unit": "ns", "text": "job 1", "status": "SUCCEEDED", "event": "added", "direction": "read",
             "device": "sda", "label": "main", "stage": "1", "top": 1.5e9}
TAGS = {"username": ["none", "spark"], "executorid": ["driver", "1", "2"], "name": ["sda", "loop0"],
        "kind": ["cpu", "wall"]}


def plausible_influx(query: str, rp: str | None = None) -> list[dict]:
    """Series shaped as InfluxDB answers the query: tag values for SHOW TAG VALUES, one row of the
    outer SELECT's columns otherwise."""
    if query.upper().startswith("SHOW TAG VALUES"):
        key = re.search(r'WITH KEY = "(\w+)"', query).group(1)
        return [{"name": "m", "columns": ["key", "value"], "values": [[key, v] for v in TAGS.get(key, ["x"])]}]
    columns = outer_columns(query)
    return [{"name": "m", "columns": ["time", *columns],
             "values": [[NOW - HOUR, *(PLAUSIBLE.get(c, 42.0) for c in columns)]]}]


@pytest.mark.parametrize("path", DASHBOARDS, ids=[p.name for p in DASHBOARDS])
@pytest.mark.parametrize("range_ms,zone", [(30 * 60_000, "UTC"), (6 * HOUR, "Europe/Paris"),
                                           (7 * 24 * HOUR, "UTC")])
def test_our_dashboards_open_and_every_panel_and_annotation_is_sent(path, range_ms, zone):
    board_ = json.loads(path.read_text())
    relative = f"now-{range_ms // 60_000}m"
    dash = Dashboard12(board_, plausible_influx, NOW - range_ms, NOW, relative_from=relative, timezone=zone)
    assert dash.variables, path.name
    for the_panel in dash.panels():
        for request in dash.panel_requests(the_panel):
            check_single_statement(request.query)
            assert not re.search(r"\$\w|\[\[", request.query), request.query
        dash.run_panel(the_panel)
    for annotation in board_.get("annotations", {}).get("list", []):
        dash.annotation_events(annotation)


@pytest.mark.parametrize("path", DASHBOARDS, ids=[p.name for p in DASHBOARDS])
def test_our_dashboards_keep_a_crafted_run_id_inside_one_statement(path):
    """A run id is whatever spark.app.id says, and a link can carry any: every
    query the dashboard sends with it, variables' included, stays one statement."""
    board_ = json.loads(path.read_text())
    dash = Dashboard12(board_, plausible_influx, NOW - 6 * HOUR, NOW, relative_from="now-6h",
                       url_vars={"applicationid": CRAFTED})
    assert dash.variables["applicationid"].current == [CRAFTED]
    for the_panel in dash.panels():
        dash.run_panel(the_panel)
    for annotation in board_.get("annotations", {}).get("list", []):
        dash.annotation_events(annotation)
    for query, _ in dash.sent:
        check_single_statement(query)
