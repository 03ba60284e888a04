#!/usr/bin/env python3
"""A stand-in for a Grafana the user installed, to test how the native
backend starts one (no Grafana runs here). It is stricter than Grafana about
what it is given: it exits at once unless it is called as `grafana server
--homepath H --config C` with H holding conf/defaults.ini, C readable, and
the provisioning directory (GF_PATHS_PROVISIONING) holding our datasource and
dashboards, every ${VAR} those files name set and not empty, and the
datasource's user (INFLUX_USER, INFLUX_PASSWORD) able to read its database
on INFLUX_URL; then it answers /api/health on GF_SERVER_HTTP_ADDR:PORT and
records its arguments and GF_* environment in $FAKE_GRAFANA_RECORD."""

from __future__ import annotations

import base64
import json
import os
import re
import sys
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path


def refuse(why: str) -> None:
    print(f"fake grafana: {why}", file=sys.stderr)
    sys.exit(1)


def main(argv: list[str]) -> None:
    if argv[:1] != ["server"] or "--homepath" not in argv or "--config" not in argv:
        refuse(f"expected: server --homepath H --config C, got {argv}")
    home = Path(argv[argv.index("--homepath") + 1])
    config = Path(argv[argv.index("--config") + 1])
    if not (home / "conf" / "defaults.ini").is_file():
        refuse(f"{home} is no Grafana home")
    if not config.is_file():
        refuse(f"no config {config}")
    provisioning = Path(os.environ.get("GF_PATHS_PROVISIONING", ""))
    if not list((provisioning / "datasources").glob("*.yaml")) or not list((provisioning / "dashboards").glob("*.yaml")):
        refuse(f"no datasource or dashboards provisioning in {provisioning}")
    for path in sorted(provisioning.glob("*/*.yaml")):
        for name in re.findall(r"\$\{(\w+)\}", path.read_text()):
            if not os.environ.get(name):
                refuse(f"{path.name} names ${{{name}}}, which is not set")
    # Grafana would start, then every panel would fail: refuse at once instead.
    params = urllib.parse.urlencode({"db": os.environ["SPARKSCOPE_DB"], "q": "SHOW MEASUREMENTS LIMIT 1"})
    request = urllib.request.Request(f"{os.environ['INFLUX_URL']}/query?{params}")
    token = base64.b64encode(f"{os.environ['INFLUX_USER']}:{os.environ['INFLUX_PASSWORD']}".encode()).decode()
    request.add_header("Authorization", f"Basic {token}")
    try:
        urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=10).close()
    except OSError as err:
        refuse(f"the datasource's user cannot read {os.environ['INFLUX_URL']}: {err}")
    env = {k: v for k, v in os.environ.items() if k.startswith("GF_") or k.startswith("SPARKSCOPE_")}
    Path(os.environ["FAKE_GRAFANA_RECORD"]).write_text(json.dumps({"argv": argv, "env": env}))

    class Health(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            body = json.dumps({"database": "ok", "version": "12.4.1-fake"}).encode()
            self.send_response(200 if self.path == "/api/health" else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

    HTTPServer((os.environ["GF_SERVER_HTTP_ADDR"], int(os.environ["GF_SERVER_HTTP_PORT"])), Health).serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
