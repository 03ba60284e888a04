"""A TCP relay between Spark and Telegraf that remembers what Spark sent, so
a test can prove by count that every point reached InfluxDB."""

from __future__ import annotations

import math
import socket
import threading


class GraphiteTap:
    """Listens on a free loopback port and relays every connection to target.

    `points(app_id)` is the set of distinct (metric name, timestamp) of the
    lines of that application that carried a finite value: exactly what
    InfluxDB must end up holding (same name and second overwrite there).
    """

    def __init__(self, target: tuple[str, int]):
        self.target = target
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._lock = threading.Lock()
        self._lines: list[bytes] = []
        self._stopped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _relay(self, client: socket.socket) -> None:
        # The tap only accepts what it can forward: when Telegraf is down the
        # client's connection is closed, as Telegraf's own refusal would do.
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            client.close()
            return
        pending = b""
        with client, upstream:
            while True:
                try:
                    data = client.recv(65536)
                    if not data:
                        return
                    upstream.sendall(data)
                except OSError:
                    return
                pending += data
                *complete, pending = pending.split(b"\n")
                with self._lock:
                    self._lines.extend(complete)

    def points(self, app_id: str) -> set[tuple[str, int]]:
        out = set()
        with self._lock:
            lines = list(self._lines)
        for line in lines:
            parts = line.decode(errors="replace").split()
            if len(parts) != 3 or f".{app_id}." not in f".{parts[0]}":
                continue
            try:
                value = float(parts[1])
            except ValueError:
                continue
            if math.isfinite(value):
                out.add((parts[0], int(parts[2])))
        return out

    def close(self) -> None:
        self._stopped.set()
        self._server.close()
