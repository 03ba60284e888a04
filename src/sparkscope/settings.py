"""Ports, paths and credentials: the one place they come from.

Values are read, later ones winning, from `.env.example` (the documented
defaults), `.env` (the user's copy) and the process environment. Docker
compose reads the same `.env`, so both ways of running agree.
"""

from __future__ import annotations

import os
import re
import secrets
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from sparkscope.errors import SparkscopeError
from sparkscope.process import Progress
from sparkscope.store.influx import Endpoint, Users

ROOT = Path(__file__).resolve().parents[2]
PLACEHOLDER_PASSWORD = "change-me"
_RETENTION = re.compile(r"^(INF|(\d+(ns|u|µ|ms|s|m|h|d|w))+)$")
_NAME = re.compile(r"^[A-Za-z0-9_\-]+$")
UNREAD_METRICS_ACTIONS = ("drop", "pass")  # Telegraf's processors.filter actions
# Secrets ./sparkscope up generates into .env when they are missing or empty.
SECRET_KEYS = ("GRAFANA_ADMIN_PASSWORD", "INFLUXDB_ADMIN_PASSWORD", "INFLUXDB_WRITE_PASSWORD",
               "INFLUXDB_READ_PASSWORD", "EVENTS_PASSWORD")
METRICS_STORES = ("influxdb", "thanos", "remote")  # SPARKSCOPE_METRICS_STORE
EVENTS_AUTH_CHOICES = ("auto", "on", "off")  # auto: on when the listener is reachable from other hosts
# A password travels into InfluxQL, Telegraf's TOML, Grafana's YAML and HTTP
# Basic auth; these characters are plain in all of them.
_SECRET = re.compile(r"^[A-Za-z0-9._~\-]{12,}$")


class SettingsError(SparkscopeError):
    """A setting has a value the stack cannot use; the message says which and why."""


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines as docker compose reads them (docs.docker.com/compose/env-file/),
    so that both ways of running the stack see the same values:

    - blank lines and lines starting with # are ignored; `export KEY=VALUE` is KEY=VALUE;
    - an unquoted value ends at whitespace followed by # (an inline comment) and is
      stripped: `KEY=a # note` is "a", `KEY=a#b` is "a#b";
    - a quoted value is what lies between its quotes, # included; after the
      closing quote only whitespace or a # comment may follow. Double quotes
      take the escapes \\n \\r \\t \\\\ \\"; single quotes are literal but for \\'.

    Compose also expands $VAR in unquoted and double-quoted values; sparkscope
    does not, so a $ there is refused (single quotes keep it literal for both)."""
    values: dict[str, str] = {}
    if not path.is_file():
        return values
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{path}:{number}"
        if re.match(r"export\s", line):
            line = line[len("export"):].lstrip()
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key:
            raise SettingsError(f"{where}: expected KEY=VALUE, got {raw!r}")
        if not _ENV_KEY.match(key):
            raise SettingsError(f"{where}: {key!r} is not a variable name (letters, digits, '_' and '.')")
        values[key] = _env_value(value.strip(), where)
    return values


_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"'}


def _env_value(text: str, where: str) -> str:
    """One .env value (after the =, stripped) as compose reads it; see read_env_file."""
    if text[:1] not in ("'", '"'):
        value = re.split(r"\s#", text, maxsplit=1)[0].rstrip()
        if "$" in value:
            raise SettingsError(f"{where}: {value!r} holds a $, which docker compose would expand as a variable "
                                f"and sparkscope would not: put the value in single quotes ('...') to keep it as is")
        return value
    quote, out, i = text[0], [], 1
    while i < len(text) and text[i] != quote:
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            following = text[i + 1]
            if quote == '"' and following in _ESCAPES:
                out.append(_ESCAPES[following])
                i += 2
                continue
            if following == quote:
                out.append(quote)
                i += 2
                continue
        out.append(char)
        i += 1
    if i >= len(text):
        raise SettingsError(f"{where}: the value's {quote} is never closed: {text!r}")
    rest = text[i + 1:].strip()
    if rest and not rest.startswith("#"):
        raise SettingsError(f"{where}: {rest!r} after the closing {quote}: only a # comment may follow a quoted value")
    value = "".join(out)
    if quote == '"' and "$" in value:
        raise SettingsError(f"{where}: {text!r} holds a $, which docker compose would expand in double quotes and "
                            f"sparkscope would not: use single quotes ('...') to keep it as is")
    return value


# What TELEGRAF_BUFFER_LIMIT (.env.example) is sized from: the rated ingest
# (docs/performance.md, "Sizing": 3,500 executors at a 5 s period, points/s stored after the
# filter) times the InfluxDB downtime to ride out (a restart that opens a large
# tsi1 index takes minutes), plus an eighth for what shares the buffer (host
# metrics, annotator events, probes). Each point held costs Telegraf about
# 980 bytes of memory (bench/telegraf_buffer.py, docs/performance.md).
RATED_STORED_POINTS_S = 26_600
INFLUX_DOWNTIME_TO_SURVIVE_S = 300
# Besides the outage itself: Telegraf resumes writing a flush or a retry after
# InfluxDB answers again, and reports arrive in bursts. A clean-clone run of the
# scaled fault test lost 192 of 134,400 points to this with no slack.
INFLUX_RETURN_SLACK_S = 30
BUFFER_BYTES_PER_POINT = 980

@dataclass(frozen=True)
class Settings:
    root: Path
    state_dir: Path
    cache_dir: Path
    grafana_user: str
    grafana_password: str
    http_bind: str
    grafana_port: int
    influxdb_port: int
    graphite_bind: str
    graphite_port: int
    events_port: int
    database: str
    retention: str
    unread_metrics: str  # drop | pass: Spark metrics no panel or report reads (telegraf.conf)
    # No field has a default here: every one comes from load_settings, whose
    # defaults are .env.example's (shipped_defaults).
    telegraf_buffer_limit: int  # points Telegraf keeps while InfluxDB cannot take them (BUFFER_SIZING)
    telegraf_buffer_strategy: str  # memory | disk (telegraf.conf says what each costs)
    grafana_home: str  # the user's Grafana for the native backend (stack/grafana_local.py); "" = PATH
    influxd_binary: str  # the user's own influxd for the native backend; "" = build it (provision/go.py)
    # Natively as root, who InfluxDB, Telegraf and Grafana run as (stack/native.py): "" = the sudo
    # user, else nobody; "root" keeps them root.
    service_user: str
    influxdb_bind: str  # apart from Grafana's http_bind: exposing Grafana keeps InfluxDB private
    # Where Spark's metrics go: influxdb, or thanos (stack/thanos.py: a Receive hashring and Query,
    # natively; docs/scale.md). Events stay in InfluxDB either way.
    metrics_store: str
    thanos_port: int  # the base of the Thanos processes' ports (stack/thanos.layout)
    thanos_ingesters: int
    thanos_replication_factor: int
    # How long the ingesters keep blocks on their own disk (they upload each 2-hour
    # block to the bucket, whence the store gateway serves it), and how long the
    # compactor keeps raw, 5-minute and 1-hour blocks in the bucket (0d: forever).
    # Prometheus durations (THANOS_DURATION), checked here.
    thanos_receive_retention: str
    thanos_retention_raw: str
    thanos_retention_5m: str
    thanos_retention_1h: str
    # remote: a Prometheus-compatible store the user runs (stack/remote_store.py): where Telegraf
    # sends remote write, where PromQL is read, its Basic auth and the CA of its TLS ("" = none).
    remote_write_url: str
    remote_query_url: str
    remote_user: str
    remote_password: str = field(repr=False)
    remote_ca_file: str
    # The tenant the store files the metrics under, sent as remote_tenant_header on every write and
    # read (Mimir, Cortex: X-Scope-OrgID; Thanos Receive: THANOS-TENANT); "" = none sent.
    remote_tenant: str
    remote_tenant_header: str
    # InfluxDB's users (influx.ensure_users); passwords "" until ./sparkscope up writes them to .env
    influx_admin_user: str
    influx_admin_password: str = field(repr=False)
    influx_write_user: str
    influx_write_password: str = field(repr=False)
    influx_read_user: str
    influx_read_password: str = field(repr=False)
    # Seconds a run's driver may be silent, with no end from the annotator, before
    # Telegraf writes its end as NO_END_SEEN (telegraf.conf, "No end seen").
    no_end_grace_s: int
    # Telegraf's events listener (annotator, probes): Basic auth, on by default
    # once it listens beyond loopback (events_credentials).
    events_auth: str
    events_user: str
    events_password: str = field(repr=False)
    # Where Grafana sends alerts: the ALERT_* keys that are set, as (key, value) pairs
    # (sparkscope/stack/contact_points.py).
    alert_contacts: tuple = field(repr=False)
    # What capacity costs (the report's Capacity section, report --json): None
    # where unset, and the report counts core-hours and GB-hours instead.
    price_per_core_hour: Optional[float] = None
    price_per_gb_hour: Optional[float] = None
    price_currency: str = ""

    @property
    def events_credentials(self) -> Optional[tuple[str, str]]:
        """(user, password) the events listener asks for, None when it asks for none."""
        wanted = self.events_auth == "on" or (self.events_auth == "auto" and not is_loopback(self.graphite_bind))
        return (self.events_user, self.events_password) if wanted else None

    @property
    def influx_url(self) -> str:
        """InfluxDB's address (ping needs no user; everything else goes through an Endpoint below)."""
        return f"http://{reachable(self.influxdb_bind)}:{self.influxdb_port}"

    @property
    def influx_admin(self) -> Endpoint:
        """Setup (database, users, rollups) and statistics: the CLI only."""
        return Endpoint(self.influx_url, self.influx_admin_user, self.influx_admin_password)

    @property
    def influx_writer(self) -> Endpoint:
        """Writes to the database, nothing else: Telegraf and the CLI's own points."""
        return Endpoint(self.influx_url, self.influx_write_user, self.influx_write_password)

    @property
    def influx_reader(self) -> Endpoint:
        """Reads the database, nothing else: Grafana, report, summary, profiles."""
        return Endpoint(self.influx_url, self.influx_read_user, self.influx_read_password)

    @property
    def influx_users(self) -> Users:
        return Users(self.influx_admin, self.influx_writer, self.influx_reader)

    def as_env(self) -> dict[str, str]:
        """The settings as the .env keys they come from: what load_settings reads back
        to these very settings (docker compose's environment, a CLI subprocess's)."""
        return {
            "SPARKSCOPE_STATE_DIR": str(self.state_dir), "SPARKSCOPE_CACHE_DIR": str(self.cache_dir),
            "GRAFANA_ADMIN_USER": self.grafana_user, "GRAFANA_ADMIN_PASSWORD": self.grafana_password,
            "GRAFANA_HOME": self.grafana_home, "INFLUXD_BINARY": self.influxd_binary,
            "SPARKSCOPE_HTTP_BIND": self.http_bind, "SPARKSCOPE_SERVICE_USER": self.service_user,
            "GRAFANA_PORT": str(self.grafana_port), "INFLUXDB_BIND": self.influxdb_bind,
            "INFLUXDB_PORT": str(self.influxdb_port), "GRAPHITE_BIND": self.graphite_bind,
            "GRAPHITE_PORT": str(self.graphite_port), "EVENTS_PORT": str(self.events_port),
            "SPARKSCOPE_DB": self.database, "SPARKSCOPE_RETENTION": self.retention,
            "SPARKSCOPE_UNREAD_METRICS": self.unread_metrics,
            "SPARKSCOPE_NO_END_GRACE_S": str(self.no_end_grace_s),
            "TELEGRAF_BUFFER_LIMIT": str(self.telegraf_buffer_limit),
            "TELEGRAF_BUFFER_STRATEGY": self.telegraf_buffer_strategy,
            "INFLUXDB_ADMIN_USER": self.influx_admin_user, "INFLUXDB_ADMIN_PASSWORD": self.influx_admin_password,
            "INFLUXDB_WRITE_USER": self.influx_write_user, "INFLUXDB_WRITE_PASSWORD": self.influx_write_password,
            "INFLUXDB_READ_USER": self.influx_read_user, "INFLUXDB_READ_PASSWORD": self.influx_read_password,
            "EVENTS_AUTH": self.events_auth, "EVENTS_USER": self.events_user,
            "EVENTS_PASSWORD": self.events_password,
            "SPARKSCOPE_METRICS_STORE": self.metrics_store, "THANOS_PORT": str(self.thanos_port),
            "THANOS_INGESTERS": str(self.thanos_ingesters),
            "THANOS_REPLICATION_FACTOR": str(self.thanos_replication_factor),
            "THANOS_RECEIVE_RETENTION": self.thanos_receive_retention,
            "THANOS_RETENTION_RAW": self.thanos_retention_raw, "THANOS_RETENTION_5M": self.thanos_retention_5m,
            "THANOS_RETENTION_1H": self.thanos_retention_1h,
            "SPARKSCOPE_REMOTE_WRITE_URL": self.remote_write_url, "SPARKSCOPE_REMOTE_QUERY_URL": self.remote_query_url,
            "SPARKSCOPE_REMOTE_USER": self.remote_user, "SPARKSCOPE_REMOTE_PASSWORD": self.remote_password,
            "SPARKSCOPE_REMOTE_CA_FILE": self.remote_ca_file, "SPARKSCOPE_REMOTE_TENANT": self.remote_tenant,
            "SPARKSCOPE_REMOTE_TENANT_HEADER": self.remote_tenant_header,
            **dict(self.alert_contacts),
        }

    def missing_secrets(self) -> list[str]:
        """SECRET_KEYS without a usable value (up refuses to start until .env has them)."""
        values = {"GRAFANA_ADMIN_PASSWORD": "" if self.password_is_placeholder else self.grafana_password,
                  "INFLUXDB_ADMIN_PASSWORD": self.influx_admin_password,
                  "INFLUXDB_WRITE_PASSWORD": self.influx_write_password,
                  "INFLUXDB_READ_PASSWORD": self.influx_read_password,
                  "EVENTS_PASSWORD": self.events_password}
        return [key for key in SECRET_KEYS if not values[key]]

    @property
    def grafana_url(self) -> str:
        return f"http://{reachable(self.http_bind)}:{self.grafana_port}"

    @property
    def graphite_host(self) -> str:
        return reachable(self.graphite_bind)

    @property
    def events_url(self) -> str:
        """Where the annotator POSTs line protocol (Telegraf's /write listener)."""
        return f"http://{self.graphite_host}:{self.events_port}"

    @property
    def password_is_placeholder(self) -> bool:
        return self.grafana_password in ("", PLACEHOLDER_PASSWORD)


def is_loopback(address: str) -> bool:
    """Whether an address (or host name) is this machine's loopback: a
    listener bound there takes nothing from other machines."""
    return address == "localhost" or address.startswith("127.") or address == "::1"


def reachable(bind: str) -> str:
    """The address this machine reaches a listener at: a wildcard bind through loopback."""
    return "127.0.0.1" if bind in ("0.0.0.0", "", "::") else bind


def _port(values: dict[str, str], key: str) -> int:
    raw = values.get(key, "")
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise SettingsError(f"{key}={raw!r} is not a TCP port (1-65535); fix it in .env")
    return int(raw)


def _count(values: dict[str, str], key: str) -> int:
    raw = values.get(key, "").strip()
    if not raw.isdigit() or int(raw) < 1:
        raise SettingsError(f"{key}={raw!r} is not a positive whole number; fix it in .env")
    return int(raw)


# Prometheus' duration (what Thanos' flags parse): units from the largest down, each at most once.
THANOS_DURATION = re.compile(r"^(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?$")
_DURATION_MS = {"y": 365 * 86400_000, "w": 7 * 86400_000, "d": 86400_000, "h": 3600_000, "m": 60_000,
                "s": 1000, "ms": 1}
# What each retention must reach, unless 0 (forever): Thanos' compactor makes 5-minute blocks
# from raw blocks spanning 40 h, and 1-hour blocks from 5-minute ones spanning 10 days; data
# deleted sooner is never downsampled. The ingesters keep at least the 2-hour block they upload.
THANOS_RETENTION_MINIMUM = {"THANOS_RECEIVE_RETENTION": ("2h", "one 2-hour block, which it uploads when cut"),
                            "THANOS_RETENTION_RAW": ("2d", "5-minute blocks are made from raw blocks of 40 h"),
                            "THANOS_RETENTION_5M": ("10d", "1-hour blocks are made from 5-minute blocks of 10 days"),
                            "THANOS_RETENTION_1H": ("1d", "a shorter one deletes what it was made for")}


def duration_ms(text: str) -> int:
    """A Prometheus duration (THANOS_DURATION) in milliseconds."""
    return sum(int(part[:-len(unit)]) * _DURATION_MS[unit]
               for part in filter(None, THANOS_DURATION.match(text).groups())
               for unit in [part.lstrip("0123456789")])


def _thanos_retentions(values: dict[str, str]) -> dict[str, str]:
    out = {}
    for key, (minimum, why) in THANOS_RETENTION_MINIMUM.items():
        value = values.get(key, "").strip()
        if value in ("", "0") or not THANOS_DURATION.match(value):
            raise SettingsError(f"{key}={value!r} is not a duration as Thanos reads them: a number and a unit, "
                                f"largest unit first (y w d h m s ms), e.g. 36h, 30d, 1y2w; 0d keeps forever")
        if 0 < duration_ms(value) < duration_ms(minimum):
            raise SettingsError(f"{key}={value}: at least {minimum} ({why}), or 0d to keep forever")
        out[key.lower()] = value
    return out


def _price(values: dict[str, str], key: str) -> Optional[float]:
    raw = values.get(key, "").strip()
    if not raw:
        return None
    try:
        price = float(raw)
    except ValueError:
        price = -1.0
    if not price >= 0 or price == float("inf"):
        raise SettingsError(f"{key}={raw!r} is not a price (a number, 0 or more, e.g. 0.05); fix it in .env "
                            "or leave it empty")
    return price


def _choice(values: dict[str, str], key: str, choices: tuple[str, ...]) -> str:
    value = values.get(key, "").strip()
    if value not in choices:
        raise SettingsError(f"{key}={value!r}: use {' or '.join(choices)}")
    return value


def _bind(values: dict[str, str], key: str) -> str:
    """A listen address; empty is refused: the programs behind it read "" (":2003") as every interface."""
    value = values.get(key, "").strip()
    if not value:
        raise SettingsError(f"{key} is empty: set 127.0.0.1 (this machine only), this machine's address, or "
                            f"0.0.0.0 (every interface, behind a firewall) in .env")
    return value


def _user(values: dict[str, str], key: str, defaults: dict[str, str]) -> str:
    value = values.get(key, "").strip() or defaults[key]
    if not _NAME.match(value):
        raise SettingsError(f"{key}={value!r}: use letters, digits, '_' or '-'")
    return value


def _secret(values: dict[str, str], key: str) -> str:
    value = values.get(key, "").strip()
    if value and key != "GRAFANA_ADMIN_PASSWORD" and not _SECRET.match(value):
        raise SettingsError(f"{key} in .env: use at least 12 of A-Z a-z 0-9 . _ ~ - (it goes into InfluxQL, "
                            f"Telegraf's and Grafana's config and HTTP headers as is); or empty it and "
                            f"./sparkscope up generates one")
    return value


def _remote_url(values: dict[str, str], key: str) -> str:
    value = values.get(key, "").strip()
    parts = urllib.parse.urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SettingsError(f"{key}={value!r}: SPARKSCOPE_METRICS_STORE=remote needs the http(s) URL of your "
                            f"store's {'remote-write endpoint' if 'WRITE' in key else 'PromQL API (the part before /api/v1)'}"
                            f" in .env")
    if any(c in value for c in '"\\ \t\r\n<>{}|^`'):
        raise SettingsError(f"{key}: a URL holds no quote, backslash, space or line break; "
                            f"percent-encode them (%22, %5C, %20)")
    if parts.username or parts.password:
        raise SettingsError(f"{key}: put the user and password in SPARKSCOPE_REMOTE_USER and "
                            f"SPARKSCOPE_REMOTE_PASSWORD, not in the URL (which logs and status print)")
    return value.rstrip("/") if "QUERY" in key else value


TENANT_HEADERS = ("X-Scope-OrgID", "THANOS-TENANT")  # stack/remote_store.py names each one's Telegraf variable
DEFAULT_TENANT_HEADER = TENANT_HEADERS[0]
TENANT = re.compile(r"[A-Za-z0-9!._*'()-]{1,150}")


def _remote_store(values: dict[str, str]) -> dict[str, str]:
    """The remote store's settings: checked only when SPARKSCOPE_METRICS_STORE=remote."""
    keys = ("remote_write_url", "remote_query_url", "remote_user", "remote_password", "remote_ca_file",
            "remote_tenant", "remote_tenant_header")
    raw = {k: values.get(f"SPARKSCOPE_{k.upper()}", "").strip() for k in keys}
    raw["remote_tenant_header"] = raw["remote_tenant_header"] or DEFAULT_TENANT_HEADER
    if values.get("SPARKSCOPE_METRICS_STORE", "").strip() != "remote":
        return raw
    raw["remote_write_url"] = _remote_url(values, "SPARKSCOPE_REMOTE_WRITE_URL")
    raw["remote_query_url"] = _remote_url(values, "SPARKSCOPE_REMOTE_QUERY_URL")
    if bool(raw["remote_user"]) != bool(raw["remote_password"]):
        raise SettingsError("SPARKSCOPE_REMOTE_USER and SPARKSCOPE_REMOTE_PASSWORD go together (Basic auth): "
                            "set both, or neither for a store that asks for none")
    if any(c in raw["remote_user"] for c in ":\n\r"):
        raise SettingsError("SPARKSCOPE_REMOTE_USER: no ':' or line break (Basic auth's separator)")
    if any(c in raw["remote_password"] for c in "\n\r"):
        raise SettingsError("SPARKSCOPE_REMOTE_PASSWORD: no line break")
    if any(c in raw["remote_ca_file"] for c in '"\\\r\n'):
        raise SettingsError("SPARKSCOPE_REMOTE_CA_FILE: a path with a quote, backslash or line break cannot be given "
                            "to Telegraf; move the file")
    # Telegraf pastes the tenant into its configuration's text as it is: only characters that
    # cannot end a TOML string get there (a tenant as Mimir allows it).
    if raw["remote_tenant"] and not TENANT.fullmatch(raw["remote_tenant"]):
        raise SettingsError(f"SPARKSCOPE_REMOTE_TENANT={raw['remote_tenant']!r}: a tenant id is 1-150 of letters, "
                            f"digits and ! - _ . * ' ( ) (as Mimir and Cortex take it)")
    header = {h.lower(): h for h in TENANT_HEADERS}.get(raw["remote_tenant_header"].lower())
    if header is None:
        raise SettingsError(f"SPARKSCOPE_REMOTE_TENANT_HEADER={raw['remote_tenant_header']!r}: one of "
                            f"{', '.join(TENANT_HEADERS)} (Mimir and Cortex read the first, Thanos Receive the "
                            f"second; VictoriaMetrics takes the tenant in the URL)")
    raw["remote_tenant_header"] = header
    if raw["remote_ca_file"] and not Path(raw["remote_ca_file"]).is_file():
        raise SettingsError(f"SPARKSCOPE_REMOTE_CA_FILE={raw['remote_ca_file']!r}: no such file (the PEM of the CA "
                            f"that signed your store's certificate; empty: the system's)")
    return raw


def shipped_defaults() -> dict[str, str]:
    """The defaults of every setting: the repository's .env.example."""
    return read_env_file(ROOT / ".env.example")


def load_settings(root: Path = ROOT, environ: dict[str, str] | None = None, *, dotenv: bool = True) -> Settings:
    """The settings of the stack in root, from environ (else the process's
    environment) over root's .env over the shipped defaults. dotenv=False
    leaves root's .env out: a stack of its own (the test suite's) must not
    take a developer's settings, such as INFLUXDB_BIND=0.0.0.0."""
    env = dict(os.environ if environ is None else environ)
    # Every default is the shipped .env.example's (the one place they are
    # written; compose, telegraf.conf and the probes are checked against it
    # by tests/test_settings.py), then the root's own template and .env.
    defaults = shipped_defaults()
    values = dict(defaults)
    values.update(read_env_file(root / ".env.example"))
    if dotenv:
        values.update(read_env_file(root / ".env"))
    values.update({k: v for k, v in env.items() if k in values or k.startswith("SPARKSCOPE_")})

    database = values["SPARKSCOPE_DB"]
    if not _NAME.match(database):
        raise SettingsError(f"SPARKSCOPE_DB={database!r}: use letters, digits, '_' or '-'")
    retention = values["SPARKSCOPE_RETENTION"]
    if not _RETENTION.match(retention):
        raise SettingsError(
            f"SPARKSCOPE_RETENTION={retention!r} is not an InfluxQL duration (e.g. 7d, 30d, 52w, INF)"
        )
    unread = values["SPARKSCOPE_UNREAD_METRICS"]
    if unread not in UNREAD_METRICS_ACTIONS:
        raise SettingsError(f"SPARKSCOPE_UNREAD_METRICS={unread!r}: use drop (store what the dashboards and "
                            f"report read) or pass (keep every metric Spark sends)")
    cache_default = Path(env.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "sparkscope"
    return Settings(
        root=root,
        state_dir=Path(values.get("SPARKSCOPE_STATE_DIR") or root / ".state"),
        cache_dir=Path(values.get("SPARKSCOPE_CACHE_DIR") or cache_default),
        grafana_user=values["GRAFANA_ADMIN_USER"],
        grafana_password=values["GRAFANA_ADMIN_PASSWORD"],
        http_bind=_bind(values, "SPARKSCOPE_HTTP_BIND"),
        grafana_port=_port(values, "GRAFANA_PORT"),
        influxdb_port=_port(values, "INFLUXDB_PORT"),
        graphite_bind=_bind(values, "GRAPHITE_BIND"),
        graphite_port=_port(values, "GRAPHITE_PORT"),
        events_port=_port(values, "EVENTS_PORT"),
        database=database,
        retention=retention,
        unread_metrics=unread,
        grafana_home=values["GRAFANA_HOME"],
        influxd_binary=values["INFLUXD_BINARY"],
        service_user=values.get("SPARKSCOPE_SERVICE_USER", ""),
        telegraf_buffer_limit=_count(values, "TELEGRAF_BUFFER_LIMIT"),
        telegraf_buffer_strategy=_choice(values, "TELEGRAF_BUFFER_STRATEGY", ("memory", "disk")),
        influxdb_bind=_bind(values, "INFLUXDB_BIND"),
        metrics_store=_choice(values, "SPARKSCOPE_METRICS_STORE", METRICS_STORES),
        thanos_port=_port(values, "THANOS_PORT"),
        thanos_ingesters=_count(values, "THANOS_INGESTERS"),
        thanos_replication_factor=_count(values, "THANOS_REPLICATION_FACTOR"),
        **_thanos_retentions(values),
        **_remote_store(values),
        influx_admin_user=_user(values, "INFLUXDB_ADMIN_USER", defaults),
        influx_admin_password=_secret(values, "INFLUXDB_ADMIN_PASSWORD"),
        influx_write_user=_user(values, "INFLUXDB_WRITE_USER", defaults),
        influx_write_password=_secret(values, "INFLUXDB_WRITE_PASSWORD"),
        influx_read_user=_user(values, "INFLUXDB_READ_USER", defaults),
        influx_read_password=_secret(values, "INFLUXDB_READ_PASSWORD"),
        events_auth=_choice(values, "EVENTS_AUTH", EVENTS_AUTH_CHOICES),
        no_end_grace_s=_count(values, "SPARKSCOPE_NO_END_GRACE_S"),
        events_user=_user(values, "EVENTS_USER", defaults),
        events_password=_secret(values, "EVENTS_PASSWORD"),
        alert_contacts=tuple(sorted((k, v.strip()) for k, v in values.items() if k.startswith("ALERT_") and v.strip())),
        price_per_core_hour=_price(values, "PRICE_PER_CORE_HOUR"),
        price_per_gb_hour=_price(values, "PRICE_PER_GB_HOUR"),
        price_currency=values.get("PRICE_CURRENCY", "").strip(),
    )


def _with_secrets(text: str, generated: dict[str, str]) -> str:
    """text (.env or its template) with each generated secret in place: its empty
    KEY= line (or Grafana's placeholder) filled, or a line appended."""
    out, filled = [], set()
    for raw in text.splitlines():
        key, sep, value = raw.partition("=")
        key, value = key.strip(), value.strip()
        unset = not value or (key == "GRAFANA_ADMIN_PASSWORD" and value == PLACEHOLDER_PASSWORD)
        if sep and key in generated and unset and not raw.lstrip().startswith("#"):
            out.append(f"{key}={generated[key]}")
            filled.add(key)
        else:
            out.append(raw)
    out += [f"{key}={value}" for key, value in generated.items() if key not in filled]
    return "\n".join(out) + "\n"


def _write_private(path: Path, text: str) -> None:
    """A new file, mode 0600 from its first byte (no write-then-chmod)."""
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as out:
        out.write(text)


def ensure_env_file(settings: Settings, progress: Progress = print) -> list[str]:
    """Give .env a random value for each secret it lacks (SECRET_KEYS; the process
    environment's own values count as given). A new .env is created with mode
    0600 from its first byte; an existing one readable by others is made 0600
    before a secret is added. Secrets are never printed. Returns the keys written."""
    env_path = settings.root / ".env"
    # On every up, not only when a secret is added: a .env filled in by hand is complete.
    if env_path.is_file() and not env_path.is_symlink() and env_path.stat().st_mode & 0o077:
        env_path.chmod(0o600)
        progress(f"{env_path} was readable by other users; made it 0600 (it holds passwords)")
    missing = [key for key in settings.missing_secrets() if not os.environ.get(key)]
    if not missing:
        return []
    generated = {key: secrets.token_urlsafe(24) for key in missing}
    if not env_path.exists():
        _write_private(env_path, _with_secrets((settings.root / ".env.example").read_text(), generated))
        progress(f"wrote {env_path} (mode 0600) with random passwords: Grafana's admin "
                 f"({settings.grafana_user}), InfluxDB's {settings.influx_admin_user}, "
                 f"{settings.influx_write_user} and {settings.influx_read_user}, and the events listener's")
        return missing
    # Written beside it, then moved over it: an interrupted write never leaves half a .env.
    tmp = env_path.with_name(".env.sparkscope-new")
    tmp.unlink(missing_ok=True)
    _write_private(tmp, _with_secrets(env_path.read_text(), generated))
    os.replace(tmp, env_path)
    progress(f"added random {', '.join(missing)} to {env_path} (mode 0600)")
    return missing
