#!/usr/bin/env python3
"""What Telegraf's memory buffer costs per point it holds while InfluxDB is
away (TELEGRAF_BUFFER_LIMIT is sized from it: docs/performance.md, "How much
buffer").

A throwaway stack (InfluxDB, Telegraf, every Spark metric kept) is started;
InfluxDB is stopped; simulated executors send Spark's metric names (the
recording bench/ingest.py sends) until Telegraf holds --points points; its
resident memory is read before and after (VmRSS and the peak VmHWM). Then
InfluxDB comes back and the run checks every point was stored (nothing was
dropped, so the figure is per point held, not per point lost).

    .venv/bin/python bench/telegraf_buffer.py --points 1000000
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

from ingest import executor_metric_paths, send_load, stored_points
from sparkscope.process import quiet, wait_until
from sparkscope.stack.native import NativeBackend, PidFile
from sparkscope_testkit.sandbox import throwaway_stack


def rss_mb(pid: int, key: str = "VmRSS:") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1]) / 1024
    raise ProcessLookupError(pid)


def failed_writes(log: Path) -> int:
    return log.read_text(errors="replace").count("Error writing to outputs.influxdb")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=1_000_000, help="points to hold (default 1,000,000)")
    args = parser.parse_args()
    per_report = len(executor_metric_paths())
    executors = max(1, args.points // per_report // 10)
    with tempfile.TemporaryDirectory(prefix="sparkscope-buffer-") as tmp, \
            throwaway_stack(Path(tmp) / "state", only=("influxdb", "telegraf"), unread_metrics="pass",
                            TELEGRAF_BUFFER_LIMIT=str(args.points * 2)) as settings:
        backend = NativeBackend(settings)
        telegraf = PidFile(settings.state_dir, "telegraf").running_pid()
        log = backend.log_path("telegraf")
        time.sleep(12)  # its first flushes and internal metrics: the baseline
        backend.down(only=("influxdb",), progress=quiet)
        before = rss_mb(telegraf)
        app = f"app-buffer-{int(time.time())}"
        failed = failed_writes(log)
        sent, took = send_load((settings.graphite_host, settings.graphite_port), app, executors, 1.0,
                               max(1, args.points // (executors * per_report)), random.Random(1))
        # Two failed flushes after the last line: Telegraf has parsed and buffered them all.
        wait_until(lambda: failed_writes(log) >= failed + 2, 120)
        time.sleep(4)
        held, peak = rss_mb(telegraf), rss_mb(telegraf, "VmHWM:")
        backend.up(only=("influxdb",), progress=quiet)
        start = int(time.time()) - 3600
        wait_until(lambda: stored_points(settings.influx_reader, settings.database, app, start) >= sent, 600, 5)
        stored = stored_points(settings.influx_reader, settings.database, app, start)
        per_point = (held - before) * 1024 * 1024 / sent
        print(f"points held {sent:,} ({executors} executors x {per_report} names, sent in {took:.0f} s); "
              f"stored after InfluxDB came back {stored:,}")
        print(f"Telegraf RSS {before:.0f} MiB -> {held:.0f} MiB (peak {peak:.0f} MiB): "
              f"{per_point:.0f} bytes per buffered point")
        for limit in (1_000_000, 10_000_000):
            print(f"  a full buffer of {limit:,} points: about {limit * per_point / 2**30:.1f} GiB more")
        return 0 if stored == sent else 1


if __name__ == "__main__":
    sys.exit(main())
