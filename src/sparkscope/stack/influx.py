"""A minimal InfluxDB 1.x HTTP client: ping, query, write (stdlib only)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Optional

from sparkscope import http
from sparkscope.errors import SparkscopeError


class InfluxError(SparkscopeError):
    """InfluxDB could not be reached or refused a request."""


class WriteRefused(InfluxError):
    """InfluxDB answered a write with an error: reason is its own text, e.g.
    'engine: error writing WAL entry: write /...: no space left on device'."""

    def __init__(self, status: int, reason: str):
        super().__init__(f"InfluxDB refused a write ({status}): {reason}")
        self.status = status
        self.reason = reason


def _request(url: str, data: bytes | None = None, timeout: float = 10.0) -> tuple[int, bytes]:
    status, body, _ = _exchange(url, data, timeout)
    return status, body


def _exchange(url: str, data: bytes | None = None, timeout: float = 10.0) -> tuple[int, bytes, Any]:
    req = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
    try:
        with http.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read(), resp.headers
    except urllib.error.HTTPError as err:
        return err.code, err.read(), err.headers
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise InfluxError(
            f"InfluxDB not reachable at {url.split('/', 3)[2]} ({reason}): is the stack up? run ./sparkscope up"
        ) from err


def ping(base_url: str, timeout: float = 2.0) -> bool:
    try:
        status, _ = _request(f"{base_url}/ping", timeout=timeout)
    except InfluxError:
        return False
    return status == 204


def server_version(base_url: str, timeout: float = 2.0) -> Optional[str]:
    """What InfluxDB says it is (X-Influxdb-Version of /ping); None when it does not
    answer or does not know (a `go install` build says "unknown")."""
    try:
        status, _, headers = _exchange(f"{base_url}/ping", timeout=timeout)
    except InfluxError:
        return None
    version = headers.get("X-Influxdb-Version") if status == 204 else None
    return None if version in (None, "", "unknown") else version


@dataclass
class DatabaseStats:
    size_bytes: int  # TSM files of its shards (diskBytes), WAL not counted
    series: int


def database_stats(base_url: str, database: str) -> DatabaseStats:
    """Size and series count of a database, from InfluxDB's own statistics
    (SHOW STATS), so it reads the same natively and in a container."""
    shards = query(base_url, "SHOW STATS FOR 'shard'")
    size = sum(row[s["columns"].index("diskBytes")] for s in shards
               if s.get("tags", {}).get("database") == database for row in s.get("values", []))
    databases = query(base_url, "SHOW STATS FOR 'database'")
    series = sum(row[s["columns"].index("numSeries")] for s in databases
                 if s.get("tags", {}).get("database") == database for row in s.get("values", []))
    return DatabaseStats(int(size), int(series))


def query(base_url: str, statement: str, database: str | None = None, epoch: str = "ms",
          timeout: float = 30.0) -> list[dict[str, Any]]:
    """Run InfluxQL; return the series of the first statement's result.

    Each series is a dict with name, tags (if grouped), columns, values.
    Statements that change state (CREATE, ALTER, DROP) are sent as POST.
    """
    params = {"q": statement, "epoch": epoch}
    if database:
        params["db"] = database
    body = urllib.parse.urlencode(params).encode()
    is_read = statement.lstrip().upper().startswith(("SELECT", "SHOW"))
    if is_read:
        status, raw = _request(f"{base_url}/query?{body.decode()}", timeout=timeout)
    else:
        status, raw = _request(f"{base_url}/query", data=body, timeout=timeout)
    try:
        payload = json.loads(raw or b"{}")
    except json.JSONDecodeError as err:
        raise InfluxError(f"InfluxDB answered {status} with non-JSON: {raw[:200]!r}") from err
    if status != 200 or "error" in payload:
        raise InfluxError(f"InfluxDB refused {statement!r}: {payload.get('error', status)}")
    results = payload.get("results", [{}])
    first = results[0] if results else {}
    if "error" in first:
        raise InfluxError(f"InfluxDB refused {statement!r}: {first['error']}")
    return first.get("series", [])


def write(base_url: str, database: str, lines: str, precision: str = "s", policy: str | None = None) -> None:
    params = {"db": database, "precision": precision, **({"rp": policy} if policy else {})}
    url = f"{base_url}/write?" + urllib.parse.urlencode(params)
    status, raw = _request(url, data=lines.encode())
    if status != 204:
        try:
            reason = str(json.loads(raw)["error"])
        except (ValueError, KeyError, TypeError):
            reason = raw[:300].decode(errors="replace").strip() or "(no message)"
        raise WriteRefused(status, reason)


def database_statements(database: str, retention: str) -> list[str]:
    """What influxdb/init/01-create-database.sh runs in Docker, as statements.

    CREATE DATABASE is idempotent when the policy matches; ALTER brings an
    existing database's policy to the configured retention.
    """
    return [
        f'CREATE DATABASE "{database}" WITH DURATION {retention} REPLICATION 1 NAME "sparkscope"',
        f'ALTER RETENTION POLICY "sparkscope" ON "{database}" DURATION {retention} DEFAULT',
    ]


def ensure_database(base_url: str, database: str, retention: str) -> None:
    create, alter = database_statements(database, retention)
    try:
        query(base_url, create)
    except InfluxError as err:
        if "conflict" not in str(err):
            raise
        query(base_url, alter)
