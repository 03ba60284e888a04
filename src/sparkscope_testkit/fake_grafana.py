#!/usr/bin/env python3
"""A stand-in for a Grafana the user installed, to test how the native
backend starts one (no Grafana runs here). It is stricter than Grafana about
what it is given: it exits at once unless it is called as `grafana server
--homepath H --config C` with H holding conf/defaults.ini, C readable, and
the provisioning directory (GF_PATHS_PROVISIONING) holding our datasource and
dashboards, every ${VAR} those files name set and not empty, and the
datasource's user (INFLUX_USER, INFLUX_PASSWORD) able to read its database
on INFLUX_URL; then it answers /api/health on GF_SERVER_HTTP_ADDR:PORT and
records its arguments and GF_* environment in $FAKE_GRAFANA_RECORD.

It is the Grafana version $FAKE_GRAFANA_VERSION says (required). Up to 12.x the InfluxDB datasource is built in; from 13 it is the
plugin grafana-influxdb-datasource, which this fake has only when a
plugin.json with the id influxdb lies in a directory of GF_PATHS_PLUGINS or of
<home>/data/plugins-bundled (it downloads nothing, so GF_PLUGINS_PREINSTALL
alone does not count). /api/plugins/influxdb/settings answers 200 or 404, to
the admin only (GF_SECURITY_ADMIN_USER, GF_SECURITY_ADMIN_PASSWORD)."""

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


def has_influxdb_plugin(home: Path, version: str) -> bool:
    if int(version.split(".")[0]) < 13:
        return True  # built in
    for directory in (Path(os.environ.get("GF_PATHS_PLUGINS", "/nonexistent")), home / "data" / "plugins-bundled"):
        for manifest in directory.glob("*/plugin.json"):
            try:
                if json.loads(manifest.read_text()).get("id") == "influxdb":
                    return True
            except (OSError, ValueError):
                continue
    return False


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

    version = os.environ.get("FAKE_GRAFANA_VERSION", "")
    if not re.fullmatch(r"\d+\.\d+\.\d+", version):
        refuse(f"FAKE_GRAFANA_VERSION={version!r}: set it to the Grafana version this fake stands for")
    admin = "Basic " + base64.b64encode(f"{os.environ['GF_SECURITY_ADMIN_USER']}:"
                                        f"{os.environ['GF_SECURITY_ADMIN_PASSWORD']}".encode()).decode()

    class Health(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def answer(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/api/health":
                self.answer(200, {"database": "ok", "version": f"{version}-fake"})
            elif self.path == "/api/plugins/influxdb/settings":
                if self.headers.get("Authorization") != admin:
                    self.answer(401, {"message": "Unauthorized"})
                elif has_influxdb_plugin(home, version):
                    self.answer(200, {"id": "influxdb", "type": "datasource"})
                else:
                    self.answer(404, {"message": "Plugin not found, no installed plugin with that id"})
            else:
                self.answer(404, {"message": "Not found"})

    HTTPServer((os.environ["GF_SERVER_HTTP_ADDR"], int(os.environ["GF_SERVER_HTTP_PORT"])), Health).serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
