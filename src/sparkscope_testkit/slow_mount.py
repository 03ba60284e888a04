"""support/slow_fs.py mounted for the length of a `with`: a directory
mirrored at a mount point, every read and write delayed; unmounted after.
Needs root and /dev/fuse."""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from sparkscope.process import wait_until


@contextmanager
def slow_fs_mounted(under: Path, mnt: Path, log: Path, delay_ms: int) -> Iterator[None]:
    fs = subprocess.Popen([sys.executable, str(Path(__file__).with_name("slow_fs.py")), str(under), str(mnt),
                           str(delay_ms)], stdout=subprocess.DEVNULL, stderr=open(log, "w"))
    try:
        assert wait_until(lambda: os.path.ismount(mnt) or fs.poll() is not None, 20) and fs.poll() is None, (
            f"slow FUSE file system did not mount: {log.read_text()}")
        yield
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
        fs.terminate()
        fs.wait(timeout=30)
