"""The block I/O latency probe: runs latency.bt under bpftrace and sends what it
reports to Telegraf's line-protocol listener (the annotator's events port), so
the probe's points take the same path, and the same buffering through an
InfluxDB restart, as everything else.

Standard library only: the compose service runs this file in a small image
with bpftrace and python3 and nothing of sparkscope's environment.

What it writes, per report period (tags: device, direction = read | write |
discard | other; Telegraf adds host):
- block_latency: count, mean_ms, p50_ms, p99_ms, max_ms. max is exact; p50 and
  p99 are read off the log2 histogram, interpolated inside their bucket, so
  they are right within that bucket's width (a factor of two).
- block_latency_hist: one point per log2 bucket, tag le_us (the bucket's upper
  bound in microseconds, exclusive), field count: the heatmap.
- block_outlier: one point per I/O at or above the threshold, at its completion
  time: latency_ms, bytes, pid, comm (the task that submitted it, where the
  kernel knows it), text (one line for annotations).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from http.client import HTTPException
import urllib.error
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from sparkscope.store import http, lineprotocol
from sparkscope.probes.blockprobe.readiness import why_not_traceable
from sparkscope.probes.cli import add_url_argument, host_tagged
from sparkscope.store.schema import BLOCK_LATENCY, BLOCK_LATENCY_HIST, BLOCK_OUTLIER, BLOCK_OUTLIER_DROPPED

SCRIPT = Path(__file__).with_name("latency.bt")
DEFAULT_PERIOD_S = 10
DEFAULT_THRESHOLD_MS = 100.0
# bpftrace's maps default to 4096 keys: I/Os in flight beyond that would go
# untimed. 65536 in-flight requests is far above any queue depth.
MAP_KEYS_MAX = "65536"
ATTACHED = "attached to the block tracepoints"
# Outliers written one by one per period at most; beyond, they are counted
# (block_outlier_dropped): a disk gone bad must not turn the probe into a flood.
MAX_OUTLIERS_PER_PERIOD = 1000
# bpftrace that exits on its own (a kernel hiccup, a killed child) is started
# again after 1, 2, 4 ... at most 60 s.
RESTART_BACKOFF_S = (1, 2, 4, 8, 16, 32, 60)


def direction(rwbs: str) -> str:
    """The kernel's rwbs flags to one word: D discard, W write, R read; flushes
    without data (N) and anything else are 'other'."""
    for flag, name in (("D", "discard"), ("W", "write"), ("R", "read")):
        if flag in rwbs:
            return name
    return "other"


def device_names(sys_dev_block: Path = Path("/sys/dev/block")) -> dict[int, str]:
    """Kernel-internal dev_t (major << 20 | minor, as the block tracepoints
    give it) -> device name (vda, nvme0n1, loop3)."""
    names = {}
    for entry in sys_dev_block.glob("*:*"):
        major, _, minor = entry.name.partition(":")
        try:
            uevent = (entry / "uevent").read_text()
        except OSError:
            continue
        for line in uevent.splitlines():
            if line.startswith("DEVNAME="):
                names[(int(major) << 20) | int(minor)] = line[len("DEVNAME="):]
    return names


@dataclass
class Histogram:
    """Log2 latency buckets of one device and direction over one period."""
    buckets: dict[int, int] = field(default_factory=dict)  # lower bound in us -> count
    max_us: int = 0
    sum_us: int = 0

    def add(self, lower_us: int, count: int) -> None:
        self.buckets[lower_us] = self.buckets.get(lower_us, 0) + count

    @property
    def count(self) -> int:
        return sum(self.buckets.values())

    def quantile_us(self, q: float) -> float:
        """The q-quantile, interpolated linearly inside its log2 bucket and
        never above the exact maximum."""
        rank = q * self.count
        seen = 0
        for lower in sorted(self.buckets):
            n = self.buckets[lower]
            if n and seen + n >= rank:
                upper = max(lower * 2, 1)
                value = lower + (upper - lower) * (rank - seen) / n
                return min(value, float(self.max_us))
            seen += n
        return float(self.max_us)


def _key(text: str, names: dict[int, str]) -> tuple[str, str]:
    dev, _, rwbs = text.partition(",")
    return device_name(int(dev), names), direction(rwbs)


def device_name(dev: int, names: dict[int, str]) -> str:
    if dev not in names:
        names.update(device_names())
    return names.get(dev, f"{dev >> 20}:{dev & 0xFFFFF}")


class Reports:
    """Turns bpftrace's JSON lines into line protocol, one period at a time."""

    def __init__(self, clock_offset_ns: int, names: Optional[dict[int, str]] = None):
        # bpftrace's nsecs is CLOCK_MONOTONIC; this turns it into wall time.
        self.clock_offset_ns = clock_offset_ns
        self.names = names if names is not None else device_names()
        self.period: dict[tuple[str, str], Histogram] = {}
        self.period_closed = False
        self.outliers = 0  # written this period
        self.dropped_outliers = 0  # beyond MAX_OUTLIERS_PER_PERIOD this period
        self.unreadable = 0  # lines skipped since start: not bpftrace's JSON as expected

    def feed(self, line: str) -> list[str]:
        """One line of `bpftrace -f json`; returns the line-protocol lines it
        completes. Any line it cannot read (a short line, a message of another
        shape, bad numbers) is skipped and counted, never fatal."""
        try:
            return self._feed(json.loads(line))
        except (ValueError, KeyError, TypeError, AttributeError, IndexError):
            self.unreadable += 1
            return []

    def _feed(self, message: dict) -> list[str]:
        kind, data = message.get("type"), message.get("data")
        if kind == "hist":
            for key, buckets in data.get("@hist", {}).items():
                hist = self.period.setdefault(_key(key, self.names), Histogram())
                for bucket in buckets:
                    if bucket.get("count"):
                        hist.add(int(bucket["min"]), int(bucket["count"]))
        elif kind == "map":
            for name, attr in (("@max", "max_us"), ("@sum", "sum_us")):
                for key, value in data.get(name, {}).items():
                    hist = self.period.setdefault(_key(key, self.names), Histogram())
                    current = getattr(hist, attr)
                    setattr(hist, attr, max(current, int(value)) if attr == "max_us" else current + int(value))
        elif kind == "printf":
            words = data.split()
            if words[:1] == ["outlier"] and len(words) >= 7:
                line = self._outlier(words)  # read first: a bad line is skipped, not counted
                if self.outliers >= MAX_OUTLIERS_PER_PERIOD:
                    self.dropped_outliers += 1
                    return []
                self.outliers += 1
                return [line]
            if words[:1] == ["end"] and len(words) == 2:
                return self._close(int(words[1]) + self.clock_offset_ns)
        return []

    def _outlier(self, words: list[str]) -> str:
        _, dev, rwbs, us, size, pid, done_ns = words[:7]
        comm = " ".join(words[7:]) or "?"
        device = device_name(int(dev), self.names)
        way = direction(rwbs)
        ms = int(us) / 1000
        who = f"pid {pid} ({comm})" if int(pid) else "pid unknown"
        text = f"{device} {way} {ms:.1f} ms, {int(size)} B, {who}"
        return lineprotocol.line(BLOCK_OUTLIER, {"device": device, "direction": way},
                                 {"latency_ms": ms, "bytes": int(size), "pid": int(pid), "comm": comm, "text": text},
                                 int(done_ns) + self.clock_offset_ns)

    def _close(self, at_ns: int) -> list[str]:
        lines = []
        for (device, way), hist in sorted(self.period.items()):
            if not hist.count:
                continue
            tags = {"device": device, "direction": way}
            lines.append(lineprotocol.line(BLOCK_LATENCY, tags, {
                "count": hist.count, "mean_ms": hist.sum_us / hist.count / 1000,
                "p50_ms": hist.quantile_us(0.5) / 1000, "p99_ms": hist.quantile_us(0.99) / 1000,
                "max_ms": hist.max_us / 1000}, at_ns))
            for lower, n in sorted(hist.buckets.items()):
                lines.append(lineprotocol.line(BLOCK_LATENCY_HIST, {**tags, "le_us": str(max(lower * 2, 1))},
                                               {"count": n}, at_ns))
        if self.dropped_outliers:
            lines.append(lineprotocol.line(BLOCK_OUTLIER_DROPPED, {}, {"count": self.dropped_outliers}, at_ns))
        self.period, self.outliers, self.dropped_outliers = {}, 0, 0
        self.period_closed = True
        return lines


def send(url: str, lines: list[str], timeout_s: float = 5.0) -> None:
    """POST line protocol to Telegraf's listener; a failure is logged and the
    period dropped (Telegraf itself buffers through an InfluxDB outage)."""
    if not lines:
        return
    try:
        http.post_lines(url, host_tagged(lines), timeout_s)
    except (urllib.error.URLError, OSError, HTTPException) as err:  # HTTPException: whatever holds the port speaks no HTTP
        print(f"blockprobe: {len(lines)} points not sent to {url}: {err}; is Telegraf up?", file=sys.stderr,
              flush=True)


def bpftrace_argv(period_s: int, threshold_ms: float, bpftrace: str = "bpftrace") -> list[str]:
    return [bpftrace, "-f", "json", str(SCRIPT), str(int(period_s)), str(int(threshold_ms * 1000))]


def run(url: str, period_s: int, threshold_ms: float, backoff_s: tuple = RESTART_BACKOFF_S) -> int:
    """Trace until SIGTERM; bpftrace exiting on its own is restarted with backoff."""
    env = dict(os.environ, BPFTRACE_MAP_KEYS_MAX=MAP_KEYS_MAX)
    stopping = []
    proc: Optional[subprocess.Popen] = None

    def stop(*_):
        stopping.append(True)
        if proc is not None:
            proc.terminate()

    signal.signal(signal.SIGTERM, stop)
    reports = Reports(time.time_ns() - time.monotonic_ns())
    print(f"blockprobe: tracing block I/O, period {period_s} s, outliers >= {threshold_ms:g} ms -> {url}",
          file=sys.stderr, flush=True)
    restarts = 0
    while True:
        # bpftrace prints what the kernel gives it (process names are any bytes): never fail on decoding.
        proc = subprocess.Popen(bpftrace_argv(period_s, threshold_ms), stdout=subprocess.PIPE, text=True,
                                errors="replace", env=env, bufsize=1)
        pending: list[str] = []
        for line in proc.stdout:
            if line.startswith('{"type": "attached_probes"'):
                print(f"blockprobe: {ATTACHED}", file=sys.stderr, flush=True)
                restarts = 0
            pending += reports.feed(line)
            if reports.period_closed:  # outliers go with their period's report, in one request
                send(url, pending)
                pending, reports.period_closed = [], False
        send(url, pending)
        code = proc.wait()
        if stopping:
            return code
        wait_s = backoff_s[min(restarts, len(backoff_s) - 1)]
        restarts += 1
        print(f"blockprobe: bpftrace exited ({code}); starting it again in {wait_s} s "
              f"({reports.unreadable} unreadable lines so far)", file=sys.stderr, flush=True)
        until = time.monotonic() + wait_s
        while not stopping and time.monotonic() < until:
            time.sleep(0.1)
        if stopping:
            return code


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sparkscope.probes.blockprobe",
                                     description="Trace block I/O latency with eBPF and send it to Telegraf.")
    add_url_argument(parser, "BLOCKPROBE_URL")
    parser.add_argument("--period", type=int, default=int(os.environ.get("BLOCKPROBE_PERIOD_S", DEFAULT_PERIOD_S)),
                        help="seconds per histogram and percentile report (default %(default)s)")
    parser.add_argument("--threshold-ms", type=float,
                        default=float(os.environ.get("BLOCKPROBE_THRESHOLD_MS", DEFAULT_THRESHOLD_MS)),
                        help="I/Os at least this slow are written one by one as outliers (default %(default)s)")
    args = parser.parse_args(argv)
    reason = why_not_traceable(mount=True)
    if reason:
        print(f"blockprobe: cannot trace block I/O: {reason}", file=sys.stderr)
        return 2
    return run(args.url, args.period, args.threshold_ms)


