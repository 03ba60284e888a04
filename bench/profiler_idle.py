#!/usr/bin/env python3
"""What the profiler plugin costs while it waits to be asked: an application
that does nothing for --seconds (bench/jobs/idle_job.py, local-cluster with
two executors, sparkscope's shipped settings) runs alternately without and
with spark.plugins=dev.sparkscope.annotator.ProfilerPlugin (ABBA), and the
CPU time of the driver and executor JVMs over the idle window is compared.
Idle, a JVM's own CPU is small and steady (GC threads, heartbeats, the
metrics sink), so a per-second cost of the plugin shows plainly here where
query times on a shared machine hide it.

    .venv/bin/python bench/profiler_idle.py --seconds 60 --rounds 2
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from sparkscope.provision.annotator_jar import ensure_annotator_jar
from sparkscope.spark.conf import LISTENER_PLUGIN_CLASS, PROFILER_PLUGIN_CLASS, annotator_properties, sparkscope_properties
from sparkscope.spark.submit import spark_env, submit_argv
from sparkscope_testkit.sandbox import throwaway_stack
from overhead import process_cpu_seconds  # bench/overhead.py, beside this file

ROOT = Path(__file__).resolve().parents[1]


def jvm_pids(app_id: str, driver_pid: int) -> list[int]:
    """The driver (spark-submit execs into its JVM, so it is the pid we
    started) and the executors, whose command line names app_id."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"java" not in cmd[0]:
            continue
        if app_id.encode() in cmd or int(proc.name) == driver_pid:
            pids.append(int(proc.name))
    return pids


def one_run(conf: dict[str, str], seconds: float, log: Path) -> tuple[float, int]:
    argv = submit_argv(ROOT / "bench" / "jobs" / "idle_job.py", "local-cluster[2,1,1024]", conf, [str(seconds)])
    with open(log, "w") as err:
        proc = subprocess.Popen(argv, env=spark_env(log), stdout=subprocess.PIPE, stderr=err, text=True)
        app_id, pids, before = "", [], 0.0
        for line in proc.stdout:
            if line.startswith("APP_ID"):
                app_id = line.split()[1]
            elif line.startswith("IDLE_START"):
                pids = jvm_pids(app_id, proc.pid)
                before = process_cpu_seconds(pids)
            elif line.startswith("IDLE_END"):
                used = process_cpu_seconds(pids) - before
        proc.wait()
    return used, len(pids)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    jar = ensure_annotator_jar(ROOT)
    results: dict[str, list[float]] = {"without": [], "with": []}
    with tempfile.TemporaryDirectory(prefix="sparkscope-bench-idle-") as tmp, \
            throwaway_stack(Path(tmp) / "stack", only=("influxdb", "telegraf")) as settings:
        base = {**sparkscope_properties(settings), **annotator_properties(settings, jar)}
        for n in range(1, args.rounds + 1):
            for arm in (("without", "with") if n % 2 else ("with", "without")):
                conf = dict(base)
                # The listener in both arms; the profiler's plugin in one.
                conf["spark.plugins"] = LISTENER_PLUGIN_CLASS
                if arm == "with":
                    conf["spark.plugins"] += f",{PROFILER_PLUGIN_CLASS}"
                used, jvms = one_run(conf, args.seconds, Path(tmp) / f"{arm}{n}.log")
                results[arm].append(used / args.seconds)
                print(f"round {n} {arm:7} plugin: {jvms} JVMs used {used:.2f} CPU s in {args.seconds:.0f} s idle "
                      f"({100 * used / args.seconds:.2f} % of a core)", flush=True)
                time.sleep(2)
    w, p = statistics.median(results["without"]), statistics.median(results["with"])
    print(f"median: without {100 * w:.2f} %, with {100 * p:.2f} % of a core; the plugin idle: "
          f"{100 * (p - w):+.2f} % of a core for the driver and two executors")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
