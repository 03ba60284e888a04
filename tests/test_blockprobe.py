"""The block I/O probe's own logic: bpftrace's JSON to line protocol, and
whether (and why not) it can run. Its numbers against the kernel's are in
test_disks.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from sparkscope.probes.blockprobe.probe import MAX_OUTLIERS_PER_PERIOD, Histogram, Reports, direction
from sparkscope.probes.blockprobe.readiness import CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN, may_load_bpf
from sparkscope.process import wait_until
from sparkscope.stack import native
from sparkscope.stack.native import NativeBackend
from sparkscope_testkit.sandbox import isolated_settings, readable_source

DEV_VDA = 254 << 20  # dev_t of 254:0 as the block tracepoints give it


def test_rwbs_flags_fold_to_read_write_discard_other():
    assert [direction(f) for f in ("R", "RA", "RS", "W", "WS", "FWS", "WFS", "DS", "N", "FN")] == [
        "read", "read", "read", "write", "write", "write", "write", "discard", "other", "other"]


def test_quantiles_fall_inside_their_log2_bucket_and_never_above_the_max():
    hist = Histogram(max_us=900)
    hist.add(64, 98)  # 98 I/Os in [64, 128) us
    hist.add(512, 2)  # 2 in [512, 1024)
    assert 64 <= hist.quantile_us(0.5) < 128
    assert 512 <= hist.quantile_us(0.99) <= 900
    assert hist.quantile_us(1.0) == 900
    assert hist.count == 100


def bt(kind: str, data) -> str:
    return json.dumps({"type": kind, "data": data})


def test_a_period_becomes_percentiles_buckets_and_outliers_per_device_and_direction():
    reports = Reports(clock_offset_ns=1_000, names={DEV_VDA: "vda"})
    lines = [bt("printf", f"outlier {DEV_VDA} RA 150000 4096 42 5000 java worker\n"),
             bt("hist", {"@hist": {f"{DEV_VDA},R": [{"min": 128, "max": 255, "count": 3}],
                                   f"{DEV_VDA},RA": [{"min": 131072, "max": 262143, "count": 1}],
                                   f"{DEV_VDA},WS": [{"min": 16, "max": 31, "count": 5}]}}),
             bt("map", {"@max": {f"{DEV_VDA},R": 200, f"{DEV_VDA},RA": 150000, f"{DEV_VDA},WS": 20}}),
             bt("map", {"@sum": {f"{DEV_VDA},R": 500, f"{DEV_VDA},RA": 150000, f"{DEV_VDA},WS": 100}}),
             bt("printf", "end 9000\n")]
    out = [line for text in lines for line in reports.feed(text)]
    assert reports.period_closed
    outlier = out[0]
    assert outlier.startswith("block_outlier,device=vda,direction=read latency_ms=150.0,bytes=4096i,pid=42i,")
    assert 'comm="java worker"' in outlier and outlier.endswith(" 6000")  # monotonic 5000 + offset 1000
    read = next(line for line in out if line.startswith("block_latency,device=vda,direction=read "))
    assert "count=4i" in read and "max_ms=150.0" in read and read.endswith(" 10000")
    assert "mean_ms=37.625" in read  # (500 + 150000) us / 4
    buckets = sorted(line.split()[0] for line in out if line.startswith("block_latency_hist"))
    assert buckets == ["block_latency_hist,device=vda,direction=read,le_us=256",
                       "block_latency_hist,device=vda,direction=read,le_us=262144",
                       "block_latency_hist,device=vda,direction=write,le_us=32"]
    # The next period starts empty.
    assert reports.feed(bt("printf", "end 19000\n")) == []


def test_loading_ebpf_needs_sys_admin_or_both_bpf_and_perfmon():
    assert may_load_bpf(1 << CAP_SYS_ADMIN)
    assert may_load_bpf(1 << CAP_BPF | 1 << CAP_PERFMON)
    assert not may_load_bpf(1 << CAP_BPF)
    assert not may_load_bpf(0)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None or not Path("/usr/bin/python3").exists(),
                    reason="needs root, setpriv and the system python3 to run the check as an unprivileged user")
def test_an_unprivileged_user_is_told_to_run_as_root_or_grant_cap_bpf():
    # The system's Python and a readable copy of the package: the venv and the
    # checkout may sit where the unprivileged user cannot enter.
    done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c",
                           "from sparkscope.probes.blockprobe.readiness import why_not_traceable; print(why_not_traceable())"],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(readable_source())),
                          cwd="/")
    assert done.returncode == 0, done.stderr
    assert "run as root" in done.stdout and "CAP_BPF" in done.stdout


def test_up_says_why_the_probe_is_not_started(tmp_path, monkeypatch):
    monkeypatch.setattr(native, "why_not_traceable", lambda mount=False: "the kernel has no BTF (test)")
    said: list[str] = []
    assert NativeBackend(isolated_settings(tmp_path)).start_blockprobe(said.append) is False
    assert said == ["blockprobe not started (disk latency heatmap, percentiles and outliers stay empty): "
                    "the kernel has no BTF (test)"]


def test_up_leaves_the_probe_off_when_the_user_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("BLOCKPROBE_ENABLED", "false")
    monkeypatch.setattr(native, "why_not_traceable", lambda mount=False: pytest.fail("must not even check"))
    said: list[str] = []
    assert NativeBackend(isolated_settings(tmp_path)).start_blockprobe(said.append) is False
    assert said == ["blockprobe off (BLOCKPROBE_ENABLED=false)"]


def test_status_names_the_probe_under_telegraf(stack):
    """The session stack started it here when eBPF is allowed; either way status says which."""
    rows = {row.name: row for row in NativeBackend(stack.settings).status()}
    running = native.PidFile(stack.settings.state_dir, native.BLOCKPROBE).running_pid()
    expected = f"blockprobe: pid {running}," if running else "blockprobe: not running"
    assert expected in rows["telegraf"].detail
    if native.why_not_traceable() is None:
        assert running, "eBPF is allowed here, yet up did not start the probe"


def test_any_line_bpftrace_prints_is_skipped_and_counted_never_fatal():
    reports = Reports(clock_offset_ns=0, names={DEV_VDA: "vda"})
    garbage = ["", "not json", "[1, 2]", "42", bt("printf", 7), bt("printf", "end soon"),
               bt("printf", f"outlier {DEV_VDA} R x 4096 1 5 cmd"), bt("hist", {"@hist": {f"{DEV_VDA},R": [{}]}}),
               bt("map", {"@max": {"nodevice": 3}}), '{"type": "hist", "data": null}', "\ufffd\ufffd broken"]
    for line in garbage:
        assert reports.feed(line) == []
    assert reports.unreadable >= 8
    # What follows a bad line is read as usual.
    reports.feed(bt("hist", {"@hist": {f"{DEV_VDA},R": [{"min": 128, "max": 255, "count": 2}]}}))
    out = reports.feed(bt("printf", "end 9000\n"))
    assert any(line.startswith("block_latency,device=vda,direction=read ") for line in out), out


def test_a_flood_of_outliers_is_bounded_per_period_and_the_rest_counted():
    reports = Reports(clock_offset_ns=0, names={DEV_VDA: "vda"})
    flood = MAX_OUTLIERS_PER_PERIOD + 250
    written = [line for i in range(flood)
               for line in reports.feed(bt("printf", f"outlier {DEV_VDA} R 150000 4096 42 {i} dd\n"))]
    assert len(written) == MAX_OUTLIERS_PER_PERIOD
    closed = reports.feed(bt("printf", "end 9000\n"))
    assert "block_outlier_dropped count=250i 9000" in closed, closed
    # The next period may write its own outliers again.
    assert reports.feed(bt("printf", f"outlier {DEV_VDA} R 150000 4096 42 1 dd\n"))


class Collector(BaseHTTPRequestHandler):
    bodies: list[str] = []

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        Collector.bodies.append(self.rfile.read(int(self.headers["Content-Length"])).decode())
        self.send_response(204)
        self.end_headers()


def test_bpftrace_that_dies_is_started_again_and_undecodable_output_does_not_stop_the_probe(tmp_path):
    """A fake bpftrace: its first run prints bytes that are not UTF-8, a
    period, and exits 1; the second prints a period and stays. Both periods
    reach the listener, and SIGTERM stops the probe at once."""
    runs = tmp_path / "runs"
    period = (bt("hist", {"@hist": {f"{DEV_VDA},R": [{"min": 128, "max": 255, "count": 1}]}}) + "\n"
              + bt("printf", "end 1000\n"))
    script = tmp_path / "bpftrace"
    script.write_text("#!/bin/sh\n"
                      f"echo run >> {runs}\n"
                      "printf '\\377\\376 not text\\n'\n"
                      f"cat <<'EOF'\n{period}\nEOF\n"
                      f"[ $(wc -l < {runs}) -ge 2 ] && exec sleep 300\n"
                      "exit 1\n")
    script.chmod(0o755)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Collector.bodies = []
    code = ("import sys; from sparkscope.probes.blockprobe.probe import run; "
            f"sys.exit(run('http://127.0.0.1:{server.server_address[1]}', 1, 100, backoff_s=(0.2,)))")
    env = dict(os.environ, PATH=f"{tmp_path}:{os.environ['PATH']}")
    probe = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: len(Collector.bodies) >= 2, 20), (Collector.bodies, runs.read_text())
        assert runs.read_text().count("run") == 2 and probe.poll() is None
        assert all("block_latency,device=" in body for body in Collector.bodies[:2]), Collector.bodies
    finally:
        probe.terminate()
        assert probe.wait(timeout=10) is not None
        server.shutdown()
    assert "starting it again" in probe.stderr.read()
