"""InfluxDB's HTTP API on the host, and nothing else of it.

InfluxDB 1.x always opens a backup and restore service (its `bind-address`)
that asks nobody for credentials: whoever reaches it copies every database
and the users' password hashes, or restores over them. Natively, influxd
therefore runs in a network namespace of its own (`unshare`, with a user
namespace so that no root is needed), where nobody can reach that port, and
serves HTTP on a Unix socket in a folder only the stack's user may enter.
This process, on the host, relays InfluxDB's HTTP address to that socket
byte for byte, so InfluxDB's own authentication answers every request as
before; Telegraf, Grafana and the CLI see no difference.

    python -m sparkscope.stack.influx_relay --listen HOST:PORT --socket PATH -- COMMAND...

The first admin: InfluxDB with authentication on and no user yet lets anyone
create an admin without credentials. With SPARKSCOPE_FIRST_ADMIN_USER and
SPARKSCOPE_FIRST_ADMIN_PASSWORD in its environment (never argv; neither is
passed on to COMMAND), the relay holds its address (bound and listening, so
nobody else takes it) but accepts no client until it has created that admin
over the socket, or learnt that InfluxDB has users already. Whoever knocks
meanwhile waits in the listen queue and is served once an admin exists.

It starts COMMAND (influxd in its namespace) in a process group of its own,
relays until COMMAND exits and exits with its status. A SIGTERM or SIGINT is
passed on to COMMAND once (a second would turn influxd's clean shutdown into
a hard one), and the kernel kills COMMAND if this process dies, so stopping
this process by its group, as the native backend does, stops both.
Standard library only.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

# More concurrent clients than this are refused at once (each costs two
# threads here): Grafana, Telegraf and the CLI keep a handful open.
MAX_CONNECTIONS = 256
CHUNK = 256 * 1024
# influxd gives its clean shutdown 30 s before a hard one; after that, it is killed.
STOP_GRACE_S = 35.0


def pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy until source ends, then end sink's sending side (HTTP keep-alive and
    half-closes pass through unchanged)."""
    try:
        while True:
            data = source.recv(CHUNK)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    finally:
        try:
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass


class Relay:
    def __init__(self, listener: socket.socket, socket_path: str):
        self.listener = listener
        self.socket_path = socket_path
        self.open = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def serve(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # the listener was closed: stopping
            if not self.open.acquire(blocking=False):
                client.close()
                continue
            threading.Thread(target=self.connection, args=(client,), daemon=True).start()

    def connection(self, client: socket.socket) -> None:
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            try:
                upstream.connect(self.socket_path)
            except OSError:
                return  # influxd is not serving yet (or any more): the client sees a closed connection
            back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
            back.start()
            pump(client, upstream)
            back.join()
        finally:
            upstream.close()
            client.close()
            self.open.release()


FIRST_ADMIN_ENV = ("SPARKSCOPE_FIRST_ADMIN_USER", "SPARKSCOPE_FIRST_ADMIN_PASSWORD")


def over_socket(socket_path: str, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
    """One HTTP/1.0 exchange with influxd on its Unix socket: (status, body)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(30)
        conn.connect(socket_path)
        conn.sendall(f"{method} {path} HTTP/1.0\r\nHost: influxd\r\nContent-Length: {len(body)}\r\n"
                     f"Content-Type: application/x-www-form-urlencoded\r\n\r\n".encode() + body)
        answer = b""
        while chunk := conn.recv(CHUNK):
            answer += chunk
    head, _, rest = answer.partition(b"\r\n\r\n")
    parts = head.split(b" ", 2)
    return (int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0), rest


def first_admin_statement(user: str, password: str) -> str:
    """InfluxQL's quoting (backslash, then the quote), as influx.identifier/string_literal."""
    name = user.replace("\\", "\\\\").replace('"', '\\"')
    secret = password.replace("\\", "\\\\").replace("'", "\\'")
    return f'CREATE USER "{name}" WITH PASSWORD \'{secret}\' WITH ALL PRIVILEGES'


def ensure_first_admin(socket_path: str, user: str, password: str, alive) -> str:
    """Once influxd answers on its socket: create the admin unless users exist.
    Returns what was done; raises RuntimeError when influxd says something else."""
    while True:
        if not alive():
            raise RuntimeError("influxd exited before it served HTTP")
        try:
            if over_socket(socket_path, "GET", "/ping")[0] == 204:
                break
        except OSError:
            pass
        time.sleep(0.05)
    body = urllib.parse.urlencode({"q": first_admin_statement(user, password)}).encode()
    status, said = over_socket(socket_path, "POST", "/query", body)
    if status == 200 and b'"error"' not in said:
        return f"created the first admin {user!r} over the socket"
    if status == 401:
        return "InfluxDB has users already"
    raise RuntimeError(f"influxd refused to create the first admin ({status}): {said.decode(errors='replace')[:300]}")


def die_with_parent() -> None:
    """In the child before exec: SIGKILL when the relay dies (PR_SET_PDEATHSIG), so
    influxd never outlives the process its stop goes through."""
    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)


def listen(address: str) -> socket.socket:
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, int(port)))
    listener.listen(128)
    return listener


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sparkscope.stack.influx_relay", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--listen", required=True, help="HOST:PORT of InfluxDB's HTTP API on the host")
    parser.add_argument("--socket", required=True, help="the Unix socket influxd serves HTTP on")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then influxd's command line")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command to run after --")
    try:
        listener = listen(args.listen)
    except OSError as err:
        print(f"influx_relay: cannot listen on {args.listen}: {err}", file=sys.stderr, flush=True)
        return 1
    stopping = threading.Event()
    admin = [os.environ.get(key, "") for key in FIRST_ADMIN_ENV]
    # Files its supervisor passed as descriptors (/proc/self/fd/N: influxd from
    # root's cache, out of the service user's reach) stay open for the command.
    inherited = [int(arg.rsplit("/", 1)[1]) for arg in command if re.fullmatch(r"/proc/self/fd/\d+", arg)]
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=die_with_parent,
                             pass_fds=inherited, env={k: v for k, v in os.environ.items() if k not in FIRST_ADMIN_ENV})

    def stop(signum, frame) -> None:
        if not stopping.is_set():
            stopping.set()
            child.send_signal(signal.SIGTERM)
        try:
            listener.close()
        except OSError:
            pass

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    failed = False
    if all(admin):
        try:
            done = ensure_first_admin(args.socket, *admin, alive=lambda: child.poll() is None and not stopping.is_set())
            print(f"influx_relay: {done}", file=sys.stderr, flush=True)
        except (RuntimeError, OSError) as err:
            if not stopping.is_set():  # (a stop asked for meanwhile is no failure)
                failed = True
                print(f"influx_relay: {err}; nobody is let in without an admin. Read influxd's lines above, "
                      f"then ./sparkscope up again", file=sys.stderr, flush=True)
                stop(signal.SIGTERM, None)
    if not stopping.is_set():
        threading.Thread(target=Relay(listener, args.socket).serve, daemon=True).start()
        print(f"influx_relay: {args.listen} -> {args.socket} (influxd pid {child.pid})", file=sys.stderr, flush=True)
    while child.poll() is None:
        if stopping.is_set():
            deadline = time.monotonic() + STOP_GRACE_S
            while child.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            if child.poll() is None:
                child.kill()
            break
        time.sleep(0.2)
    code = child.wait()
    listener.close()
    if code < 0 and not stopping.is_set():
        # influxd was killed (the OOM killer, a crash): die of the same signal, so
        # the supervisor sees a crash to restart, not an exit status of a bad start.
        if -code != signal.SIGKILL:
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return 1 if failed else code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
