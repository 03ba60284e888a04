"""Grafana's HTTP API as the tests and the benchmarks use it.

Panels are run the way Grafana's UI runs them: template variables
($applicationid ...) are substituted here, as the browser would, and the
query goes to /api/ds/query, where Grafana expands $timeFilter and
$__interval and asks InfluxDB.
"""

from __future__ import annotations

import base64
import json
import re
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

    def request(self, path: str, body: Any = None, timeout: float = 30.0) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method="POST" if data else "GET")
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


def substitute(query: str, variables: dict[str, str]) -> str:
    """Replace $name and ${name} of dashboard variables; Grafana's own macros
    ($timeFilter, $__interval) are left for the server."""
    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        return variables.get(name, match.group(0))

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", value, query)


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
