"""System packages only the test suite needs, installed by `sparkscope test`
from Debian's packages when missing:

- bpftrace: the block I/O probe's tests trace a real loop device (without it
  they skip and the live dashboard's block latency panels stay empty);
- libfuse2: the slow disk of the disk and thread tests is a FUSE file system
  (src/sparkscope_testkit/slow_fs.py, through fusepy, which loads libfuse.so.2);
- tmux: tests/test_top.py runs `sparkscope top` in a real terminal.

`sparkscope install` does not install them: the probe is opt-in for users
(docs/probes.md, "Block I/O probe"), and FUSE is only the tests' slow disk."""

from __future__ import annotations

import ctypes.util
import os
import shutil
from typing import Callable, Optional

from sparkscope.provision import BuildError
from sparkscope.provision.apt import apt_install
from sparkscope.process import Progress

# package -> how to tell it is here
NEEDED: dict[str, Callable[[], Optional[str]]] = {
    "bpftrace": lambda: shutil.which("bpftrace"),
    "libfuse2": lambda: ctypes.util.find_library("fuse"),
    "tmux": lambda: shutil.which("tmux"),  # tests/test_top.py: `sparkscope top` in a real terminal
}


def missing_test_packages() -> list[str]:
    return [package for package, found in NEEDED.items() if not found()]


def ensure_test_packages(progress: Progress = print) -> str:
    missing = missing_test_packages()
    if not missing:
        return f"{', '.join(NEEDED)} present"
    if os.geteuid() != 0:
        raise BuildError(f"the tests need {' '.join(missing)}, and only root installs them here: install "
                         f"{' '.join(missing)} with your package manager; the tests that need them skip or fail "
                         "until then")
    progress(f"installing {' '.join(missing)} for the disk, block I/O and thread tests (once, about a minute)")
    apt_install(missing, progress)
    still = missing_test_packages()
    if still:
        raise BuildError(f"apt-get installed {' '.join(missing)} but {' '.join(still)} cannot be found "
                         "(bpftrace on PATH, libfuse.so.2 by the linker)")
    return f"installed {' '.join(missing)}"
