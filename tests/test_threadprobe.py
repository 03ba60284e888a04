"""The thread sampler end to end: real Spark jobs (local-cluster, two executor
JVMs), the sampler that ./sparkscope up started for the test stack (4 Hz,
10 s periods), InfluxDB, and the live dashboard's panel queries as Grafana
12 sends them (sparkscope_testkit/grafana12.py):

- tasks reading from a slow FUSE mount (sparkscope_testkit/slow_fs.py) show task
  threads in D, waiting in FUSE's request_wait_answer, and (root) an
  off-CPU kernel-stack flame profile through FUSE;
- a CPU-bound phase shows task threads running, a Python UDF phase shows
  them waiting on their Python workers, which py-spy profiles;
- JVM service threads are not counted as task threads;
- an unprivileged sampler says kernel stacks need root, keeps sampling
  states, and the job runs as usual.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import run_spark_job
from sparkscope.dashboards import DASHBOARDS_DIR
from sparkscope.store.profiles import read_rows
from sparkscope.probes.threadprobe.readiness import why_no_kernel_stacks, why_no_py_spy
from sparkscope_testkit.sandbox import readable_source
from sparkscope_testkit.slow_mount import slow_fs_mounted

SLOW_MS = 150
PERIOD_S = 10  # the sampler's default, as up starts it
PHASE_S = 25  # each phase of cpu_then_python_job.py: longer than two periods
FILES, FILE_MB = 4, 4  # 64 KiB per read, SLOW_MS each: about 10 s per file and task

needs_fuse = pytest.mark.skipif(os.geteuid() != 0 or not Path("/dev/fuse").exists(),
                                reason="needs root and /dev/fuse for the slow FUSE mount")


def points(stack, query: str) -> list[dict]:
    return [dict(zip(s["columns"], row), **s.get("tags", {})) for s in stack.influx(query) for row in s["values"]]


def live_board() -> dict:
    import json
    return json.loads((DASHBOARDS_DIR / "spark-executors.json").read_text())


def live_panel(title: str) -> dict:
    for top in live_board()["panels"]:
        for panel in [top, *top.get("panels", [])]:
            if panel.get("title") == title:
                return panel
    raise AssertionError(f"no panel {title!r} on the live dashboard")


def labelled_rows(series: list[dict]) -> list[dict]:
    """One row per series of a table query grouped by tags, as the panel's
    merge transformation lays them out: the tags as columns, then the value."""
    return [{**(one.get("tags") or {}), "waited": row[1]} for one in series for row in one["values"]]


def run_panel(stack, title: str, app_id: str, start_ms: int, end_ms: int) -> dict[str, list[dict]]:
    """The panel's queries as Grafana 12 sends them on the live dashboard opened on this run: refId -> series."""
    dash = stack.open_dashboard(live_board(), start_ms, end_ms, url_vars={"applicationid": app_id})
    return dash.run_panel(live_panel(title))


def wait_for_periods(stack, app_id: str, until_ms: int) -> None:
    """The sampler writes a period at its end, and a last, shorter one when
    its JVM exits, stamped when it notices (within a tick): wait for one from
    the run's last second on. The JVMs exit before spark-submit returns: a
    CI run's last period was stamped 62 ms before the run's end, and waiting
    for one after the end waited for a period that never comes."""
    stack.wait_for(f"SELECT last(\"samples\") FROM \"sparkscope_threads\" WHERE \"applicationid\" = '{app_id}' "
                   f"AND time >= {until_ms - 1000}ms", lambda s: bool(s), deadline_s=3 * PERIOD_S)


# ------------------------------------------------------------------ tasks on a slow mount

@pytest.fixture(scope="module")
def slow_read_run(stack, tmp_path_factory):
    base = tmp_path_factory.mktemp("slow-read")
    under, mnt = base / "under", base / "mnt"
    under.mkdir(), mnt.mkdir()
    line = b"sparkscope reads this line slowly\n"
    for i in range(FILES):
        (under / f"part-{i}.txt").write_bytes(line * (FILE_MB * 2**20 // len(line)))
    with slow_fs_mounted(under, mnt, base / "fs.log", SLOW_MS):
        run = run_spark_job(stack, "slow_read_job.py", base, args=[str(mnt)])
    wait_for_periods(stack, run.app_id, run.ended_ms)
    return run


@needs_fuse
def test_task_threads_reading_a_slow_mount_are_counted_as_waiting_on_io_in_fuse(stack, slow_read_run):
    app = slow_read_run.app_id
    task = points(stack, f"SELECT max(\"io\") AS \"io\", max(\"on_cpu\") AS \"on_cpu\" FROM \"sparkscope_threads\" "
                         f"WHERE \"applicationid\" = '{app}' AND \"class\" = 'task' GROUP BY \"executorid\"")
    io = {p["executorid"]: p["io"] for p in task}
    # Each executor (one core) read for about 20 s: most of some 10 s period waiting on FUSE.
    assert io.get("0", 0) >= 0.5 and io.get("1", 0) >= 0.5, task
    waits = points(stack, f"SELECT sum(\"seconds\") AS \"s\" FROM \"sparkscope_thread_waits\" WHERE "
                          f"\"applicationid\" = '{app}' GROUP BY \"state\", \"wchan\"")
    top = max(waits, key=lambda p: p["s"])
    # FUSE waits interruptibly: state S, in request_wait_answer.
    assert top["wchan"] == "request_wait_answer" and top["s"] >= PERIOD_S, waits


@needs_fuse
def test_the_live_panels_show_the_fuse_wait(stack, slow_read_run):
    window = (slow_read_run.started_ms - 30_000, slow_read_run.ended_ms + 30_000)
    title = "Task threads: on CPU vs waiting"
    states = run_panel(stack, title, slow_read_run.app_id, *window)
    io_ref = next(t["refId"] for t in live_panel(title)["targets"] if t["alias"].startswith("I/O"))
    drawn = [v for one in states[io_ref] for row in one["values"] for v in row[1:] if v is not None]
    assert drawn and max(drawn) >= 0.5, states[io_ref][:5]
    table = labelled_rows(run_panel(stack, "Task threads: top wait channels", slow_read_run.app_id, *window)["A"])
    top = max(table, key=lambda row: row["waited"])
    assert top["wchan"] == "request_wait_answer" and top["waited"] >= PERIOD_S, table


@needs_fuse
@pytest.mark.skipif(why_no_kernel_stacks() is not None, reason=f"no kernel stacks here: {why_no_kernel_stacks()}")
def test_kernel_stacks_of_the_waiting_task_threads_form_an_offcpu_flame_profile_through_fuse(stack, slow_read_run):
    app = slow_read_run.app_id
    profiles = points(stack, f"SELECT \"profile\", \"executorid\", \"top\", \"samples\" FROM \"sparkscope_profiles\" "
                             f"WHERE \"applicationid\" = '{app}' AND \"kind\" = 'offcpu'")
    assert profiles, "no offcpu profile for the run"
    fuse_profiles = []
    for p in profiles:
        rows = read_rows(stack.settings.influx_reader, stack.settings.database, app, p["profile"])
        labels = [r.label for r in rows]
        if "request_wait_answer" in labels:
            fuse_profiles.append(p)
            assert any(label.startswith("fuse_") for label in labels), labels
            assert any(label.startswith(("D: ", "S: ")) for label in labels), labels
            assert rows[0].level == 0 and rows[0].value == sum(r.self_value for r in rows)
    assert fuse_profiles, [p["top"] for p in profiles]
    assert any(p["top"] == "request_wait_answer" for p in fuse_profiles), fuse_profiles


# ------------------------------------------------------------------ CPU, then Python

STRICT_LINE = re.compile(r"^[a-z_]+(,[a-z_]+=(?:[^,= \\]|\\[,= \\])+)* "
                         r"[a-z_]+=(?:-?[0-9.e+-]+i?|\"(?:[^\"\\]|\\.)*\")(,[a-z_]+=(?:-?[0-9.e+-]+i?|\"(?:[^\"\\]|\\.)*\"))*"
                         r" [0-9]{19}$")


class StrictSink(BaseHTTPRequestHandler):
    """Telegraf's /write, stricter: a batch with any line that is not plain
    line protocol (measurement, tags, typed fields, ns time) is refused whole."""
    lines: list[str] = []
    refused: list[str] = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        bad = [line for line in body.split("\n") if not STRICT_LINE.match(line)]
        if bad:
            StrictSink.refused += bad
            self.send_response(400)
        else:
            StrictSink.lines += body.split("\n")
            self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def cpu_run(stack, tmp_path_factory):
    """The job, with a second sampler beside the stack's one: as an unprivileged
    user (nobody), sending to a strict sink."""
    base = tmp_path_factory.mktemp("cpu-then-python")
    server = ThreadingHTTPServer(("127.0.0.1", 0), StrictSink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    unprivileged = None
    if os.geteuid() == 0 and shutil.which("setpriv") and Path("/usr/bin/python3").exists():
        unprivileged = subprocess.Popen(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-m",
             "sparkscope.probes.threadprobe", "--url", f"http://127.0.0.1:{server.server_address[1]}", "--period", "5"],
            env=dict(os.environ, PYTHONPATH=str(readable_source())), cwd="/", stdout=subprocess.DEVNULL,
            stderr=open(base / "unprivileged.log", "w"))
    try:
        run = run_spark_job(stack, "cpu_then_python_job.py", base, args=[str(PHASE_S)])
    finally:
        if unprivileged:
            unprivileged.terminate()
            unprivileged.wait(timeout=30)
        server.shutdown()
    wait_for_periods(stack, run.app_id, run.ended_ms)
    marks = {k: int(v) for k, v in re.findall(r"^(\w+_(?:START|END)) (\d+)$", run.stdout, re.M)}
    return run, marks, base / "unprivileged.log" if unprivileged else None


def phase_means(stack, app: str, start_ms: int, end_ms: int) -> dict[str, dict[str, float]]:
    """Per executor, the task threads' mean per state over the periods wholly inside the phase."""
    got = points(stack, f"SELECT mean(\"running\") AS \"running\", mean(\"sleeping\") AS \"sleeping\", "
                        f"mean(\"disk\") AS \"disk\" FROM \"sparkscope_threads\" WHERE \"applicationid\" = '{app}' "
                        f"AND \"class\" = 'task' AND \"executorid\" != 'driver' "
                        f"AND time >= {start_ms + PERIOD_S * 1000}ms AND time <= {end_ms}ms GROUP BY \"executorid\"")
    return {p["executorid"]: p for p in got}


def test_task_threads_of_a_cpu_bound_phase_run_and_those_of_a_python_phase_wait(stack, cpu_run):
    run, marks, _ = cpu_run
    jvm = phase_means(stack, run.app_id, marks["JVM_START"], marks["JVM_END"])
    python = phase_means(stack, run.app_id, marks["PYTHON_START"], marks["PYTHON_END"])
    assert set(jvm) == set(python) == {"0", "1"}, (jvm, python)
    for executor in ("0", "1"):
        # One core each: its task thread runs (on a CPU or in the run queue) while SQL hashes, and
        # waits little; the rest of the time no task runs (the driver plans the next query).
        assert jvm[executor]["running"] > jvm[executor]["sleeping"] + jvm[executor]["disk"], jvm
        assert jvm[executor]["running"] >= 0.3, jvm
        # While Python computes, the task thread waits on its worker's socket.
        assert python[executor]["running"] < jvm[executor]["running"] / 2, (jvm, python)
        assert python[executor]["sleeping"] >= 0.5, python


def test_jvm_service_threads_are_not_counted_as_task_threads(stack, cpu_run):
    run, _, _ = cpu_run
    got = points(stack, f"SELECT max(\"threads\") AS \"threads\" FROM \"sparkscope_threads\" WHERE "
                        f"\"applicationid\" = '{run.app_id}' GROUP BY \"executorid\", \"class\"")
    threads = {(p["executorid"], p["class"]): p["threads"] for p in got}
    for executor in ("0", "1"):
        # A one-core executor's task pool: a thread or two; RPC, shuffle, GC and JIT threads: dozens.
        assert 1 <= threads[executor, "task"] <= 3, threads
        assert threads[executor, "other"] >= 20 and threads[executor, "gc"] >= 1 and threads[executor, "jit"] >= 1
    assert threads["driver", "task"] == 0  # local-cluster: the driver runs no task


@pytest.mark.skipif(why_no_py_spy() is not None, reason=f"no py-spy here: {why_no_py_spy()}")
def test_python_workers_are_profiled_by_py_spy_per_executor(stack, cpu_run):
    run, _, _ = cpu_run
    profiles = points(stack, f"SELECT \"profile\", \"executorid\", \"samples\" FROM \"sparkscope_profiles\" "
                             f"WHERE \"applicationid\" = '{run.app_id}' AND \"kind\" = 'python'")
    assert {p["executorid"] for p in profiles} >= {"0", "1"}, profiles
    labels = {r.label for p in profiles
              for r in read_rows(stack.settings.influx_reader, stack.settings.database, run.app_id, p["profile"])}
    assert any(label.startswith("burn_in_python ") for label in labels), sorted(labels)[:30]


def test_an_unprivileged_sampler_says_kernel_stacks_need_root_and_still_samples_states(cpu_run):
    run, _, log = cpu_run
    if log is None:
        pytest.skip("needs root, setpriv and /usr/bin/python3 to run a sampler as nobody")
    said = log.read_text()
    assert "kernel stacks off: reading /proc/<pid>/task/<tid>/stack needs root" in said, said
    assert not StrictSink.refused, StrictSink.refused[:3]
    mine = [line for line in StrictSink.lines if f"applicationid={run.app_id}," in line]
    tasks = [line for line in mine if line.startswith("sparkscope_threads,") and ",class=task " in line]
    assert tasks and any(not re.search(r" running=0\.0,", line) for line in tasks), mine[:5]
    assert not any(line.startswith("sparkscope_flame,") for line in StrictSink.lines)
