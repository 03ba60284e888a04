"""A minimal InfluxDB 1.x HTTP client: ping, query, write, users (stdlib only).

InfluxDB runs with authentication on (influxdb/influxdb.conf): every call
but ping names an Endpoint, the address and the user it acts as. The stack
has three users, each with the least it needs: an admin (the CLI's setup
and statistics), a writer (Telegraf, the CLI's own writes) and a reader
(Grafana, the report, the summary)."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

from sparkscope.store import http
from sparkscope.errors import SparkscopeError


class InfluxError(SparkscopeError):
    """InfluxDB could not be reached or refused a request."""


class Refused(InfluxError):
    """InfluxDB refused the request's user (401: no or wrong credentials; 403: not
    its privilege); said is InfluxDB's own text, e.g. 'authorization failed'."""

    def __init__(self, message: str, status: int, said: str):
        super().__init__(message)
        self.status = status
        self.said = said


class WriteRefused(InfluxError):
    """InfluxDB answered a write with an error: reason is its own text, e.g.
    'engine: error writing WAL entry: write /...: no space left on device'."""

    def __init__(self, status: int, reason: str):
        super().__init__(f"InfluxDB refused a write ({status}): {reason}")
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class Endpoint:
    """InfluxDB's address and the user requests go as ("" = none: refused
    when authentication is on). The password never shows in repr or str."""

    url: str
    user: str = ""
    password: str = field(default="", repr=False)

    def __str__(self) -> str:
        return self.url


Where = Union[Endpoint, str]  # a bare URL is an Endpoint without a user


def _endpoint(where: Where) -> Endpoint:
    return where if isinstance(where, Endpoint) else Endpoint(str(where))


def _request(where: Where, path: str, data: bytes | None = None, timeout: float = 10.0) -> tuple[int, bytes]:
    status, body, _ = _exchange(where, path, data, timeout)
    return status, body


def _exchange(where: Where, path: str, data: bytes | None = None,
              timeout: float = 10.0) -> tuple[int, bytes, Any]:
    endpoint = _endpoint(where)
    url = endpoint.url + path
    req = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
    if endpoint.user:
        # Basic auth in a header: never in the URL, where logs and errors would show it.
        req.add_header("Authorization", http.basic_auth(endpoint.user, endpoint.password))
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


def refused_credentials(status: int, endpoint: Endpoint) -> str:
    """What to tell the user when InfluxDB answers 401/403 to this endpoint."""
    who = f"user {endpoint.user!r}" if endpoint.user else "a request without a user"
    if status == 403 and endpoint.user:
        return f"InfluxDB at {endpoint.url} refused user {endpoint.user!r} (403): not this user's privilege"
    return (f"InfluxDB at {endpoint.url} refused {who} ({status}): the INFLUXDB_*_USER and "
            f"INFLUXDB_*_PASSWORD in .env must be the ones ./sparkscope up set up (it writes them when "
            f"missing and creates the users)")


def ping(base_url: Where, timeout: float = 2.0) -> bool:
    try:
        status, _ = _request(base_url, "/ping", timeout=timeout)
    except InfluxError:
        return False
    return status == 204


def server_version(base_url: Where, timeout: float = 2.0) -> Optional[str]:
    """What InfluxDB says it is (X-Influxdb-Version of /ping); None when it does not
    answer or does not know (a `go install` build says "unknown")."""
    try:
        status, _, headers = _exchange(base_url, "/ping", timeout=timeout)
    except InfluxError:
        return None
    version = headers.get("X-Influxdb-Version") if status == 204 else None
    return None if version in (None, "", "unknown") else version


@dataclass
class DatabaseStats:
    size_bytes: int  # TSM files of its shards (diskBytes), WAL not counted
    series: int


def database_stats(base_url: Where, database: str) -> DatabaseStats:
    """Size and series count of a database, from InfluxDB's own statistics
    (SHOW STATS, an admin's statement), so it reads the same natively and in a container."""
    shards = query(base_url, "SHOW STATS FOR 'shard'")
    size = sum(row[s["columns"].index("diskBytes")] for s in shards
               if s.get("tags", {}).get("database") == database for row in s.get("values", []))
    databases = query(base_url, "SHOW STATS FOR 'database'")
    series = sum(row[s["columns"].index("numSeries")] for s in databases
                 if s.get("tags", {}).get("database") == database for row in s.get("values", []))
    return DatabaseStats(int(size), int(series))


def query(base_url: Where, statement: str, database: str | None = None, epoch: str = "ms",
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
        status, raw = _request(base_url, f"/query?{body.decode()}", timeout=timeout)
    else:
        status, raw = _request(base_url, "/query", data=body, timeout=timeout)
    if status in (401, 403):
        try:
            said = json.loads(raw or b"{}").get("error", "")
        except (ValueError, AttributeError):
            said = ""
        raise Refused(f"{refused_credentials(status, _endpoint(base_url))} [InfluxDB: {said or status}]",
                      status, said)
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


def rows(series: list[dict]) -> list[dict]:
    """Each value row of a query's series as a dict: its series' tags, then its
    columns (a field named like a tag wins: the annotator's "host" field beside
    Telegraf's "host" tag says more), and "_measurement", the series' name."""
    out = []
    for s in series:
        for values in s.get("values", []):
            row = {**(s.get("tags") or {}), **dict(zip(s["columns"], values))}
            row["_measurement"] = s.get("name")
            out.append(row)
    return out


def write(base_url: Where, database: str, lines: str, precision: str = "s", policy: str | None = None) -> None:
    params = {"db": database, "precision": precision, **({"rp": policy} if policy else {})}
    status, raw = _request(base_url, "/write?" + urllib.parse.urlencode(params), data=lines.encode())
    if status != 204:
        try:
            reason = str(json.loads(raw)["error"])
        except (ValueError, KeyError, TypeError):
            reason = raw[:300].decode(errors="replace").strip() or "(no message)"
        raise WriteRefused(status, reason)


# InfluxDB refuses a write dated further ahead than this (1.12+, FUTURE LIMIT), as
# Telegraf's ingest guard does (ingest_guard.FUTURE_LIMIT_S): a point dated years
# ahead would make a shard that outlives the retention.
FUTURE_LIMIT = "10m"
WRITE_LIMITS_SINCE = (1, 12)  # the first InfluxDB 1.x with FUTURE LIMIT / PAST LIMIT


def write_limits(retention: str) -> str:
    """The clause a policy of this duration gets on InfluxDB 1.12+: nothing ahead
    of FUTURE_LIMIT, nothing older than the policy keeps."""
    return f" FUTURE LIMIT {FUTURE_LIMIT}" + ("" if retention == "INF" else f" PAST LIMIT {retention}")


def has_write_limits(version: Optional[str]) -> Optional[bool]:
    """Whether an InfluxDB of this X-Influxdb-Version knows FUTURE/PAST LIMIT; None
    when the version is unknown (a `go install` build): then only asking tells."""
    match = re.match(r"v?(\d+)\.(\d+)", version or "")
    return None if not match else (int(match.group(1)), int(match.group(2))) >= WRITE_LIMITS_SINCE


def database_statements(database: str, retention: str, limits: bool = False) -> list[str]:
    """What influxdb/setup.sh runs in Docker, as statements.

    CREATE DATABASE is idempotent when the policy matches; ALTER brings an
    existing database's policy to the configured retention (and, with limits,
    the write limits of InfluxDB 1.12+).
    """
    clause = write_limits(retention) if limits else ""
    return [
        # The limits come before NAME: InfluxQL's order for CREATE DATABASE ... WITH.
        f'CREATE DATABASE "{database}" WITH DURATION {retention} REPLICATION 1{clause} NAME "sparkscope"',
        f'ALTER RETENTION POLICY "sparkscope" ON "{database}" DURATION {retention} DEFAULT{clause}',
    ]


def with_write_limits(base_url: Where, run: Callable[[bool], None]) -> None:
    """run(limits) with the write limits where the server has them: by its version
    when it says one, else by trying (an older server's parser refuses FUTURE)."""
    known = has_write_limits(server_version(base_url))
    if known is not None:
        run(known)
        return
    try:
        run(True)
    except InfluxError as err:
        if "FUTURE" not in str(err):
            raise
        run(False)


def ensure_database(base_url: Where, database: str, retention: str) -> None:
    def run(limits: bool) -> None:
        create, alter = database_statements(database, retention, limits)
        try:
            query(base_url, create)
        except InfluxError as err:
            if "conflict" not in str(err):
                raise
            query(base_url, alter)
    with_write_limits(base_url, run)


# --- InfluxQL quoting: stored values never become code -------------------------------

def string_literal(value: str) -> str:
    """value as an InfluxQL string literal, quotes included: 'it\\'s'. A newline
    (the events listener stores one as sent) as \\n: InfluxQL refuses it raw."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"


def identifier(name: str) -> str:
    """name as a quoted InfluxQL identifier: "a\\"b"."""
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


# --- users: who may do what -----------------------------------------------------------

@dataclass(frozen=True)
class Users:
    """The stack's three InfluxDB users (settings.Settings.influx_users)."""
    admin: Endpoint
    writer: Endpoint
    reader: Endpoint


def user_statements(users: Users, database: str, existing: set[str]) -> list[str]:
    """What brings writer and reader to their password and their one privilege on
    database; the admin is created before (create_first_admin)."""
    out = []
    for endpoint, privilege in ((users.writer, "WRITE"), (users.reader, "READ")):
        name, password = identifier(endpoint.user), string_literal(endpoint.password)
        if endpoint.user in existing:
            out.append(f"SET PASSWORD FOR {name} = {password}")
        else:
            out.append(f"CREATE USER {name} WITH PASSWORD {password}")
        out.append(f"REVOKE ALL PRIVILEGES ON {identifier(database)} FROM {name}")
        out.append(f"GRANT {privilege} ON {identifier(database)} TO {name}")
    return out


def ensure_users(users: Users, database: str, retention: str) -> None:
    """Make InfluxDB (authentication on) hold our three users with the passwords
    of .env, and the database. On a server with no user yet (a new one, or one
    that ran without authentication before: its data stay) the first admin may
    be created without credentials, as InfluxDB allows exactly that."""
    admin = users.admin
    try:
        names = {row[0] for s in query(admin, "SHOW USERS") for row in s.get("values", [])}
    except Refused:
        if not _create_first_admin(admin):
            raise
        names = {admin.user}
    ensure_database(admin, database, retention)
    for statement in user_statements(users, database, names):
        query(admin, statement)


def _create_first_admin(admin: Endpoint) -> bool:
    """CREATE the admin without credentials; False when InfluxDB already has users
    (then only a wrong admin password in .env explains the refusal)."""
    statement = (f"CREATE USER {identifier(admin.user)} WITH PASSWORD {string_literal(admin.password)} "
                 f"WITH ALL PRIVILEGES")
    try:
        query(Endpoint(admin.url), statement)
    except Refused as err:
        if err.status == 401:
            return False  # users exist: only the admin's own password opens the door
        raise
    return True
