"""What sparkscope builds or installs, each cached so that only a first run
pays for it: InfluxDB and Telegraf (go.py), the annotator jar
(annotator_jar.py), Debian packages (apt.py), and the first run's builds
beside pip (prebuild.py). The test suite's own tools are built by
sparkscope_dev, through build_once and apt.py here."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Iterator

from sparkscope.errors import SparkscopeError


class BuildError(SparkscopeError):
    """A component could not be built or installed; the message says what to do next."""


# Set to 1 where nothing may be built, downloaded or installed (the fast test
# tier: its tests that need a tool this machine has not built are skipped).
NO_BUILDS_ENV = "SPARKSCOPE_NO_BUILDS"


class NotBuilt(SparkscopeError):
    """A build or install was needed where they are off (NO_BUILDS_ENV): not a
    BuildError, which callers report as a failure; the fast tier skips on it."""


def refuse_when_builds_are_off(what: str) -> None:
    if os.environ.get(NO_BUILDS_ENV) == "1":
        raise NotBuilt(f"{what} is not on this machine yet and builds are off here ({NO_BUILDS_ENV}=1): "
                       "./sparkscope test (the full suite) builds it once")


def build_once(dest: Path, build: Callable[[Path], None],
               waiting: Callable[[], None] | None = None) -> Path:
    """dest, made by build(staging) in a private folder beside it and moved
    into place only once build returned: an interrupted build leaves nothing
    half-made (the next run simply builds again). One build at a time: a run
    that finds another building the same dest (the launcher's prebuild beside
    pip, a second test worker) waits for it, saying so through waiting(),
    and takes its result."""
    if dest.exists():
        return dest
    refuse_when_builds_are_off(dest.name)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with exclusive(dest.parent / f".{dest.name}.lock", waiting):
        if dest.exists():
            return dest
        staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
        try:
            build(staging)
            os.replace(staging, dest)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return dest


@contextlib.contextmanager
def exclusive(lock_file: Path, waiting: Callable[[], None] | None = None) -> Iterator[None]:
    """One holder at a time across processes (two test workers, a demo beside
    a test run) for a build made in place; the caller checks again inside
    whether another holder already made it. waiting() is called once when
    another process holds it. The kernel lets go when a holder dies."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_file, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting is not None:
                waiting()
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield
