#!/usr/bin/env python3
"""What a Spark application feels when its Graphite endpoint (Telegraf) is
down or stalled: the same short jobs against three endpoints, one run each.

- reading: a listener that reads and discards (the healthy case);
- refused: a loopback port where nothing listens (Telegraf down);
- stalled: a listener that accepts connections and never reads, with a 4 KB
  receive buffer (Telegraf hung, or saturated and not reading);
- blackholed: an address whose packets go nowhere (--blackhole, default
  10.255.255.1: routed, never answered), as a firewall that drops rather
  than refuses: the sink's connect() waits for the kernel's SYN retries.

Spark 3.5 ships Dropwizard metrics 4.2.19, whose GraphiteReporter opens a
new TCP connection for every report and closes it after the flush, with no
connect or write timeout; SparkContext.stop() and Executor.stop() send one
last report on the calling thread.

The job (bench/jobs/sink_stall_job.py) runs `--rounds` small jobs in
local-cluster[2,1,1024] with spark-conf/spark-defaults.conf's sink at a 1 s
period, then stops the SparkContext. Printed per endpoint: median job time,
the time spark.stop() took, whether spark-submit exited within --timeout,
and the sink's warnings in the driver log.

    .venv/bin/python bench/sink_stall.py --rounds 15
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from sparkscope.spark.conf import read_properties, with_endpoint
from sparkscope.spark.submit import spark_env, submit_argv
from sparkscope_testkit.sandbox import free_port

ROOT = Path(__file__).resolve().parents[1]

JOB = ROOT / "bench" / "jobs" / "sink_stall_job.py"


class Listener:
    """A Graphite endpoint on loopback: reads and discards, or never reads."""

    def __init__(self, reads: bool):
        self.sock = socket.socket()
        if not reads:  # set before listen: accepted sockets inherit it
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.reads, self.held, self.received = reads, [], 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)
            if self.reads:
                threading.Thread(target=self._drain, args=(conn,), daemon=True).start()

    def _drain(self, conn: socket.socket) -> None:
        while True:
            try:
                data = conn.recv(65536)
            except OSError:
                return
            if not data:
                return
            self.received += len(data)

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


def unsent_bytes(port: int) -> int:
    """Bytes the sinks' sockets to this port hold unsent (Send-Q, summed): at
    the socket's buffer size, the sink's next write blocks."""
    out = subprocess.run(["ss", "-tnH", "state", "established", f"( dport = :{port} )"], capture_output=True,
                         text=True).stdout
    return sum(int(line.split()[1]) for line in out.splitlines() if line.split()[1:2] and line.split()[1].isdigit())


def run(host: str, port: int, rounds: int, timeout_s: float, log: Path) -> dict:
    props = with_endpoint(read_properties(ROOT / "spark-conf" / "spark-defaults.conf"),
                          graphite_host=host, graphite_port=port, period_s=1)
    argv = submit_argv(JOB, "local-cluster[2,1,1024]", props, args=[str(rounds)])
    began = time.monotonic()
    peak_unsent = [0]
    done = threading.Event()

    def watch() -> None:
        while not done.wait(1.0):
            peak_unsent[0] = max(peak_unsent[0], unsent_bytes(port))

    threading.Thread(target=watch, daemon=True).start()
    with open(log, "w") as err:
        proc = subprocess.Popen(argv, env=spark_env(log), stdout=subprocess.PIPE, stderr=err, text=True,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout_s)
            exited = True
        except subprocess.TimeoutExpired:
            # Only the process group this run started.
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            exited = False
    done.set()
    text = log.read_text(errors="replace")
    warnings = re.findall(r"WARN .*(?:Graphite|graphite).*", text)
    jobs = [float(x) for x in re.findall(r"^JOB_SECONDS (\S+)$", out, re.M)]
    stop = re.search(r"^STOP_SECONDS (\S+)$", out, re.M)
    return {"wall": time.monotonic() - began, "exited": exited, "jobs": jobs,
            "stop": float(stop.group(1)) if stop else None, "warnings": len(warnings),
            "warning": warnings[0][:200] if warnings else "", "unsent": peak_unsent[0]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds before spark-submit is killed")
    parser.add_argument("--only", default="reading,refused,stalled,blackholed", help="comma list of endpoints")
    parser.add_argument("--blackhole", default="10.255.255.1", help="an address that never answers")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sparkscope-sink-stall-") as tmp:
        for name in args.only.split(","):
            listener = Listener(reads=name == "reading") if name in ("reading", "stalled") else None
            host = args.blackhole if name == "blackholed" else "127.0.0.1"
            port = listener.port if listener else (2003 if name == "blackholed" else free_port())
            r = run(host, port, args.rounds, args.timeout, Path(tmp) / f"{name}.log")
            received = f"{listener.received:,} bytes read" if listener and listener.reads else ""
            if listener:
                listener.close()
            median = statistics.median(r["jobs"]) if r["jobs"] else float("nan")
            stop = f"{r['stop']:.1f} s" if r["stop"] is not None else "never returned"
            print(f"{name:8} jobs done {len(r['jobs'])}/{args.rounds}  median job {median:.2f} s  "
                  f"spark.stop() {stop}  spark-submit {'exited' if r['exited'] else 'KILLED at timeout'} "
                  f"after {r['wall']:.0f} s  sink warnings {r['warnings']}  peak unsent {r['unsent']:,} bytes  {received}",
                  flush=True)
            if r["warning"]:
                print(f"         first warning: {r['warning']}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
