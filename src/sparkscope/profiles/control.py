"""Talks to the profiler plugin in a Spark driver: finds the control file the
driver left (URL and token, readable only by its user), asks for profiles
and follows them until they are written."""

from __future__ import annotations

import json
import os
import stat
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from sparkscope.store import http
from sparkscope.errors import SparkscopeError
from sparkscope.process import alive

PLUGIN = "dev.sparkscope.annotator.ProfilerPlugin"
HOW_TO_ENABLE = (f"start the application with the profiler plugin: --jars annotator/target/sparkscope-annotator.jar "
                 f"--conf spark.plugins={PLUGIN} (./sparkscope conf prints it)")


class ProfileError(SparkscopeError):
    pass


@dataclass(frozen=True)
class Control:
    application_id: str
    url: str
    token: str
    pid: int
    path: Path


def control_dirs(extra: Optional[Path] = None) -> list[Path]:
    tmp = Path(tempfile.gettempdir())
    dirs = [extra] if extra else []
    return dirs + sorted(tmp.glob("sparkscope-profiler-*"))


def trusted(path: Path) -> bool:
    """A control file (or its directory) the caller may believe: owned by the
    caller, not a symbolic link, and not writable by anyone else. Under a
    shared /tmp another user can plant a file naming their own endpoint, and
    `profile` would send them our bearer token and trust their answer."""
    try:
        st = path.lstat()
    except OSError:
        return False
    return (st.st_uid == os.geteuid() and not stat.S_ISLNK(st.st_mode)
            and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def find_controls(extra_dir: Optional[Path] = None) -> list[Control]:
    """Every running driver's control file on this host that the caller owns
    (trusted), newest first. Files of drivers that died without cleaning up
    are skipped."""
    found = []
    for d in control_dirs(extra_dir):
        if not trusted(d):
            continue
        for f in d.glob("*.json"):
            if not trusted(f):
                continue
            try:
                data = json.loads(f.read_text())
                control = Control(data["application"], data["url"], data["token"], int(data.get("pid", 0)), f)
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if control.pid and not alive(control.pid):
                continue
            found.append((f.stat().st_mtime, control))
    return [c for _, c in sorted(found, key=lambda item: -item[0])]


def find_control(app_id: Optional[str], extra_dir: Optional[Path] = None) -> Control:
    controls = find_controls(extra_dir)
    if app_id:
        for c in controls:
            if c.application_id == app_id:
                return c
        running = ", ".join(c.application_id for c in controls) or "none"
        raise ProfileError(f"no running application {app_id} with the profiler plugin on this host "
                           f"(with it: {running}). The plugin's control endpoint listens on the driver's host: "
                           f"run this there, and {HOW_TO_ENABLE}")
    if not controls:
        raise ProfileError(f"no running Spark application with the profiler plugin on this host: {HOW_TO_ENABLE}")
    return controls[0]


def call(control: Control, method: str, path: str, params: dict[str, str] | None = None,
         timeout: float = 10.0) -> dict:
    url = control.url + path + ("?" + urllib.parse.urlencode(params) if params else "")
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None,
                                     headers={"Authorization": f"Bearer {control.token}"})
    try:
        with http.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as err:
        try:
            message = json.loads(err.read()).get("error", err.reason)
        except ValueError:
            message = err.reason
        raise ProfileError(f"the driver of {control.application_id} refused: {message}") from err
    except (urllib.error.URLError, OSError) as err:
        raise ProfileError(f"the driver of {control.application_id} does not answer at {control.url} ({err}): "
                           f"has the application ended?") from err


def live_executors(control: Control) -> list[str]:
    return list(call(control, "GET", "/executors").get("executors", []))


def request_profile(control: Control, executor: str, mode: str, seconds: float) -> dict:
    return call(control, "POST", "/profile", {"executor": executor, "mode": mode, "seconds": f"{seconds:g}"})


def follow(control: Control, request_ids: list[str], seconds: float,
           progress: Callable[[str], None] = print, poll_s: float = 1.0) -> list[dict]:
    """Waits until every request is done or failed, printing progress; the
    deadline leaves room for the executor to pick the request up (pollSeconds, 5 s)
    and to write."""
    deadline = time.monotonic() + seconds + 60
    started = time.monotonic()
    last_shown = -1
    while True:
        states = [call(control, "GET", "/profile", {"id": rid}) for rid in request_ids]
        if all(s["state"] in ("done", "failed") for s in states):
            return states
        if time.monotonic() > deadline:
            pending = [f"executor {s['executor']}: {s['state']}" for s in states if s["state"] not in ("done", "failed")]
            raise ProfileError(f"profiles not finished {seconds + 60:.0f} s after asking ({', '.join(pending)}): "
                               f"is the executor overloaded or its driver link down?")
        elapsed = int(time.monotonic() - started)
        if elapsed != last_shown and elapsed % 5 == 0:
            running = sum(s["state"] == "running" for s in states)
            progress(f"  {elapsed:>3} s of {seconds:g}: {running} running, "
                     f"{sum(s['state'] == 'queued' for s in states)} waiting for their executor")
            last_shown = elapsed
        time.sleep(poll_s)
