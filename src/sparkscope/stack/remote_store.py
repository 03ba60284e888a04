"""The remote metrics store (SPARKSCOPE_METRICS_STORE=remote): a
Prometheus-compatible store the user already runs (Thanos, Cortex, Mimir,
VictoriaMetrics cluster, Prometheus with its remote-write receiver).
Nothing of it runs here: Telegraf sends remote write to its write URL
(telegraf/remote.conf) and sparkscope reads PromQL at its query URL, both
with the Basic auth and CA given in .env. The events stay in InfluxDB.

Standard library only.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Optional

from sparkscope.store import http

STORE_NAME = "remote"
ROW = "remote-store"  # its line in status: not a process of ours, a store we send to and read from


@dataclass(frozen=True)
class Endpoint:
    """Where PromQL is read, and how to ask."""
    query_url: str  # the part before /api/v1
    user: str = ""
    password: str = ""
    ca_file: str = ""

    def request(self, path: str, params: Optional[dict[str, str]] = None) -> urllib.request.Request:
        url = f"{self.query_url}{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
        request = urllib.request.Request(url)
        if self.user:
            request.add_header("Authorization", http.basic_auth(self.user, self.password))
        return request

    def context(self) -> Optional[ssl.SSLContext]:
        return ssl.create_default_context(cafile=self.ca_file) if self.ca_file else None

    def get_json(self, path: str, params: Optional[dict[str, str]] = None, timeout_s: float = 10.0) -> dict:
        """GET path as JSON; OSError (unreachable, refused, an HTTP error) or ValueError (not JSON)."""
        with http.urlopen(self.request(path, params), timeout=timeout_s, context=self.context()) as resp:
            return json.loads(resp.read())


def endpoint(settings) -> Endpoint:
    return Endpoint(settings.remote_query_url, settings.remote_user, settings.remote_password,
                    settings.remote_ca_file)


def telegraf_env(settings) -> dict[str, str]:
    """What telegraf/remote.conf reads from Telegraf's environment (never its argv).
    Telegraf pastes these into its configuration's text unescaped, so the
    credentials go as the Authorization header's value, whose base64 holds no
    quote; the URL and the path are checked for quotes by the settings."""
    auth = http.basic_auth(settings.remote_user, settings.remote_password) if settings.remote_user else ""
    return {"SPARKSCOPE_REMOTE_WRITE_URL": settings.remote_write_url,
            "SPARKSCOPE_REMOTE_AUTHORIZATION": auth,
            "SPARKSCOPE_REMOTE_CA_FILE": settings.remote_ca_file}


def check(point: Endpoint) -> tuple[str, str]:
    """(state, detail) of the store as status shows it: up when its PromQL API
    answers an instant query, else why not."""
    try:
        answer = point.get_json("/api/v1/query", {"query": "vector(1)"}, timeout_s=5)
    except urllib.error.HTTPError as err:
        hint = " (check SPARKSCOPE_REMOTE_USER and SPARKSCOPE_REMOTE_PASSWORD)" if err.code in (401, 403) else ""
        return "unhealthy", f"its PromQL API answered {err.code} {err.reason}{hint}"
    except (OSError, ValueError) as err:
        return "down", f"no answer from its PromQL API: {err}; check SPARKSCOPE_REMOTE_QUERY_URL"
    if answer.get("status") != "success":
        return "unhealthy", f"its PromQL API answered {str(answer)[:200]}"
    return "up", ""
