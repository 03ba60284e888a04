#!/usr/bin/env python3
"""What the block I/O probe costs: CPU of its processes, CPU of its eBPF
programs in the kernel, and the I/O rate of a workload with and without it.

A loop device on a file in /dev/shm (so the device is fast and the tracing
cost is not hidden behind a slow disk) takes 4 KiB O_DIRECT random reads from
fio for --seconds per run, alternately without and with the probe (ABBA
order, so a drift in the machine's load falls on both arms). The probe sends
to a local HTTP sink in this process that counts the lines, standing in for
Telegraf. Printed per run: IOPS (fio), I/Os the kernel completed on all
devices per second (/proc/diskstats: the events the probe traced), the
probe's user+system CPU (python wrapper + bpftrace, /proc/<pid>/stat), and the
kernel time of its eBPF programs (run_time_ns from the programs' fdinfo,
with kernel.bpf_stats_enabled=1 for the run). Needs root, bpftrace, fio.

    .venv/bin/python bench/blockprobe.py --seconds 15 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from sparkscope.probes.blockprobe.probe import ATTACHED
from sparkscope.probes.blockprobe.readiness import why_not_traceable
from overhead import process_cpu_seconds
from sparkscope.process import start_group, stop_group, wait_until

ROOT = Path(__file__).resolve().parents[1]



class Sink(BaseHTTPRequestHandler):
    lines = 0

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        Sink.lines += body.count(b"\n") + 1
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out += [int(c) for c in (task / "children").read_text().split()]
    return out


def bpf_prog_stats(pid: int) -> tuple[int, int]:
    """Sum of run_time_ns and run_cnt over the eBPF programs pid holds."""
    run_ns = runs = 0
    for fd in Path(f"/proc/{pid}/fdinfo").iterdir():
        try:
            info = fd.read_text()
        except OSError:
            continue
        if "prog_type:" not in info:
            continue
        for line in info.splitlines():
            key, _, value = line.partition(":")
            if key == "run_time_ns":
                run_ns += int(value)
            elif key == "run_cnt":
                runs += int(value)
    return run_ns, runs


def completed_ios() -> int:
    total = 0
    for line in Path("/proc/diskstats").read_text().splitlines():
        cols = line.split()
        total += int(cols[3]) + int(cols[7])
    return total


def fio(device: str, seconds: int) -> float:
    done = subprocess.run(["fio", "--name=bench", f"--filename={device}", "--rw=randread", "--bs=4k",
                           "--direct=1", "--ioengine=psync", "--time_based", f"--runtime={seconds}",
                           "--output-format=json"], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)["jobs"][0]["read"]["iops"]


def run_once(device: str, seconds: int, with_probe: bool, url: str, log: Path) -> dict:
    probe = None
    if with_probe:
        size = log.stat().st_size if log.exists() else 0
        probe = start_group([sys.executable, "-m", "sparkscope.probes.blockprobe", "--url", url, "--period", "5"], log,
                            env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))
        if not wait_until(lambda: ATTACHED in log.read_text()[size:] or probe.poll() is not None, 30):
            raise SystemExit(f"probe did not attach; see {log}")
        bpftrace = children(probe.pid)[0]
        cpu0 = process_cpu_seconds([probe.pid, bpftrace])
        bpf0 = bpf_prog_stats(bpftrace)
    ios0, t0 = completed_ios(), time.monotonic()
    iops = fio(device, seconds)
    elapsed = time.monotonic() - t0
    events = (completed_ios() - ios0) / elapsed
    row = {"probe": with_probe, "iops": iops, "events_per_s": events}
    if probe:
        row["probe_cpu_pct"] = 100 * (process_cpu_seconds([probe.pid, bpftrace]) - cpu0) / elapsed
        run_ns, runs = bpf_prog_stats(bpftrace)
        row["bpf_cpu_pct"] = 100 * (run_ns - bpf0[0]) / 1e9 / elapsed
        row["bpf_ns_per_run"] = (run_ns - bpf0[0]) / max(runs - bpf0[1], 1)
        row["bpf_ns_per_io"] = (run_ns - bpf0[0]) / max(events * elapsed, 1)
        stop_group(probe.pid, proc=probe)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    reason = why_not_traceable(mount=True)
    if reason:
        raise SystemExit(f"cannot trace here: {reason}")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    stats = Path("/proc/sys/kernel/bpf_stats_enabled")
    stats_before = stats.read_text().strip()
    stats.write_text("1")
    work = Path(tempfile.mkdtemp(prefix="blockprobe-bench-", dir="/dev/shm"))
    backing = work / "disk.img"
    backing.write_bytes(b"")
    os.truncate(backing, 256 << 20)
    device = subprocess.run(["losetup", "--find", "--show", str(backing)], capture_output=True, text=True,
                            check=True).stdout.strip()
    rows = []
    try:
        order = [False, True, True, False] * ((args.rounds + 1) // 2)
        for i, with_probe in enumerate(order[: 2 * args.rounds]):
            row = run_once(device, args.seconds, with_probe, url, work / "probe.log")
            rows.append(row)
            print(f"run {i + 1}: probe {'on ' if with_probe else 'off'}  fio {row['iops']:9.0f} IOPS  "
                  f"I/Os completed {row['events_per_s']:9.0f}/s"
                  + (f"  probe CPU {row['probe_cpu_pct']:5.1f} % of a core (bpftrace + wrapper)  "
                     f"eBPF in kernel {row['bpf_cpu_pct']:5.1f} %  {row['bpf_ns_per_run']:.0f} ns per program run, "
                     f"{row['bpf_ns_per_io']:.0f} ns per I/O"
                     if with_probe else ""), flush=True)
    finally:
        subprocess.run(["losetup", "-d", device], capture_output=True)
        for path in (backing, work / "probe.log"):
            path.unlink(missing_ok=True)
        work.rmdir()
        stats.write_text(stats_before)
        server.shutdown()
    on = [r for r in rows if r["probe"]]
    off = [r for r in rows if not r["probe"]]
    print(f"\nmedian IOPS without probe {statistics.median(r['iops'] for r in off):.0f}, with "
          f"{statistics.median(r['iops'] for r in on):.0f} "
          f"(ratio {statistics.median(r['iops'] for r in on) / statistics.median(r['iops'] for r in off):.3f})")
    print(f"median probe CPU {statistics.median(r['probe_cpu_pct'] for r in on):.1f} % of a core, eBPF "
          f"{statistics.median(r['bpf_cpu_pct'] for r in on):.1f} % "
          f"({statistics.median(r['bpf_ns_per_io'] for r in on):.0f} ns per I/O), at "
          f"{statistics.median(r['events_per_s'] for r in on):.0f} traced I/Os per second; "
          f"{Sink.lines} lines received by the sink")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
