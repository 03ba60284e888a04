"""The remote metrics store (SPARKSCOPE_METRICS_STORE=remote): a
Prometheus-compatible store the user already runs (Thanos, Cortex, Mimir,
VictoriaMetrics cluster, Prometheus with its remote-write receiver).
Nothing of it runs here: Telegraf sends remote write to its write URL
(telegraf/remote.conf) and sparkscope reads PromQL at its query URL, both
with the Basic auth and CA given in .env. The events stay in InfluxDB.

Standard library only.
"""

from __future__ import annotations

import time
import urllib.error

from sparkscope.settings import TENANT_HEADERS
from sparkscope.store import http
from sparkscope.store.promql import PromError, PromQuery

STORE_NAME = "remote"
# The variable telegraf/remote.conf reads each tenant header's value from (the headers: settings.TENANT_HEADERS).
TENANT_VARIABLES = {TENANT_HEADERS[0]: "SPARKSCOPE_REMOTE_SCOPE_ORGID", TENANT_HEADERS[1]: "SPARKSCOPE_REMOTE_THANOS_TENANT"}
ROW = "remote-store"  # its line in status: not a process of ours, a store we send to and read from
NAME = "the remote store"  # in messages


def endpoint(settings, timeout_s: float = 10.0) -> PromQuery:
    """The user's PromQL API, with their Basic auth (none without a user) and CA."""
    return PromQuery(settings.remote_query_url, settings.remote_user, settings.remote_password, timeout_s,
                     ca_file=settings.remote_ca_file, name=NAME, headers=tenant_headers(settings))


def tenant_headers(settings) -> dict[str, str]:
    """The tenant's header for reads (none without a tenant)."""
    return {settings.remote_tenant_header: settings.remote_tenant} if settings.remote_tenant else {}


def telegraf_env(settings) -> dict[str, str]:
    """What telegraf/remote.conf reads from Telegraf's environment (never its argv).
    Telegraf pastes these into its configuration's text unescaped, so the
    credentials go as the Authorization header's value, whose base64 holds no
    quote; the URL and the path are checked for quotes by the settings."""
    auth = http.basic_auth(settings.remote_user, settings.remote_password) if settings.remote_user else ""
    # The settings let only a tenant of [A-Za-z0-9!._*'()-] through, in one of TENANT_HEADERS.
    tenant = tenant_headers(settings)
    return {"SPARKSCOPE_REMOTE_WRITE_URL": settings.remote_write_url,
            "SPARKSCOPE_REMOTE_AUTHORIZATION": auth,
            "SPARKSCOPE_REMOTE_CA_FILE": settings.remote_ca_file,
            **{variable: tenant.get(header, "") for header, variable in TENANT_VARIABLES.items()}}


def check(query: PromQuery) -> tuple[str, str]:
    """(state, detail) of the store as status shows it: up when its PromQL API
    answers an instant query; unhealthy when it answers with an error (the
    message names the settings for a 401 or 403); down when it does not answer."""
    try:
        query.instant("vector(1)", int(time.time() * 1000))
    except PromError as err:
        answered = isinstance(err.__cause__, urllib.error.HTTPError) or err.__cause__ is None
        return ("unhealthy", str(err)) if answered else ("down", f"{err}; check SPARKSCOPE_REMOTE_QUERY_URL")
    return "up", ""
