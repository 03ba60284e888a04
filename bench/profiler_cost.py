#!/usr/bin/env python3
"""What the profiler plugin costs the work it samples, measured in one JVM
(bench/jobs/ProfilerCost.java): a fixed CPU-bound workload on two task-named
threads runs alternately without and with a profiling session (the plugin's
own ProfilerSession: async-profiler, a dump every 2 s, samples regrouped by
stage and turned into line protocol), in ABBA order. The figure is the
process CPU time from the session's start until its last profile is written,
so the session's own work counts; CPU time is less disturbed than wall time
by other work on a shared machine. The TPC-DS view of the same question is
bench/overhead.py --base-conf spark.plugins=.

    .venv/bin/python bench/profiler_cost.py --rounds 6
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
from pathlib import Path

from sparkscope.provision.annotator_jar import ensure_annotator_jar

ROOT = Path(__file__).resolve().parents[1]

# (label, mode, interval): the continuous default, the on-demand rate, wall and alloc on demand.
CONFIGS = [("continuous cpu, 100 ms", "cpu", "100"), ("on demand cpu, 10 ms", "cpu", "10"),
           ("on demand wall, 10 ms", "wall", "10"), ("on demand alloc, 512 KiB", "alloc", str(512 * 1024))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=6, help="ABBA rounds per setting (default %(default)s)")
    parser.add_argument("--iterations", type=int, default=1_000_000_000,
                        help="work per thread per run (default %(default)s: a few seconds here)")
    args = parser.parse_args()
    jar = ensure_annotator_jar(ROOT)
    with tempfile.TemporaryDirectory(prefix="sparkscope-bench-profiler-") as tmp:
        subprocess.run(["javac", "-cp", str(jar), "-d", tmp, str(ROOT / "bench" / "jobs" / "ProfilerCost.java")],
                       check=True)
        print(f"{'setting':28} {'CPU off':>9} {'CPU on':>9} {'ratio':>7} {'per-round ratio (min..max)':>28} "
              f"{'samples':>8} {'rows+1':>7}")
        for label, mode, interval in CONFIGS:
            out = subprocess.run(["java", "-cp", f"{jar}:{tmp}", "dev.sparkscope.annotator.ProfilerCost", mode,
                                  interval, str(args.rounds), str(args.iterations)],
                                 capture_output=True, text=True, check=True).stdout
            runs = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
            off = {r["round"]: r for r in runs if not r["profiled"]}
            on = {r["round"]: r for r in runs if r["profiled"]}
            ratios = [on[n]["cpu_s"] / off[n]["cpu_s"] for n in sorted(off)]
            med_off = statistics.median(r["cpu_s"] for r in off.values())
            med_on = statistics.median(r["cpu_s"] for r in on.values())
            print(f"{label:28} {med_off:8.2f}s {med_on:8.2f}s {med_on / med_off:7.3f} "
                  f"{statistics.median(ratios):12.3f} ({min(ratios):.3f}..{max(ratios):.3f}) "
                  f"{statistics.median(r['samples'] for r in on.values()):8.0f} "
                  f"{statistics.median(r['lines'] for r in on.values()):7.0f}", flush=True)
    print("(CPU: process CPU seconds for the same work, median over the rounds; ratio: of the medians; "
          "samples and rows+1: per profiled run, the stored rows plus the index point)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
