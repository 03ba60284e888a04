"""Can InfluxDB store points? A full or read-only disk leaves InfluxDB answering
pings and queries while it refuses every write: `status` finds out and says
what to do, for either backend (the disk checks need the native runner's
directories; the test write works everywhere).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path


from sparkscope.store import influx
from sparkscope.settings import Settings
from sparkscope.store.schema import SELF_CHECK_MEASUREMENT


def influx_dirs(state: Path) -> dict[str, Path]:
    """Where the native InfluxDB keeps its files, by the config key they override."""
    base = state / "influxdb"
    return {"INFLUXDB_META_DIR": base / "meta", "INFLUXDB_DATA_DIR": base / "data",
            "INFLUXDB_DATA_WAL_DIR": base / "wal"}


# Below this much free space (or 5 % of a small filesystem) InfluxDB's next
# WAL segment or compaction can fail at any moment.
LOW_DISK_BYTES = 64 * 2**20


@dataclass
class DiskState:
    path: Path  # the InfluxDB directory checked
    mount: Path  # the mount point holding it
    free_bytes: int  # available to unprivileged users, as df shows
    size_bytes: int
    read_only: bool

    @property
    def low(self) -> bool:
        return self.free_bytes < min(LOW_DISK_BYTES, self.size_bytes // 20)


def _mount_point(path: Path) -> Path:
    path = path.resolve()
    device = path.stat().st_dev
    while path.parent != path and path.parent.stat().st_dev == device:
        path = path.parent
    return path


def influx_disks(settings: Settings) -> list[DiskState]:
    """The filesystems holding InfluxDB's meta, data and WAL directories (each once)."""
    seen: dict[int, DiskState] = {}
    for path in influx_dirs(settings.state_dir).values():
        try:
            device = path.stat().st_dev
            if device in seen:
                continue
            fs = os.statvfs(path)
            seen[device] = DiskState(path, _mount_point(path), fs.f_bavail * fs.f_frsize,
                                     fs.f_blocks * fs.f_frsize, bool(fs.f_flag & os.ST_RDONLY))
        except OSError:
            continue  # not created yet: InfluxDB never ran here
    return list(seen.values())


def human_size(n: float) -> str:
    """Bytes as df -h shows them: 0 B, 3.2 MB, 14.0 GB."""
    unit = "B"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            break
        n /= 1024
    return f"{n:.0f} B" if unit == "B" else f"{n:.1f} {unit}"


RESTART_INFLUXDB = "./sparkscope down influxdb && ./sparkscope up influxdb"


def influx_disk_problem(settings: Settings) -> str | None:
    """A read-only filesystem under InfluxDB's directories, for a stopped InfluxDB
    (it cannot start there)."""
    for disk in influx_disks(settings):
        if disk.read_only:
            return (f"InfluxDB's directory {disk.path} is on a read-only filesystem ({disk.mount}); "
                    f"InfluxDB cannot start or store points there. Find out why (mount | grep "
                    f"'{disk.mount}'; a disk error makes the kernel remount read-only: dmesg), make it "
                    f"writable, then: ./sparkscope up influxdb")
    return None


def telegraf_buffer_limit(settings: Settings) -> str:
    """metric_buffer_limit from telegraf/telegraf.conf, for messages."""
    try:
        text = (settings.root / "telegraf" / "telegraf.conf").read_text()
    except OSError:
        return "metric_buffer_limit"
    match = re.search(r"^\s*metric_buffer_limit\s*=\s*(\d+)", text, re.M)
    return f"{int(match.group(1)):,} points" if match else "metric_buffer_limit"


# InfluxDB's error text -> (what it means, what to do before restarting InfluxDB)
_WRITE_CAUSES = (
    ("no space left on device", "its disk is full", "free space on that disk (df -h {mount})"),
    ("read-only file system", "its data directory is on a read-only filesystem",
     "find out why {mount} went read-only (mount; dmesg: disk errors make the kernel remount "
     "read-only) and make it writable"),
    ("permission denied", "it may not write its own files",
     "give the user running InfluxDB write access to {path} (ls -l {path})"),
    ("too many open files", "it ran out of file descriptors",
     "raise its open-files limit (ulimit -n) before starting the stack"),
)


SELFCHECK_SERIES = 8


def influx_write_problem(settings: Settings) -> str | None:
    """Whether InfluxDB can store points; None when it can.

    A full or read-only disk leaves InfluxDB answering pings and queries while
    it refuses writes. Two signals: the filesystems under its directories
    (statvfs: full, read-only), and a test write of a few points of new series. A new series goes through the series index, which
    InfluxDB 1.8 writes apart from its WAL; after a disk-full error either may
    keep failing until InfluxDB restarts, and a point of an existing series
    would test the WAL only. Even so a write can succeed on a full disk when
    it fits in the last, partly used block of a file, hence the statvfs check.
    The check's series are the same every time (measurement
    sparkscope_selfcheck, check=0..7), dropped before each write so that the
    write creates them anew: `status` called every minute for a month adds
    nothing (a drop that fails, on a full disk, changes nothing either).
    """
    try:
        influx.query(settings.influx_admin, f'DROP SERIES FROM "{SELF_CHECK_MEASUREMENT}"', settings.database)
    except influx.InfluxError:
        pass  # the write below says what is wrong
    now = int(time.time())
    points = "\n".join(f"{SELF_CHECK_MEASUREMENT},check={i} ok=1i {now}" for i in range(SELFCHECK_SERIES))
    try:
        influx.write(settings.influx_writer, settings.database, points)
        reason = None
    except influx.WriteRefused as err:
        reason = err.reason
    except influx.InfluxError as err:
        return f"a test write failed: {err}"
    disks = influx_disks(settings)
    # The filesystem InfluxDB names in its error, else a full or read-only one of ours.
    disk = next((d for d in disks if reason and str(d.path) in reason), None) or \
        next((d for d in disks if d.low or d.read_only), None)
    if reason is None and disk is None:
        return None
    return _write_problem_message(settings, reason, disk)


def _write_problem_message(settings: Settings, reason: str | None, disk: DiskState | None) -> str:
    where = {"mount": disk.mount if disk else settings.state_dir / "influxdb",
             "path": disk.path.parent if disk else settings.state_dir / "influxdb"}
    text = (reason or "").lower()
    if reason is None:  # the test write went through, the disk says why the next may not
        text = "read-only file system" if disk.read_only else "no space left on device"
    meaning, remedy = "it fails to store them", f"see {settings.state_dir / 'logs' / 'influxdb.log'}"
    for needle, cause, todo in _WRITE_CAUSES:
        if needle in text:
            meaning, remedy = cause, todo.format(**where)
            break
    disk_full = "no space left" in text
    if disk_full and disk is not None:
        meaning += (f" ({human_size(disk.free_bytes)} free of {human_size(disk.size_bytes)} on {disk.mount})" if disk.low
                    else f" (was: {human_size(disk.free_bytes)} free now on {disk.mount})")
    if reason:
        first = f"refuses writes: {meaning}."
    elif disk_full and disk.free_bytes:
        first = f"{meaning.replace('is full', 'is almost full')}: writes will fail soon."
    else:
        first = f"{meaning}: writes fail from now on (a few may still fit in partly used blocks)."
    lines = [first,
             *([f"InfluxDB says: {reason}"] if reason else []),
             f"Spark runs on; Telegraf keeps Spark's metrics in memory (up to "
             f"{telegraf_buffer_limit(settings)}, then drops the oldest) and retries.",
             f"To fix: {remedy}, then restart InfluxDB alone, so that Telegraf keeps its buffer: "
             f"{RESTART_INFLUXDB}"]
    if disk_full:
        lines.append("InfluxDB 1.8 can keep refusing writes after a full disk until it restarts, even "
                     "once space is free again. A shorter SPARKSCOPE_RETENTION in .env keeps less data.")
    return "\n".join(lines)
