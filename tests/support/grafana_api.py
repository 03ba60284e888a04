"""Grafana's HTTP API as the tests and the benchmarks use it.

Panels are run the way Grafana's UI runs them: the dashboard's own template
variables ($applicationid ...) and $__from/$__to are substituted here, as the
browser would, and nothing else; the query goes to /api/ds/query, where
Grafana expands $timeFilter and $__interval and asks InfluxDB. The browser
tests (test_browser.py) check the same dashboards through Grafana's own UI.
"""

from __future__ import annotations

import base64
import json
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any


class GrafanaError(RuntimeError):
    """Grafana could not be reached or refused a request."""


@dataclass(frozen=True)
class Grafana:
    url: str
    user: str
    password: str

    def request(self, path: str, body: Any = None, timeout: float = 30.0, method: str = "") -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method or ("POST" if data else "GET"))
        token = base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as err:
            raise GrafanaError(f"Grafana {path} answered {err.code}: {err.read()[:300]!r}") from err
        except (urllib.error.URLError, OSError) as err:
            raise GrafanaError(
                f"Grafana not reachable at {self.url} ({getattr(err, 'reason', err)}): "
                "is the stack up? run ./sparkscope up"
            ) from err

    def dashboard(self, uid: str) -> dict[str, Any]:
        return self.request(f"/api/dashboards/uid/{uid}")["dashboard"]

    def query(self, targets: list[dict[str, Any]], time_from: str, time_to: str = "now") -> dict[str, Any]:
        """POST /api/ds/query; returns {refId: [frames]} and raises on any per-query error."""
        payload = {"queries": targets, "from": time_from, "to": time_to}
        results = self.request("/api/ds/query", payload).get("results", {})
        errors = {ref: r["error"] for ref, r in results.items() if r.get("error")}
        if errors:
            raise GrafanaError(f"panel queries failed: {errors}")
        return {ref: r.get("frames", []) for ref, r in results.items()}


# What the browser fills in besides a dashboard's own variables (InfluxQL
# queries leave Grafana's UI with these replaced), and the macros it leaves
# for the server behind /api/ds/query.
BROWSER_BUILTINS = ("__from", "__to")
SERVER_MACROS = ("timeFilter", "__timeFilter", "interval", "__interval", "__interval_ms")
VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)")
# ${__from:date:<moment.js format>}: the browser formats the range's ends in
# its time zone. The one format the dashboards use, as a browser set to UTC
# writes it; any other fails here instead of passing unreplaced.
DATE_FORMAT = re.compile(r"\$\{(__from|__to):date:([^}]*)\}")
MINUTE_FORMAT = "YYYY-MM-DD[T]HH:mm:00Z"


def defined_variables(board: dict[str, Any]) -> set[str]:
    return {v["name"] for v in board.get("templating", {}).get("list", [])}


def used_variables(text: str) -> set[str]:
    return {m.group(1) or m.group(2) for m in VARIABLE.finditer(text)}


def substitute(query: str, board: dict[str, Any], values: dict[str, str],
               time_from_ms: int = 0, time_to_ms: int = 0) -> str:
    """Replace what Grafana's UI replaces, and nothing more: the board's own
    variables (values must give one for each that the query uses), $__from
    and $__to; server macros stay; any other $name stays literal, as Grafana
    leaves it, so a query using a variable its dashboard lacks fails here too."""
    defined = defined_variables(board)
    builtins = {"__from": str(time_from_ms), "__to": str(time_to_ms)}

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name in defined:
            if name not in values:
                raise KeyError(f"the test gives no value for ${name}, a variable of {board.get('uid')}")
            return values[name]
        return builtins.get(name, match.group(0))

    def date(match: re.Match[str]) -> str:
        if match.group(2) != MINUTE_FORMAT:
            raise ValueError(f"substitute() does not know the date format {match.group(2)!r}")
        at_ms = time_from_ms if match.group(1) == "__from" else time_to_ms
        return time.strftime("%Y-%m-%dT%H:%M:00+00:00", time.gmtime(at_ms // 1000))

    return VARIABLE.sub(value, DATE_FORMAT.sub(date, query))


def frame_rows(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of a /api/ds/query answer as dicts keyed by column name.

    A table frame has one field per column. InfluxQL raw queries in Grafana 10
    instead come back as one (time, value) frame per selected column, named
    "<measurement>.<column>": those are joined back into rows on time.
    """
    rows: dict[Any, dict[str, Any]] = {}
    table_rows = []
    for frame in frames:
        fields = frame["schema"]["fields"]
        columns = frame.get("data", {}).get("values", [])
        if len(fields) == 2 and fields[0]["type"] == "time" and fields[1]["name"] == "value":
            column = frame["schema"].get("name", "value").rsplit(".", 1)[-1]
            for at, value in zip(*columns):
                rows.setdefault(at, {"time": at})[column] = value
        else:
            names = [f["name"] for f in fields]
            table_rows += [dict(zip(names, values)) for values in zip(*columns)]
    return table_rows + [rows[at] for at in sorted(rows)]
