"""Ports, paths and credentials: the one place they come from.

Values are read, later ones winning, from `.env.example` (the documented
defaults), `.env` (the user's copy) and the process environment. Docker
compose reads the same `.env`, so both ways of running agree.
"""

from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from sparkscope.errors import SparkscopeError
from sparkscope.process import Progress

ROOT = Path(__file__).resolve().parents[3]
PLACEHOLDER_PASSWORD = "change-me"
_RETENTION = re.compile(r"^(INF|(\d+(ns|u|µ|ms|s|m|h|d|w))+)$")
_NAME = re.compile(r"^[A-Za-z0-9_\-]+$")
UNREAD_METRICS_ACTIONS = ("drop", "pass")  # Telegraf's processors.filter actions


class SettingsError(SparkscopeError):
    """A setting has a value the stack cannot use; the message says which and why."""


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines as docker compose reads them; comments and blanks ignored."""
    values: dict[str, str] = {}
    if not path.is_file():
        return values
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise SettingsError(f"{path}:{number}: expected KEY=VALUE, got {raw!r}")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[key.strip()] = value
    return values


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
    telegraf_buffer_limit: int = 1_000_000  # points Telegraf keeps while InfluxDB cannot take them
    telegraf_buffer_strategy: str = "memory"  # memory | disk (telegraf.conf says what each costs)
    grafana_home: str = ""  # the user's Grafana for the native backend (stack/grafana_local.py); "" = PATH

    @property
    def influx_url(self) -> str:
        return f"http://{reachable(self.http_bind)}:{self.influxdb_port}"

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


def _count(values: dict[str, str], key: str, default: int) -> int:
    raw = values.get(key, str(default)).strip()
    if not raw.isdigit() or int(raw) < 1:
        raise SettingsError(f"{key}={raw!r} is not a positive whole number; fix it in .env")
    return int(raw)


def _choice(values: dict[str, str], key: str, choices: tuple[str, ...]) -> str:
    value = values.get(key, choices[0]).strip()
    if value not in choices:
        raise SettingsError(f"{key}={value!r}: use {' or '.join(choices)}")
    return value


def _bind(values: dict[str, str], key: str) -> str:
    """A listen address; empty is refused: the programs behind it read "" (":2003") as every interface."""
    value = values.get(key, "127.0.0.1").strip()
    if not value:
        raise SettingsError(f"{key} is empty: set 127.0.0.1 (this machine only), this machine's address, or "
                            f"0.0.0.0 (every interface, behind a firewall) in .env")
    return value


def load_settings(root: Path = ROOT, environ: dict[str, str] | None = None) -> Settings:
    env = dict(os.environ if environ is None else environ)
    values = read_env_file(root / ".env.example")
    values.update(read_env_file(root / ".env"))
    values.update({k: v for k, v in env.items() if k in values or k.startswith("SPARKSCOPE_")})

    database = values.get("SPARKSCOPE_DB", "spark")
    if not _NAME.match(database):
        raise SettingsError(f"SPARKSCOPE_DB={database!r}: use letters, digits, '_' or '-'")
    retention = values.get("SPARKSCOPE_RETENTION", "30d")
    if not _RETENTION.match(retention):
        raise SettingsError(
            f"SPARKSCOPE_RETENTION={retention!r} is not an InfluxQL duration (e.g. 7d, 30d, 52w, INF)"
        )
    unread = values.get("SPARKSCOPE_UNREAD_METRICS", "drop")
    if unread not in UNREAD_METRICS_ACTIONS:
        raise SettingsError(f"SPARKSCOPE_UNREAD_METRICS={unread!r}: use drop (store what the dashboards and "
                            f"report read) or pass (keep every metric Spark sends)")
    cache_default = Path(env.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "sparkscope"
    return Settings(
        root=root,
        state_dir=Path(values.get("SPARKSCOPE_STATE_DIR") or root / ".state"),
        cache_dir=Path(values.get("SPARKSCOPE_CACHE_DIR") or cache_default),
        grafana_user=values.get("GRAFANA_ADMIN_USER", "admin"),
        grafana_password=values.get("GRAFANA_ADMIN_PASSWORD", ""),
        http_bind=_bind(values, "SPARKSCOPE_HTTP_BIND"),
        grafana_port=_port(values, "GRAFANA_PORT"),
        influxdb_port=_port(values, "INFLUXDB_PORT"),
        graphite_bind=_bind(values, "GRAPHITE_BIND"),
        graphite_port=_port(values, "GRAPHITE_PORT"),
        events_port=_port(values, "EVENTS_PORT"),
        database=database,
        retention=retention,
        unread_metrics=unread,
        grafana_home=values.get("GRAFANA_HOME", ""),
        telegraf_buffer_limit=_count(values, "TELEGRAF_BUFFER_LIMIT", 1_000_000),
        telegraf_buffer_strategy=_choice(values, "TELEGRAF_BUFFER_STRATEGY", ("memory", "disk")),
    )


def ensure_env_file(settings: Settings, progress: Progress = print) -> bool:
    """Write .env with a random Grafana password when the user has none yet."""
    env_path = settings.root / ".env"
    if env_path.exists() or os.environ.get("GRAFANA_ADMIN_PASSWORD"):
        return False
    template = (settings.root / ".env.example").read_text()
    password = secrets.token_urlsafe(18)
    env_path.write_text(template.replace(f"GRAFANA_ADMIN_PASSWORD={PLACEHOLDER_PASSWORD}",
                                         f"GRAFANA_ADMIN_PASSWORD={password}"))
    env_path.chmod(0o600)
    progress(f"wrote {env_path} with a random Grafana admin password (user {settings.grafana_user})")
    return True
