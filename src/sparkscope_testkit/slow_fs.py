"""A FUSE file system that mirrors a directory and sleeps before every read
and write: a loop device backed by a file here is a slow disk (this kernel has
no device-mapper, so no dm-delay).

Run as its own process, in the foreground, until unmounted:
    python slow_fs.py <directory> <mountpoint> <delay_ms>
Opened with direct_io, so every read reaches it (none is served from the page
cache) and every I/O of the loop device pays the delay.
"""

from __future__ import annotations

import errno
import os
import sys
import time

from fuse import FUSE, FuseOSError, Operations


class SlowMirror(Operations):
    def __init__(self, root: str, delay_s: float):
        self.root = root
        self.delay_s = delay_s

    def _path(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def getattr(self, path, fh=None):
        try:
            st = os.lstat(self._path(path))
        except FileNotFoundError:
            raise FuseOSError(errno.ENOENT)
        return {key: getattr(st, key) for key in ("st_mode", "st_nlink", "st_size", "st_uid", "st_gid",
                                                  "st_atime", "st_mtime", "st_ctime")}

    def readdir(self, path, fh):
        return [".", "..", *os.listdir(self._path(path))]

    def open(self, path, flags):
        return os.open(self._path(path), flags & ~os.O_DIRECT)

    def read(self, path, size, offset, fh):
        time.sleep(self.delay_s)
        return os.pread(fh, size, offset)

    def write(self, path, data, offset, fh):
        time.sleep(self.delay_s)
        return os.pwrite(fh, data, offset)

    def truncate(self, path, length, fh=None):
        os.truncate(self._path(path), length)

    def flush(self, path, fh):
        return 0

    def fsync(self, path, datasync, fh):
        return 0

    def release(self, path, fh):
        os.close(fh)
        return 0


def main(root: str, mountpoint: str, delay_ms: str) -> None:
    # Threads: the loop device keeps several I/Os in flight, each sleeping on its own.
    FUSE(SlowMirror(root, float(delay_ms) / 1000), mountpoint, foreground=True, nothreads=False,
         direct_io=True, allow_other=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
