"""apt-get installs that wait while another apt or dpkg holds its lock.

On a fresh machine unattended-upgrades, or a second test run, often holds the
dpkg lock for a minute; failing the suite for that would be wrong. apt waits
for the dpkg lock itself (DPkg::Lock::Timeout) but not for the lists lock of
`apt-get update`, so a run refused for a lock is retried until the deadline.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from sparkscope.provision import BuildError
from sparkscope.process import Progress, log_tail, run_logged

DEADLINE_S = 600.0
RETRY_S = 5.0
# What apt and dpkg print when another one holds their lock.
LOCK_MESSAGES = ("Could not get lock", "Unable to acquire the dpkg frontend lock", "Unable to lock directory",
                 "dpkg frontend lock", "is another process using it")


def apt_install(packages: list[str], progress: Progress = print, deadline_s: float = DEADLINE_S,
                log: Path | None = None) -> None:
    """apt-get update, then apt-get install packages, each waiting up to deadline_s for apt's locks."""
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        raise BuildError(f"{' '.join(packages)} must be installed, and apt-get as root is not available here: "
                         f"install {' '.join(packages)} with your package manager and run again")
    log = log or Path(tempfile.gettempdir()) / "sparkscope-apt.log"
    end = time.monotonic() + deadline_s
    _apt(["update", "-q"], end, log, progress)
    _apt(["install", "-y", "-q", "--no-install-recommends", *packages], end, log, progress)


def _apt(args: list[str], end: float, log: Path, progress: Progress) -> None:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    label = f"apt-get {args[0]}"
    waited = False
    while True:
        timeout = max(1, int(end - time.monotonic()))
        size = log.stat().st_size if log.exists() else 0
        done = run_logged(["apt-get", "-o", f"DPkg::Lock::Timeout={timeout}", *args], log, label, progress,
                          env=env)
        if done.returncode == 0:
            return
        output = log.read_text(errors="replace")[size:]
        if not any(message in output for message in LOCK_MESSAGES):
            raise BuildError(f"{label} failed (exit {done.returncode}):\n{log_tail(log)}\n  Full log: {log}")
        if time.monotonic() >= end:
            raise BuildError(f"{label}: another apt or dpkg still holds its lock after waiting; let it finish "
                             f"(ps -C apt-get,dpkg,unattended-upgr) and run again. Log: {log}")
        if not waited:
            progress(f"  {label}: apt is busy (another apt or dpkg runs); waiting for its lock, up to "
                     f"{end - time.monotonic():.0f} s more")
            waited = True
        time.sleep(min(RETRY_S, max(0.0, end - time.monotonic())))
