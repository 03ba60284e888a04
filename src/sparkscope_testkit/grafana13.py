"""What Grafana 13 sends to InfluxDB for one of our dashboards, without Grafana.

Grafana 13 opens our classic (v1) JSON differently from 12.4 in two ways
(docs/grafana.md says where each fact comes from):

1. It converts the dashboard to the v2 schema when it loads it. Every panel
   becomes an element named "panel-<id>" in a map, so two panels with one id
   (or two without an id) collapse into one, and Grafana's own data-loss
   check then refuses the conversion. Grafana 12.4 renumbers such panels and
   shows them all. tools/dashcheck -grafana13 converts and decodes the whole
   dashboard with the foundation-sdk v2 models; this module refuses what the
   conversion loses before it runs a query.
2. The InfluxDB datasource is the external plugin grafana-influxdb-datasource
   (id still `influxdb`), with its own interpolation:
   - a value that parses as a number is inserted raw;
   - a multi-value variable becomes (a|b), each value regex-escaped;
   - any other single value is regex-escaped only when the query holds the
     variable ($name, ${name} or ${name:format}) inside a regex literal, and
     then everywhere in that query; else it is inserted raw. A regex literal
     is a /.../ that opens where no operand stands before it (after =~, !~,
     FROM, SELECT, BY, a comma, a parenthesis), outside strings and
     comments (--, // and /* */);
   - this holds in panel, variable and annotation queries alike (Grafana 12
     never escapes in a variable query);
   - an explicit ${name:format} is formatted by Grafana's template service,
     as in 12;
   - $timeFilter of a variable query is replaced by the backend, in ms;
   - an annotation's columns are read from its query (the target) only.

Where the plugin's behaviour is not certain (an include-All variable that is
not multi-value, with All selected and no custom all value, outside a regex
literal; a variable query whose series have several value columns), the
model raises ModelError: stricter than Grafana 13, never looser.
"""

from __future__ import annotations

import re
from typing import List, Union

from sparkscope_testkit.grafana12 import (ModelError, Variable, _metric_find_values, escape_regex,
                                          iter_panels, starts_with_number, Dashboard12)

# InfluxQL words after which a '/' opens a regex literal (SELECT /f/, FROM /m/, GROUP BY /t/);
# after any other word it is a division.
_KEYWORDS_BEFORE_REGEX = {"select", "from", "by"}
_WORD = re.compile(r"[\w$]")


def _delimited(query: str, start: int, delimiter: str, single_line: bool) -> tuple[str, int]:
    """(body, index after the closing delimiter) of a backslash-escaped span opening at start."""
    i = start + 1
    while i < len(query) and query[i] != delimiter and not (single_line and query[i] == "\n"):
        i += 2 if query[i] == "\\" else 1
    return query[start + 1:i], (i + 1 if i < len(query) and query[i] == delimiter else i)


def regex_literals(query: str) -> list[str]:
    """The bodies of the query's regex literals, as the plugin finds them."""
    literals: list[str] = []
    after_operand = False
    i = 0
    while i < len(query):
        c = query[i]
        if c.isspace():
            i += 1
        elif query.startswith("--", i) or query.startswith("//", i):
            end = query.find("\n", i)
            i = len(query) if end < 0 else end
        elif query.startswith("/*", i):
            end = query.find("*/", i + 2)
            i = len(query) if end < 0 else end + 2
        elif c in "'\"":
            _, i = _delimited(query, i, c, False)
            after_operand = True
        elif c == "/" and not after_operand:
            body, i = _delimited(query, i, "/", True)
            literals.append(body)
            after_operand = True
        elif _WORD.match(c):
            start = i
            while i < len(query) and _WORD.match(query[i]):
                i += 1
            word = query[start:i]
            if word.isdigit() and query[i:i + 1] == ".":
                i += 1  # a number keeps its trailing '.'
            after_operand = query[start - 1:start] == "." or word.lower() not in _KEYWORDS_BEFORE_REGEX
        else:
            after_operand = c in ")]}"
            i += 1
    return literals


def in_regex_literal(name: str, query: str) -> bool:
    """Whether $name, ${name} or ${name:format} stands in one of the query's regex literals."""
    reference = re.compile(r"\$(?:" + re.escape(name) + r"\b|\{" + re.escape(name) + r"(?::[^}]*)?\})", re.ASCII)
    return any(reference.search(body) for body in regex_literals(query))


def conversion_losses(board: dict) -> list[str]:
    """What Grafana 13's v1 -> v2 conversion loses of the dashboard: panels whose element
    names ("panel-<id>", id 0 when missing) collide. Grafana refuses such a conversion."""
    seen: dict[int, str] = {}
    losses = []
    for panel in iter_panels(board):
        if panel.get("type") == "row":
            continue  # a row is layout in v2, not an element
        raw = panel.get("id", 0)
        if isinstance(raw, bool) or not isinstance(raw, (int, float)) or raw != int(raw):
            losses.append(f"panel {panel.get('title')!r}: id {raw!r} is not a whole number")
            continue
        panel_id = int(raw)
        if panel_id in seen:
            losses.append(f"panels {seen[panel_id]!r} and {panel.get('title')!r} both become element "
                          f"panel-{panel_id}: Grafana 13 keeps one and refuses the conversion (data loss)")
        else:
            seen[panel_id] = panel.get("title")
    return losses


class Dashboard13(Dashboard12):
    """A dashboard opened as Grafana 13 with the grafana-influxdb-datasource plugin opens it."""

    RULES = "Grafana 13"
    VARIABLE_TIME_FILTER_RELATIVE = False  # the backend replaces it, with the range in ms

    def __init__(self, board: dict, *args, **kwargs):
        losses = conversion_losses(board)
        if losses:
            raise ModelError("Grafana 13 converts this dashboard to v2 and loses part of it: " + "; ".join(losses)
                             + ". Give every panel its own id (tools/dashcheck -grafana13 shows the rest)")
        super().__init__(board, *args, **kwargs)

    def _influx_format(self, var: Variable, value: Union[str, List[str]], form: str, pos: int, template: str,
                       where: str) -> str:
        if isinstance(value, str) and starts_with_number(value):
            return value
        if var.multi:
            if isinstance(value, str):
                return escape_regex(value)
            return "(" + "|".join(escape_regex(v) for v in value) + ")"
        if form == "[[":
            in_regex = False  # the plugin looks for $name and ${name} only
        else:
            in_regex = in_regex_literal(var.name, template)
        if in_regex:
            return escape_regex(value) if isinstance(value, str) else "(" + "|".join(map(escape_regex, value)) + ")"
        if isinstance(value, list):
            raise ModelError(f"${var.name} (include All, not multi-value) with All selected outside a regex "
                             f"literal of {template!r}: how Grafana 13 writes a list there is not modelled; give "
                             "it an explicit format (${" + var.name + ":regex}) or a custom all value")
        return value

    def _option_texts(self, query: str, series: list[dict]) -> list[str]:
        if query.lstrip().upper().startswith("SELECT"):
            for one in series:
                values = [c for c in one.get("columns") or [] if c != "time"]
                if len(values) > 1:
                    raise ModelError(f"variable query {query!r} answers columns {values}: the plugin takes one "
                                     "field per frame, which one is not modelled; select one column")
        return _metric_find_values(query, series)

    def annotation_events(self, annotation: dict) -> list[dict]:
        target = annotation.get("target") or {}
        for key in ("titleColumn", "textColumn", "tagsColumn", "timeEndColumn"):
            if annotation.get(key) and not target.get(key):
                raise ModelError(f"annotation {annotation.get('name')!r}: {key} is set on the annotation, not "
                                 "on its query: the plugin reads the query's columns only; move it into target")
        return super().annotation_events(annotation)


RULE_SETS = {"grafana12.4": Dashboard12, "grafana13": Dashboard13}
