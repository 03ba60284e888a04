"""Keeps one native service running (compose has `restart: unless-stopped`,
Kubernetes its restartPolicy; the native backend has this): the service runs
as this process's child, in its process group, so `down` (which signals the
group) stops both. A service that exits on its own is started again after a
backoff that doubles up to BACKOFF_MAX_S, and the restarts are written to a
small JSON status file that `./sparkscope status` reads.

A service that exits with an error within FAST_EXIT_S of its first start is not restarted:
that is a setting or a port, which a restart does not fix, and `up` reports
it at once with the log. Optionally the service runs as another user (root
starts it; InfluxDB, Telegraf and Grafana need no privilege).

Stdlib only: it runs before anything else of sparkscope is needed."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

FAST_EXIT_S = 5.0
BACKOFF_S = 1.0
BACKOFF_MAX_S = 60.0
STEADY_S = 120.0  # up this long: the next exit starts the backoff over


def read_status(path: Path) -> Optional[dict]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _write_status(path: Path, status: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(status))
    os.replace(tmp, path)


def _reachable_as(user: tuple[int, int], path: str) -> bool:
    return subprocess.run(["test", "-r", path], user=user[0], group=user[1], extra_groups=[]).returncode == 0


def _opened_for(user: tuple[int, int], argv: list[str]) -> tuple[list[str], list[int]]:
    """argv with every file out of the user's reach (root's ~/.cache: the built
    binaries) replaced by a descriptor root opened, which the child inherits and
    runs or reads as /proc/self/fd/N; and those descriptors."""
    out, fds = [], []
    for arg in argv:
        if arg.startswith("/") and os.path.isfile(arg) and not _reachable_as(user, arg):
            fd = os.open(arg, os.O_RDONLY)
            fds.append(fd)
            arg = f"/proc/self/fd/{fd}"
        out.append(arg)
    return out, fds


def supervise(argv: list[str], status_path: Path, user: Optional[tuple[int, int]] = None) -> int:
    stopping: list[int] = []
    child: Optional[subprocess.Popen] = None

    def stop(signum, _frame):
        stopping.append(signum)
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    status = {"restarts": 0, "last_exit": None, "last_exit_at": None, "child": None}
    backoff = BACKOFF_S
    while True:
        started = time.monotonic()
        ids: dict = {} if user is None else {"user": user[0], "group": user[1], "extra_groups": []}
        run, fds = _opened_for(user, argv) if user is not None else (argv, [])
        try:
            child = subprocess.Popen(run, stdin=subprocess.DEVNULL, pass_fds=fds, **ids)
        finally:
            for fd in fds:
                os.close(fd)
        status["child"] = child.pid
        _write_status(status_path, status)
        code = child.wait()
        if stopping:
            return code
        lived = time.monotonic() - started
        status.update(last_exit=code, last_exit_at=int(time.time()), child=None)
        if status["restarts"] == 0 and lived < FAST_EXIT_S and code > 0:  # killed by a signal: a crash
            _write_status(status_path, status)
            print(f"supervise: {argv[0]} exited ({code}) {lived:.1f} s after its start; not restarted "
                  f"(a setting or a port: see above)", file=sys.stderr, flush=True)
            return code
        backoff = BACKOFF_S if lived > STEADY_S else backoff
        status["restarts"] += 1
        _write_status(status_path, status)
        print(f"supervise: {argv[0]} exited ({code}) after {lived:.0f} s; restart {status['restarts']} "
              f"in {backoff:.0f} s", file=sys.stderr, flush=True)
        until = time.monotonic() + backoff
        while not stopping and time.monotonic() < until:
            time.sleep(0.1)
        if stopping:
            return code
        backoff = min(backoff * 2, BACKOFF_MAX_S)


def main(args: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sparkscope.stack.supervise")
    parser.add_argument("--status", type=Path, required=True, help="JSON file: restarts, last exit")
    parser.add_argument("--user", help="uid:gid to run the service as (root only)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the service's argv")
    options = parser.parse_args(args)
    command = options.command[1:] if options.command[:1] == ["--"] else options.command
    if not command:
        parser.error("no command to supervise")
    user = tuple(int(part) for part in options.user.split(":")) if options.user else None
    return supervise(command, options.status, user)  # type: ignore[arg-type]


if __name__ == "__main__":
    raise SystemExit(main())
