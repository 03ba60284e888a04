"""HTTP for the stack's own endpoints (stdlib only): a request to this
machine never goes through a proxy.

urllib takes http_proxy/HTTPS_PROXY from the environment and only skips it
for hosts named in no_proxy. A proxy set for the internet would then see every
request to InfluxDB, Telegraf's listener and the profiler plugin on
127.0.0.1, the plugin's bearer token among them, or fail them outright. So
does a request to one of this machine's own addresses (INFLUXDB_BIND or
GRAPHITE_BIND set to it): an address is this machine's when a socket can be
bound to it. A request to another host keeps the user's proxy settings.
"""

from __future__ import annotations

import base64
import functools
import ipaddress
import os
import socket
import ssl
import urllib.parse
import urllib.request
from typing import Optional, Sequence, Union

_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def is_loopback_host(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@functools.lru_cache(maxsize=64)
def is_own_address(host: str) -> bool:
    """Whether host is an IP address of this machine (names are not resolved:
    no DNS lookup decides where a credential goes)."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.bind((str(address), 0))
        return True
    except OSError:
        return False


def is_this_machine(host: str) -> bool:
    return is_loopback_host(host) or is_own_address(host)


def urlopen(request: Union[str, urllib.request.Request], timeout: float, context: Optional[ssl.SSLContext] = None):
    """urllib.request.urlopen, straight to the server when it is this machine;
    context: the TLS context (a CA of the user's) for https."""
    url = request.full_url if isinstance(request, urllib.request.Request) else request
    direct = is_this_machine(urllib.parse.urlsplit(url).hostname or "")
    if context is not None:
        handlers = [urllib.request.HTTPSHandler(context=context)] + ([urllib.request.ProxyHandler({})] if direct else [])
        return urllib.request.build_opener(*handlers).open(request, timeout=timeout)
    if direct:
        return _DIRECT.open(request, timeout=timeout)
    return urllib.request.urlopen(request, timeout=timeout)


# Credentials for Telegraf's events listener (EVENTS_AUTH), given to the probes
# by their runner (native backend or compose) in the environment, never in argv.
EVENTS_USER_ENV, EVENTS_PASSWORD_ENV = "SPARKSCOPE_EVENTS_USER", "SPARKSCOPE_EVENTS_PASSWORD"


def basic_auth(user: str, password: str) -> str:
    """An Authorization header's value for HTTP Basic auth (InfluxDB, Telegraf's listener)."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def post_lines(url: str, lines: Sequence[str], timeout: float, precision: str = "ns") -> None:
    """POST line protocol to Telegraf's events listener (<url>/write), with Basic
    auth when SPARKSCOPE_EVENTS_USER is set. Raises OSError (urllib's errors
    included) when it is not taken."""
    request = urllib.request.Request(f"{url}/write?precision={precision}", data="\n".join(lines).encode(),
                                     method="POST")
    user = os.environ.get(EVENTS_USER_ENV, "")
    if user:
        request.add_header("Authorization", basic_auth(user, os.environ.get(EVENTS_PASSWORD_ENV, "")))
    with urlopen(request, timeout=timeout):
        pass
