#!/usr/bin/env python3
"""What the thread sampler costs: its own CPU (utime+stime from /proc) while
it samples 1, 2 and 4 executor-like JVMs with N threads each, at its default
rate, printed as % of one core and per thread sample.

The JVMs are real (Java 17, GC and JIT threads included), started with the
command line of a Spark executor (`...CoarseGrainedExecutorBackend
--executor-id i --app-id bench-...`) so the sampler finds them as it finds
executors. Each runs --threads threads named as Spark names them: a few
task threads ("Executor task launch worker") that alternate short CPU bursts
and sleeps (so they are seen running, sleeping and off CPU with kernel
stacks to read), and service threads parked as most of an executor's are.
The sampler runs as ./sparkscope up runs it (python -m sparkscope.probes.threadprobe,
4 Hz, 10 s period), sending to a local HTTP sink standing in for Telegraf,
with and without kernel stacks.

    nice -n 5 .venv/bin/python bench/threadprobe.py --seconds 30
    nice -n 5 .venv/bin/python bench/threadprobe.py --py-spy-only --seconds 20

py-spy (PySpark workers, root only) is measured apart: its own CPU while
it samples one busy Python process as the sampler runs it, and the work that
process did with and without it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from overhead import process_cpu_seconds
from sparkscope.process import start_group, stop_group, wait_until
from sparkscope.probes.threadprobe.jvms import Discovery
from sparkscope.probes.threadprobe.sampler import DEFAULT_RATE_HZ, STARTED

ROOT = Path(__file__).resolve().parents[1]

TASK_THREADS = 4
FARM = """
public class ThreadFarm {
    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(System.getenv("FARM_THREADS"));
        for (int i = 0; i < threads; i++) {
            final boolean task = i < %d;
            Thread t = new Thread(() -> {
                long x = 0;
                while (true) {
                    if (task) { long end = System.nanoTime() + 1_000_000L; while (System.nanoTime() < end) x += end %% 7; }
                    try { Thread.sleep(task ? 49 : 3_600_000); } catch (InterruptedException e) { return; }
                }
            }, task ? "Executor task launch worker-" + i : "service-" + i);
            t.setDaemon(true);
            t.start();
        }
        Thread.sleep(Long.MAX_VALUE);
    }
}
""" % TASK_THREADS


class Sink(BaseHTTPRequestHandler):
    lines = 0
    own: list[str] = []  # the sampler's reports of its own cost

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        Sink.lines += body.count(b"\n") + 1
        Sink.own += [line for line in body.decode().split("\n") if line.startswith("sparkscope_threadprobe ")]
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def thread_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def start_farms(classes: Path, executors: int, threads: int) -> list[subprocess.Popen]:
    farms = []
    for i in range(executors):
        farms.append(subprocess.Popen(
            ["java", "-Xmx64m", "-cp", str(classes), "ThreadFarm",
             "org.apache.spark.executor.CoarseGrainedExecutorBackend", "--executor-id", str(i), "--app-id",
             "bench-threadprobe"], env=dict(os.environ, FARM_THREADS=str(threads)),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    # Started: every farm shows its threads (JVM ones come first).
    wait_until(lambda: all(thread_count(f.pid) >= threads for f in farms), 60)
    return farms


def spark_threads() -> tuple[int, int]:
    """JVMs and threads the sampler samples now: ours, and any other Spark
    JVM on this shared host (other people's jobs), found as it finds them."""
    jvms = Discovery().scan()
    return len(jvms), sum(len(os.listdir(f"/proc/{j.pid}/task")) for j in jvms if Path(f"/proc/{j.pid}").exists())


def measure(url: str, seconds: int, kernel_stacks: bool, log: Path) -> tuple[float, float]:
    """The sampler's CPU over `seconds` after a warm-up: (% of one core, samples taken)."""
    size = log.stat().st_size if log.exists() else 0
    flag = "--kernel-stacks" if kernel_stacks else "--no-kernel-stacks"
    sampler = start_group([sys.executable, "-m", "sparkscope.probes.threadprobe", "--url", url, flag, "--no-python"], log,
                          env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))
    try:
        if not wait_until(lambda: STARTED in log.read_text()[size:] or sampler.poll() is not None, 30):
            raise SystemExit(f"sampler did not start; see {log}")
        time.sleep(5)  # past discovery and the first command-line reads
        c0, t0 = process_cpu_seconds([sampler.pid]), time.monotonic()
        time.sleep(seconds)
        c1, t1 = process_cpu_seconds([sampler.pid]), time.monotonic()
    finally:
        stop_group(sampler.pid, proc=sampler)
    return 100 * (c1 - c0) / (t1 - t0), DEFAULT_RATE_HZ * (t1 - t0)


def py_spy_cost(seconds: int) -> None:
    """py-spy as the sampler runs it on a PySpark worker (--nonblocking, raw
    output, PY_SPY_RATE_HZ) against a Python process that computes the whole
    time: py-spy's own CPU from its rusage, and the work the target did with
    and without it (loop iterations per second of its CPU)."""
    from sparkscope.probes.threadprobe.python_workers import PY_SPY_RATE_HZ
    from sparkscope.probes.threadprobe.readiness import py_spy_path, why_no_py_spy
    reason = why_no_py_spy()
    if reason:
        print(f"py-spy not measured: {reason}")
        return
    spin = ("import os, time\nend = time.time() + float(os.environ['SPIN_S'])\nn = 0\n"
            "while time.time() < end:\n    n += sum(i * i for i in range(1000))\n"
            "t = os.times()\nprint(n / (t.user + t.system))\n")

    def target(with_spy: bool) -> tuple[float, float]:
        proc = subprocess.Popen([sys.executable, "-c", spin], stdout=subprocess.PIPE, text=True,
                                env=dict(os.environ, SPIN_S=str(seconds + 2)))
        spy_cpu = 0.0
        if with_spy:
            time.sleep(1)
            spy = subprocess.Popen([py_spy_path(), "record", "--pid", str(proc.pid), "--nonblocking", "--format",
                                    "raw", "--rate", str(PY_SPY_RATE_HZ), "--duration", str(seconds), "--output",
                                    os.devnull], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            _, _, usage = os.wait4(spy.pid, 0)
            spy_cpu = 100 * (usage.ru_utime + usage.ru_stime) / seconds
        work = float(proc.communicate()[0])
        return work, spy_cpu

    rows = [(False, *target(False)), (True, *target(True)), (True, *target(True)), (False, *target(False))]
    off = [w for on, w, _ in rows if not on]
    on = [w for on, w, _ in rows if on]
    print(f"\npy-spy at {PY_SPY_RATE_HZ} Hz on one busy Python process, {seconds} s runs, ABBA: py-spy CPU "
          f"{', '.join(f'{c:.2f} %' for o, _, c in rows if o)} of one core; the target's work per CPU-second "
          f"with/without {sum(on) / len(on) / (sum(off) / len(off)):.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--executors", default="1,2,4")
    parser.add_argument("--threads", default="100,200", help="threads started per JVM (the JVM adds its own)")
    parser.add_argument("--py-spy-only", action="store_true", help="measure py-spy on a Python process alone")
    args = parser.parse_args()
    if args.py_spy_only:
        py_spy_cost(args.seconds)
        return 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    work = Path(tempfile.mkdtemp(prefix="threadprobe-bench-"))
    (work / "ThreadFarm.java").write_text(FARM)
    subprocess.run(["javac", "-d", str(work), str(work / "ThreadFarm.java")], check=True)
    cores = os.cpu_count() or 1
    print(f"sampler at {DEFAULT_RATE_HZ:g} Hz, {args.seconds} s per run, {cores} cores, "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    print("| bench JVMs | threads per JVM | Spark JVMs on the host | threads sampled | kernel stacks | "
          "sampler CPU, % of one core | % of all cores | µs per thread sample |")
    print("|---:|---:|---:|---:|---|---:|---:|---:|")
    try:
        for n_threads in [int(t) for t in args.threads.split(",")]:
            for executors in [int(e) for e in args.executors.split(",")]:
                farms = start_farms(work, executors, n_threads)
                try:
                    for stacks in (False, True):
                        jvms, before = spark_threads()
                        pct, samples = measure(url, args.seconds, stacks, work / "sampler.log")
                        total = (before + spark_threads()[1]) / 2
                        per = pct / 100 * args.seconds / (samples * total) * 1e6
                        print(f"| {executors} | {thread_count(farms[0].pid)} | {jvms} | {total:.0f} | "
                              f"{'on' if stacks else 'off'} | {pct:.2f} % | {pct / cores:.2f} % | {per:.1f} |",
                              flush=True)
                finally:
                    for f in farms:
                        f.kill()
                        f.wait()
    finally:
        server.shutdown()
        for path in work.iterdir():
            path.unlink()
        work.rmdir()
    py_spy_cost(args.seconds)
    print(f"\n{Sink.lines} lines received by the sink; the sampler's own last reports:")
    for line in Sink.own[-3:]:
        print("  " + line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
