"""Stand-ins for the containers of the fake docker: InfluxDB's and Grafana's
HTTP answers that sparkscope reads, and Telegraf's two listening ports, on
127.0.0.1 at the ports compose would publish (from the environment, as
docker-compose.yml reads them). Run: python fake_services.py influxdb telegraf ..."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from sparkscope import versions

INFLUX_SERIES = 1234
INFLUX_DISK_BYTES = 2 * 2**20


def influx_answer(query: str) -> dict:
    q = query.strip().upper()
    if q.startswith("SHOW DATABASES"):
        series = [{"name": "databases", "columns": ["name"], "values": [["_internal"], ["spark"]]}]
    elif q.startswith("SHOW STATS FOR 'SHARD'"):
        series = [{"name": "shard", "tags": {"database": "spark", "id": "1"}, "columns": ["diskBytes", "writeReq"],
                   "values": [[INFLUX_DISK_BYTES, 3]]},
                  {"name": "shard", "tags": {"database": "_internal", "id": "2"}, "columns": ["diskBytes", "writeReq"],
                   "values": [[999, 1]]}]
    elif q.startswith("SHOW STATS FOR 'DATABASE'"):
        series = [{"name": "database", "tags": {"database": "spark"}, "columns": ["numMeasurements", "numSeries"],
                   "values": [[12, INFLUX_SERIES]]}]
    else:  # CREATE DATABASE, ALTER RETENTION POLICY
        series = None
    result = {"statement_id": 0, **({"series": series} if series else {})}
    return {"results": [result]}


class Influx(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def _reply(self, status: int, body: dict | None = None) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        self.send_header("X-Influxdb-Version", versions.INFLUXDB)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/ping":
            self._reply(204)
        elif url.path == "/query":
            self._reply(200, influx_answer(urllib.parse.parse_qs(url.query).get("q", [""])[0]))
        else:
            self._reply(404, {"error": "not found"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode()
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/write":
            self._reply(204)
        elif url.path == "/query":
            self._reply(200, influx_answer(urllib.parse.parse_qs(body).get("q", [""])[0]))
        else:
            self._reply(404, {"error": "not found"})


def image_version() -> str:
    """The tag of the image the fake docker started this container from (FAKE_IMAGE)."""
    return os.environ.get("FAKE_IMAGE", "unknown:unknown").rsplit(":", 1)[-1]


class Grafana(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        if self.path == "/api/health":
            data = json.dumps({"commit": "fake", "database": "ok", "version": image_version()}).encode()
            self.send_response(200)
        else:
            data, _ = b'{"message":"Unauthorized"}', self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def listen_and_drop(port: int) -> None:
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen(16)
    while True:
        conn, _ = server.accept()
        conn.close()


def main(services: list[str]) -> None:
    env = os.environ
    threads = []
    if "influxdb" in services:
        server = ThreadingHTTPServer(("127.0.0.1", int(env["INFLUXDB_PORT"])), Influx)
        threads.append(threading.Thread(target=server.serve_forever, daemon=True))
    if "grafana" in services:
        server = ThreadingHTTPServer(("127.0.0.1", int(env["GRAFANA_PORT"])), Grafana)
        threads.append(threading.Thread(target=server.serve_forever, daemon=True))
    if "telegraf" in services:
        for key in ("GRAPHITE_PORT", "EVENTS_PORT"):
            threads.append(threading.Thread(target=listen_and_drop, args=(int(env[key]),), daemon=True))
    for thread in threads:
        thread.start()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.pause()


if __name__ == "__main__":
    main(sys.argv[1:])
