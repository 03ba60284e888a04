"""Can InfluxDB store points? A full or read-only disk leaves InfluxDB answering
pings and queries while it refuses every write: `status` finds out and says
what to do, for either backend, by reading only: the filesystems under
InfluxDB's directories (the native runner's), and what InfluxDB answered
Telegraf's last writes, from Telegraf's log (telegraf_refusal). status never
writes a point: it runs as often as a user or a monitor likes, against the
user's own database.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from typing import Iterable, Optional

from sparkscope.settings import Settings


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


# How far back a write Telegraf logged as refused counts as now: Telegraf flushes
# every 2 s (telegraf.conf), so a refusing InfluxDB shows within seconds; a
# refusal a minute gone was followed by writes that went through, or by none.
REFUSAL_WINDOW_S = 60
_TELEGRAF_WRITE_ERROR = re.compile(r"^(\S+)\s+E! \[outputs\.influxdb\] When writing to \[[^]]*\]: (.*)$")


# A refusal is InfluxDB's answer, which Telegraf logs from its HTTP status on
# ("500 Internal Server Error: ..."). Everything else ("failed doing req: ...:
# connection refused", "EOF", a client timeout) is Telegraf not reaching an
# InfluxDB that was down or starting: its own health check says that, now.
_ANSWERED = re.compile(r"^[1-5]\d\d ")


def telegraf_refusal(log_lines: Iterable[str], now: Optional[datetime] = None,
                     window_s: float = REFUSAL_WINDOW_S, since: Optional[datetime] = None) -> Optional[str]:
    """What InfluxDB answered the newest write Telegraf logged as failed within
    window_s (and after `since`, the current InfluxDB's start: a refusal of the
    process before a restart is not this one's), or None. Only InfluxDB's
    answers (an HTTP status) are refusals: failing to reach it is not. Lines are Telegraf's (`2026-11-27T10:00:02Z E!
    [outputs.influxdb] When writing to [http://...]: 500 Internal Server Error:
    ... no space left on device`), with or without compose's `telegraf-1  | ` prefix."""
    now = now or datetime.now(timezone.utc)
    found = None
    for line in log_lines:
        match = _TELEGRAF_WRITE_ERROR.match(line.split(" | ", 1)[-1].strip())
        if not match:
            continue
        try:
            at = datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        except ValueError:
            continue
        if (now - at).total_seconds() > window_s or (since is not None and at <= since):
            continue
        if _ANSWERED.match(match.group(2)):
            found = match.group(2)
    return found


def influx_write_problem(settings: Settings, refusal: Optional[str]) -> str | None:
    """Whether InfluxDB can store points; None when it can. Reads only.

    A full or read-only disk leaves InfluxDB answering pings and queries while
    it refuses writes. Two signals: what InfluxDB answered Telegraf's writes
    in the last minute (refusal: telegraf_refusal of Telegraf's log), and the
    filesystems under its directories (statvfs: full, read-only), which see a
    full disk even while a write still fits in the last, partly used block of
    a file. Without Telegraf running nothing is written, and only the disks say.
    """
    disks = influx_disks(settings)
    # The filesystem InfluxDB names in its error, else a full or read-only one of ours.
    disk = next((d for d in disks if refusal and str(d.path) in refusal), None) or \
        next((d for d in disks if d.low or d.read_only), None)
    if refusal is None and disk is None:
        return None
    return _write_problem_message(settings, refusal, disk)


def _write_problem_message(settings: Settings, reason: str | None, disk: DiskState | None) -> str:
    where = {"mount": disk.mount if disk else settings.state_dir / "influxdb",
             "path": disk.path.parent if disk else settings.state_dir / "influxdb"}
    text = (reason or "").lower()
    if reason is None:  # no write refused yet: the disk says why the next will be
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
             *([f"InfluxDB says: {reason} (its answer to Telegraf's last write)"] if reason else []),
             f"Spark runs on; Telegraf keeps Spark's metrics in memory (up to "
             f"{telegraf_buffer_limit(settings)}, then drops the oldest) and retries.",
             f"To fix: {remedy}, then restart InfluxDB alone, so that Telegraf keeps its buffer: "
             f"{RESTART_INFLUXDB}"]
    if disk_full:
        lines.append("InfluxDB 1.8 can keep refusing writes after a full disk until it restarts, even "
                     "once space is free again. A shorter SPARKSCOPE_RETENTION in .env keeps less data.")
    return "\n".join(lines)
