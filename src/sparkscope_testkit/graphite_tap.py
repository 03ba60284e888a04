"""A TCP relay between Spark and Telegraf that remembers what Spark sent, so
a test can prove by count that every point reached InfluxDB."""

from __future__ import annotations

import math
from typing import Callable
import socket
import threading
import time


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
        self._relays: list[threading.Thread] = []  # one per connection, ended when its client closes
        self._stopped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            relay = threading.Thread(target=self._relay, args=(client,), daemon=True)
            with self._lock:
                self._relays.append(relay)
            relay.start()

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
                except OSError:
                    return
                if not data:
                    return
                # Remembered before it is forwarded: a line InfluxDB holds was always seen here.
                pending += data
                *complete, pending = pending.split(b"\n")
                with self._lock:
                    self._lines.extend(complete)
                try:
                    upstream.sendall(data)
                except OSError:
                    return

    def points(self, app_id: str, drain_s: float = 10.0,
               stored: Callable[[str, float], bool] = lambda path, value: True) -> set[tuple[str, int]]:
        """Call once the sender has exited: waits up to drain_s for the relays
        to read its connections to their end, so no line still in a socket
        buffer is missed. stored(path, value) leaves out what the stack drops
        on purpose."""
        deadline = time.monotonic() + drain_s
        with self._lock:
            relays = list(self._relays)
        for relay in relays:
            relay.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            lines = list(self._lines)
        out = set()
        for line in lines:
            parts = line.decode(errors="replace").split()
            if len(parts) != 3 or f".{app_id}." not in f".{parts[0]}":
                continue
            try:
                value = float(parts[1])
            except ValueError:
                continue
            if math.isfinite(value) and stored(parts[0], value):
                out.add((parts[0], int(parts[2])))
        return out

    def close(self) -> None:
        self._stopped.set()
        self._server.close()
