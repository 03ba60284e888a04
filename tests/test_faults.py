"""The stack survives its own parts failing while Spark runs: nothing is lost
through an InfluxDB restart, the sink reconnects after a Telegraf restart,
garbage on the Graphite port changes nothing, and a full or read-only disk under InfluxDB is reported by
`sparkscope status` while Spark runs on. Each test uses its own stack,
bounded in time."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import random
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from sparkscope import cli
from sparkscope.ingest_guard import SPARK_OFF_ZEROS
from sparkscope.process import quiet, wait_until
from sparkscope.spark.conf import sparkscope_properties
from sparkscope.spark.submit import spark_env, submit_argv
from sparkscope.store import influx
from sparkscope.stack import StackError
from sparkscope.stack.native import NativeBackend, PidFile

from conftest import JOBS, SINK_PERIOD_S, Stack, run_spark_job
from sparkscope_testkit.graphite_tap import GraphiteTap
from sparkscope_testkit.sandbox import throwaway_stack

OUTAGE_S = 20.0


@pytest.fixture(scope="module")
def fault_stack(tmp_path_factory):
    # Every line Spark sends is kept: the faults are judged by sent == stored, line for line.
    with throwaway_stack(tmp_path_factory.mktemp("fault-state"), unread_metrics="pass") as settings:
        yield Stack(settings)


class SparkProcess:
    """spark-submit of a job in local-cluster mode, in its own process group."""

    def __init__(self, stack: Stack, graphite_port: int, seconds: float, log: Path):
        props = sparkscope_properties(stack.settings, period_s=SINK_PERIOD_S)
        props["spark.metrics.conf.*.sink.graphite.port"] = str(graphite_port)
        argv = submit_argv(JOBS / "steady_job.py", "local-cluster[2,1,1024]", props, [str(seconds)])
        self.log = log
        self.proc = subprocess.Popen(argv, env=spark_env(log), stdout=subprocess.PIPE, stderr=open(log, "w"),
                                     text=True, start_new_session=True)
        first = self.proc.stdout.readline()
        assert first.startswith("APP_ID "), f"no app id from spark-submit; log {log}"
        self.app_id = first.split()[1]

    def wait(self, timeout_s: float) -> int:
        try:
            out, _ = self.proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            raise
        assert self.proc.returncode == 0, f"Spark job failed ({self.proc.returncode}); log {self.log}"
        return self.proc.returncode


def spark_points_query(app_id: str) -> str:
    """Points of Spark's Graphite metrics (they carry a namespace tag), not the
    stack's own thread sampler's, which are tagged with the same application."""
    return (f'SELECT count("value") FROM /.*/ WHERE "applicationid" = \'{app_id}\' '
            'AND "namespace" =~ /./')


def stored_by_the_stack(path: str, value: float) -> bool:
    """Whether Telegraf keeps a Graphite point: not the zeros Spark sends for its own
    process-tree metrics, which are off (the annotator measures the tree; ingest_guard)."""
    return not (value == 0 and path.rsplit(".", 1)[-1] in SPARK_OFF_ZEROS)


def stored_count(stack: Stack, app_id: str) -> int:
    return sum(s["values"][0][1] for s in stack.influx(spark_points_query(app_id)))


def report_times(stack: Stack, app_id: str, executor: str) -> list[int]:
    rows = stack.influx(f'SELECT "value" FROM "heap.used" WHERE "applicationid" = \'{app_id}\' '
                        f'AND "executorid" = \'{executor}\' AND "namespace" = \'jvm\'')
    return [r[0] for r in rows[0]["values"]] if rows else []


def wait_for_reports(stack: Stack, app_id: str, count: int, deadline_s: float = 60.0) -> None:
    stack.wait_for(f'SELECT count("value") FROM "heap.used" WHERE "applicationid" = \'{app_id}\' '
                   f'GROUP BY "executorid"',
                   lambda s: len(s) == 3 and all(x["values"][0][1] >= count for x in s), deadline_s)


def test_influxdb_restart_mid_run_loses_no_point(fault_stack, tmp_path):
    stack = fault_stack
    tap = GraphiteTap((stack.settings.graphite_host, stack.settings.graphite_port))
    try:
        job = SparkProcess(stack, tap.port, seconds=OUTAGE_S + 25, log=tmp_path / "spark.log")
        wait_for_reports(stack, job.app_id, 3)
        NativeBackend(stack.settings).down(only=("influxdb",), progress=quiet)
        down_at = int(time.time() * 1000)
        time.sleep(OUTAGE_S)  # the fault itself, the behaviour under test: InfluxDB stays away this long
        up_at = int(time.time() * 1000)
        NativeBackend(stack.settings).up(only=("influxdb",), progress=quiet)
        job.wait(timeout_s=180)
        sent = tap.points(job.app_id, stored=stored_by_the_stack)
        # Until Telegraf has written its backlog: Spark's points only, as counted below (the
        # thread sampler's, tagged with the same application, would end the wait early).
        stack.wait_for(spark_points_query(job.app_id),
                       lambda s: sum(x["values"][0][1] for x in s) >= len(sent), deadline_s=60)
    finally:
        tap.close()
    assert len(sent) > 1000, f"the tap saw only {len(sent)} points: did Spark report through it?"
    assert stored_count(stack, job.app_id) == len(sent)
    print(f"\n{len(sent)} distinct points sent, all stored; InfluxDB was down {(up_at - down_at) / 1000:.1f} s")
    during = [t for t in report_times(stack, job.app_id, "1") if down_at + 1000 < t < up_at - 1000]
    assert len(during) >= OUTAGE_S / SINK_PERIOD_S / 2, "points sent during the outage must be kept"


@pytest.mark.parametrize("strategy,kept", [("disk", 500), ("memory", 200)])
def test_telegraf_restarted_during_an_influxdb_outage_loses_nothing_with_its_buffer_on_disk(
        tmp_path, strategy, kept):
    """InfluxDB down, reports arrive, Telegraf restarts (an upgrade, a
    reboot), more reports, InfluxDB back. With TELEGRAF_BUFFER_STRATEGY=disk
    every point is stored; with the default memory buffer the 300 taken
    before the restart are lost, as .env.example says."""
    with throwaway_stack(tmp_path / "state", only=("influxdb", "telegraf"), unread_metrics="pass",
                         TELEGRAF_BUFFER_STRATEGY=strategy) as settings:
        check_buffer_outage(Stack(settings), kept)


def check_buffer_outage(stack: Stack, kept: int) -> None:
    backend = NativeBackend(stack.settings)
    app = f"app-outage-{int(time.time())}"
    start = int(time.time()) - 600

    def send(first: int, count: int) -> None:
        stack.send_graphite("".join(f"spark.{app}.1.jvm.heap.used {i} {start + i}\n"
                                    for i in range(first, first + count)))

    backend.down(only=("influxdb",), progress=quiet)
    try:
        failed = stack.failed_writes()
        send(0, 300)
        stack.wait_for_failed_writes(failed)  # Telegraf has taken them and failed to write them
        backend.down(only=("telegraf",), progress=quiet)
        backend.up(only=("telegraf",), progress=quiet)
        failed = stack.failed_writes()
        send(300, 200)
        stack.wait_for_failed_writes(failed)  # the restarted Telegraf holds them too
    finally:
        backend.up(only=("influxdb",), progress=quiet)
    query = f'SELECT count("value") FROM "heap.used" WHERE "applicationid" = \'{app}\''
    stack.wait_for(query, lambda s: bool(s) and s[0]["values"][0][1] >= kept, deadline_s=60)
    stack.wait_for_telegraf_to_drain()  # nothing else arrives
    assert stack.influx(query)[0]["values"][0][1] == kept


def test_points_beyond_the_buffer_are_dropped_counted_and_shown_by_status(tmp_path):
    """InfluxDB away, more points than TELEGRAF_BUFFER_LIMIT arrive: the oldest
    go, and once InfluxDB is back `status` says how many (Telegraf's own
    internal_write count, stored with the data)."""
    limit, sent = 200, 600
    with throwaway_stack(tmp_path / "state", only=("influxdb", "telegraf"), unread_metrics="pass",
                         TELEGRAF_BUFFER_LIMIT=str(limit)) as settings:
        stack, backend = Stack(settings), NativeBackend(settings)
        app = f"app-overflow-{int(time.time())}"
        start = int(time.time()) - 600
        backend.down(only=("influxdb",), progress=quiet)
        try:
            failed = stack.failed_writes()
            stack.send_graphite("".join(f"spark.{app}.1.jvm.heap.used {i} {start + i}\n" for i in range(sent)))
            stack.wait_for_failed_writes(failed)  # taken, past the buffer's limit, and not written
        finally:
            backend.up(only=("influxdb",), progress=quiet)
        query = f'SELECT count("value") FROM "heap.used" WHERE "applicationid" = \'{app}\''
        stack.wait_for(query, bool, deadline_s=60)
        stored = stack.influx(query)[0]["values"][0][1]
        def dropped_now():
            row = next(r for r in backend.status() if r.name == "telegraf")
            said = re.search(r"([\d,]+) dropped", row.data)
            return row, int(said.group(1).replace(",", "")) if said else 0

        # internal_write is written every 10 s; its count grows to every point the
        # buffer lost (host metrics share the buffer and the loss).
        deadline = time.monotonic() + 40
        row, dropped = dropped_now()
        while dropped < sent - stored and time.monotonic() < deadline:
            time.sleep(2)
            row, dropped = dropped_now()
        assert stored <= limit and dropped >= sent - stored, (stored, row.data)
        assert f"TELEGRAF_BUFFER_LIMIT={limit:,}" in row.detail and row.state == "up"


def test_telegraf_restart_mid_run_leaves_a_bounded_gap(fault_stack, tmp_path):
    stack = fault_stack
    job = SparkProcess(stack, stack.settings.graphite_port, seconds=30, log=tmp_path / "spark.log")
    wait_for_reports(stack, job.app_id, 3)
    started = time.monotonic()
    NativeBackend(stack.settings).down(only=("telegraf",), progress=quiet)
    NativeBackend(stack.settings).up(only=("telegraf",), progress=quiet)
    restart_s = time.monotonic() - started
    job.wait(timeout_s=180)
    # The sink drops reports while nothing listens and reconnects at its next
    # report: a gap of at most the restart time plus three periods.
    bound_ms = (restart_s + 3 * SINK_PERIOD_S) * 1000
    for executor in ("driver", "0", "1"):
        times = report_times(stack, job.app_id, executor)
        assert times and times[-1] > int(time.time() * 1000) - 60_000
        gap = max(b - a for a, b in zip(times, times[1:]))
        assert gap <= bound_ms, f"executor {executor}: gap {gap} ms > bound {bound_ms:.0f} ms"


IDLE_CLOSE_S = 30  # telegraf.conf: read_timeout of the Graphite listener


def test_idle_graphite_connections_are_closed_so_they_cannot_hold_the_listener(fault_stack):
    """Dead or idle clients must not keep the listener's connection slots:
    each idle connection is closed after the read timeout, and a report on a
    new connection is stored as usual."""
    address = (fault_stack.settings.graphite_host, fault_stack.settings.graphite_port)
    idle = [socket.create_connection(address, timeout=IDLE_CLOSE_S + 30) for _ in range(50)]
    started = time.monotonic()
    try:
        for conn in idle:
            assert conn.recv(1) == b"", "the listener sent something on an idle connection"
        waited = time.monotonic() - started
        assert IDLE_CLOSE_S - 2 <= waited <= IDLE_CLOSE_S + 20, f"idle connections closed after {waited:.0f} s"
    finally:
        for conn in idle:
            conn.close()
    now = int(time.time())
    fault_stack.send_graphite(f"spark.app-idle-check.1.jvm.heap.used 42 {now}\n")
    fault_stack.wait_for('SELECT count("value") FROM "heap.used" WHERE "applicationid" = \'app-idle-check\'',
                         lambda s: bool(s))


def test_fuzz_on_graphite_port_keeps_stack_up_and_good_lines_flowing(fault_stack):
    stack = fault_stack
    address = (stack.settings.graphite_host, stack.settings.graphite_port)
    pid = PidFile(stack.settings.state_dir, "telegraf").running_pid()
    rng = random.Random(20261122)
    now = int(time.time())
    payloads = [
        bytes(rng.getrandbits(8) for _ in range(20000)),
        b"spark.app-20991231235959-0777.1.executor.x " + b"9" * 200000 + b" 1\n",
        b"y" * 1_000_000 + b"\n",
        f"spark.app-20991231235959-0777.1.executor.nan NaN {now}\n".encode(),
        f"spark.app-20991231235959-0777.1.executor.inf +Inf {now}\n".encode(),
        f"spark.app-20991231235959-0777.1.executor.ninf -Inf {now}\n".encode(),
        "spark.app-20991231235959-0777.1.executor.\udcff\udcfe 1 1\n".encode("utf-8", "surrogateescape"),
    ]
    for payload in payloads:
        with socket.create_connection(address, 5) as s:
            s.sendall(payload)
    for _ in range(2000):  # connections opened and dropped, some mid-line
        with socket.create_connection(address, 5) as s:
            if rng.random() < 0.5:
                s.sendall(b"spark.app-20991231235959-0777.1.exec")
    good = "".join(f"spark.app-20991231235959-0777.{i}.executor.threadpool.activeTasks {i} {now}\n"
                   for i in range(10))
    stack.send_graphite(good)
    series = stack.wait_for("SELECT \"value\" FROM \"threadpool.activeTasks\" WHERE \"applicationid\" = "
                            "'app-20991231235959-0777' GROUP BY \"executorid\"", lambda s: len(s) == 10)
    assert sorted(x["values"][0][1] for x in series) == list(range(10))
    assert PidFile(stack.settings.state_dir, "telegraf").running_pid() == pid
    for name in ("nan", "inf", "ninf"):
        assert not stack.influx(f'SELECT * FROM "{name}"'), f"non-finite {name} was stored"
    states = {row.name: row.state for row in NativeBackend(stack.settings).status()}
    assert (states["influxdb"], states["telegraf"]) == ("up", "up"), states


def listening_addresses(port: int) -> set[str]:
    """Local addresses of LISTEN sockets on port, from /proc/net/tcp{,6}."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, port_hex = local.split(":")
            if state == "0A" and int(port_hex, 16) == port:
                found.add(address)
    return found


def test_http_apis_listen_on_loopback_only(fault_stack):
    # InfluxDB's HTTP API; Grafana's bind (the same setting) is in test_native_grafana.py.
    loopback = {"0100007F", "00000000000000000000000001000000"}
    for port in (fault_stack.settings.influxdb_port,):
        addresses = listening_addresses(port)
        assert addresses and addresses <= loopback, f"port {port} listens on {addresses}"


# --- InfluxDB's disk: full, read-only -------------------------------------------

DISK_MB = 64


@contextlib.contextmanager
def small_disk(mount_point: Path, size_mb: int = DISK_MB):
    """A tmpfs of size_mb mounted at mount_point: a filesystem that really fills
    up (tmpfs has no blocks reserved for root) and really goes read-only (chmod
    stops no one running as root). Unmounted afterwards whatever happened."""
    if os.geteuid() != 0:
        pytest.skip("the disk faults mount a small tmpfs under InfluxDB, which needs root")
    mount_point.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0755",
                              "sparkscope-test-disk", str(mount_point)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a {size_mb} MB tmpfs under InfluxDB here ({mounted.stderr.strip()}); "
                    "the disk faults need root with CAP_SYS_ADMIN")
    try:
        yield mount_point
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(mount_point)], capture_output=True)
        if subprocess.run(["umount", str(mount_point)], capture_output=True).returncode != 0:
            # Something still holds it open: detach it now, the kernel frees it when released.
            subprocess.run(["umount", "--lazy", str(mount_point)], check=True)


def fill_disk(mount_point: Path) -> Path:
    """Write a file until the filesystem has not one byte left; returns it."""
    filler = mount_point / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        chunk = b"\0" * 2**20
        while True:
            try:
                if os.write(fd, chunk) == 0:
                    break
            except OSError as err:
                if err.errno != errno.ENOSPC:
                    raise
                if len(chunk) == 1:
                    break
                chunk = chunk[:len(chunk) // 2]  # the last, partly free block too
    finally:
        os.close(fd)
    assert os.statvfs(mount_point).f_bavail == 0
    return filler


def status_of(settings, service: str) -> tuple[str, str]:
    return next((row.state, row.detail) for row in NativeBackend(settings).status() if row.name == service)


def test_full_disk_under_influxdb_is_reported_by_status_and_spark_runs_on(tmp_path, monkeypatch):
    state = tmp_path / "state"
    with small_disk(state / "influxdb") as disk, \
            throwaway_stack(state, only=("influxdb", "telegraf"), unread_metrics="pass") as settings:
        stack = Stack(settings)
        assert status_of(settings, "influxdb")[0] == "up"
        telegraf_pid = PidFile(settings.state_dir, "telegraf").running_pid()
        tap = GraphiteTap((settings.graphite_host, settings.graphite_port))
        try:
            job = SparkProcess(stack, tap.port, seconds=45, log=tmp_path / "spark.log")
            wait_for_reports(stack, job.app_id, 3)
            filler = fill_disk(disk)

            # At once status sees the disk full (statvfs); a test write may still fit in
            # the last, partly used block of a file, Spark's next ones do not.
            state_now, detail = status_of(settings, "influxdb")
            assert state_now == "degraded"
            assert f"its disk is full (0 B free of {DISK_MB}.0 MB on {disk})" in detail
            seen = []

            def write_refused() -> bool:
                seen.append(status_of(settings, "influxdb"))
                return "InfluxDB says:" in seen[-1][1]

            assert wait_until(write_refused, 30, 1), f"no write refused yet: {seen[-1]}"
            state_now, detail = seen[-1]
            print(f"\nsparkscope status with InfluxDB's disk full:\ninfluxdb  {state_now}  {detail}")
            assert state_now == "degraded"
            assert "refuses writes: its disk is full" in detail
            assert "no space left on device" in detail  # InfluxDB's own words
            assert f"df -h {disk}" in detail
            assert "./sparkscope down influxdb && ./sparkscope up influxdb" in detail
            monkeypatch.setattr(cli, "load_settings", lambda: settings)
            with contextlib.redirect_stdout(io.StringIO()) as out:
                assert cli.main(["status"]) == 3
            assert "influxdb  native   degraded  " in out.getvalue()

            job.wait(timeout_s=180)  # Spark never notices: it exits 0 (asserted in wait)

            # The fix the message gives: free space, then restart InfluxDB alone.
            filler.unlink()
            monkeypatch.setenv("GRAFANA_ADMIN_PASSWORD", settings.grafana_password)  # no .env written
            with contextlib.redirect_stdout(io.StringIO()):
                assert cli.main(["down", "influxdb"]) == 0
                assert cli.main(["up", "influxdb"]) == 0
            after = status_of(settings, "influxdb")
            assert after[0] == "up", after
            influx.write(settings.influx_writer, settings.database, f"after_disk_full ok=1i {int(time.time())}")
            assert stack.influx('SELECT count("ok") FROM "after_disk_full"')[0]["values"][0][1] == 1

            # Telegraf held what InfluxDB refused and delivers it now: nothing lost.
            sent = tap.points(job.app_id, stored=stored_by_the_stack)
            stack.wait_for(spark_points_query(job.app_id),
                           lambda s: sum(x["values"][0][1] for x in s) >= len(sent), deadline_s=90)
        finally:
            tap.close()
        assert stored_count(stack, job.app_id) == len(sent)
        assert PidFile(settings.state_dir, "telegraf").running_pid() == telegraf_pid
        print(f"{len(sent)} distinct points sent by Spark, all stored after the fix")


def test_read_only_influxdb_disk_fails_up_at_once_and_status_says_why(tmp_path):
    state = tmp_path / "state"
    with small_disk(state / "influxdb") as disk, throwaway_stack(state, only=("influxdb",)) as settings:
        influx.write(settings.influx_writer, settings.database, f"before_read_only ok=1i {int(time.time())}")
        NativeBackend(settings).down(only=("influxdb",), progress=quiet)
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)

        started = time.monotonic()
        with pytest.raises(StackError, match="read-only file ?system"):
            NativeBackend(settings).up(only=("influxdb",), progress=quiet)
        # InfluxDB exits at once; up must not wait out its 60 s health deadline.
        assert time.monotonic() - started < 20
        state_now, detail = status_of(settings, "influxdb")
        print(f"\nsparkscope status with InfluxDB's disk read-only:\ninfluxdb  {state_now}  {detail}")
        assert state_now == "down"
        assert f"is on a read-only filesystem ({disk})" in detail

        subprocess.run(["mount", "-o", "remount,rw", str(disk)], check=True)
        NativeBackend(settings).up(only=("influxdb",), progress=quiet)
        assert status_of(settings, "influxdb")[0] == "up"
        assert influx.query(settings.influx_admin, 'SELECT count("ok") FROM "before_read_only"',
                            settings.database)[0]["values"][0][1] == 1


def test_a_driver_killed_with_sigkill_is_ended_no_end_seen_and_a_finished_one_is_not(tmp_path):
    """The driver gets SIGKILL (as from the kernel's OOM killer): no shutdown
    hook runs, the annotator never sends the end. After the grace period
    Telegraf writes the run's end as NO_END_SEEN, at its start, ending at the
    driver's last report; the live dashboard's application table reads it;
    the report tells it. A run that finishes gets no such point."""
    from sparkscope.provision.annotator_jar import ensure_annotator_jar
    import json
    from sparkscope.report.run_facts import RunReader
    from sparkscope.spark.conf import annotator_properties
    from sparkscope.settings import ROOT
    with throwaway_stack(tmp_path / "state", only=("influxdb", "telegraf"), SPARKSCOPE_NO_END_GRACE_S="5") as settings:
        stack = Stack(settings)
        props = {**sparkscope_properties(settings, period_s=SINK_PERIOD_S),
                 **annotator_properties(settings, ensure_annotator_jar(ROOT, progress=lambda _: None))}
        argv = submit_argv(JOBS / "steady_job.py", "local[1]", props, ["120"])
        log = tmp_path / "spark.log"
        proc = subprocess.Popen(argv, env=spark_env(log), stdout=subprocess.PIPE, stderr=open(log, "w"),
                                text=True, start_new_session=True)
        try:
            app = proc.stdout.readline().split()[1]
            stack.wait_for(f"SELECT count(\"value\") FROM \"JVMHeapMemory\" WHERE \"applicationid\" = '{app}' "
                           "AND \"executorid\" = 'driver'", lambda s: bool(s) and s[0]["values"][0][1] >= 3, 60)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        killed_at_ms = int(time.time() * 1000)
        query = f"SELECT * FROM \"sparkscope_application\" WHERE \"applicationid\" = '{app}' AND \"status\" = 'NO_END_SEEN'"
        end = stack.wait_for(query, bool, deadline_s=60)[0]
        row = dict(zip(end["columns"], end["values"][0]))
        running = stack.influx(f"SELECT * FROM \"sparkscope_application\" WHERE \"applicationid\" = '{app}' "
                               "AND \"status\" = 'RUNNING'")[0]
        assert row["time"] == running["values"][0][0]  # at the run's start, as the annotator's own end
        assert killed_at_ms - 15_000 < row["end_time_ms"] <= killed_at_ms
        assert "no end seen" in row["text"] and row["app_name"] == "sparkscope-test-steady"

        now = int(time.time() * 1000)
        board = json.loads((ROOT / "dashboards" / "spark-executors.json").read_text())
        table = next(p for top in board["panels"] for p in [top, *top.get("panels", [])]
                     if p.get("title") == "Applications")
        answered = stack.open_dashboard(board, now - 600_000, now).run_panel(table)
        assert any(app in str(series) and "NO_END_SEEN" in str(series) for series in answered.values())
        assert RunReader(settings.influx_reader, settings.database).read(app).ending == "NO_END_SEEN"

        # A finished run: its FINISHED point closes it, and no NO_END_SEEN follows.
        done = run_spark_job(stack, "steady_job.py", tmp_path, master="local[1]", args=["2"],
                             conf=annotator_properties(settings, ensure_annotator_jar(ROOT, progress=lambda _: None)))
        # The behaviour itself is an absence: past the 5 s grace and Telegraf's checks after it,
        # still no NO_END_SEEN for the finished run (no condition can say "never").
        time.sleep(12)
        assert stack.influx(f"SELECT * FROM \"sparkscope_application\" WHERE \"applicationid\" = '{done.app_id}' "
                            "AND \"status\" = 'NO_END_SEEN'") == []


# The rated load and the downtime to survive, both a tenth (so the shipped buffer, a
# hundredth): Telegraf must keep every point of an InfluxDB outage that long.
SCALE = 10


def test_influxdb_down_for_the_downtime_to_survive_at_the_rated_load_loses_nothing(tmp_path):
    """Simulated executors send Spark's metric names at a tenth of the rated
    stored rate; InfluxDB stops for a tenth of the downtime the buffer is sized
    for, then restarts; Telegraf runs with a hundredth of the shipped
    TELEGRAF_BUFFER_LIMIT. Every point sent is stored."""
    import importlib.util
    import random
    import sys
    import threading
    from sparkscope.settings import ROOT
    spec = importlib.util.spec_from_file_location("bench_ingest", ROOT / "bench" / "ingest.py")
    ingest = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = ingest  # its dataclasses look their module up there
    spec.loader.exec_module(ingest)
    executor_metric_paths, send_load, stored_points = ingest.executor_metric_paths, ingest.send_load, ingest.stored_points
    from sparkscope.settings import INFLUX_DOWNTIME_TO_SURVIVE_S, RATED_STORED_POINTS_S, shipped_defaults

    limit = int(shipped_defaults()["TELEGRAF_BUFFER_LIMIT"]) // SCALE ** 2
    outage_s = INFLUX_DOWNTIME_TO_SURVIVE_S / SCALE
    executors = round(RATED_STORED_POINTS_S / SCALE / len(executor_metric_paths()))  # each reports every 1 s
    with throwaway_stack(tmp_path / "state", only=("influxdb", "telegraf"), unread_metrics="pass",
                         TELEGRAF_BUFFER_LIMIT=str(limit)) as settings:
        backend, app = NativeBackend(settings), f"app-outage-{int(time.time())}"
        sent: list[int] = []
        sender = threading.Thread(target=lambda: sent.append(send_load(
            (settings.graphite_host, settings.graphite_port), app, executors, 1.0, int(outage_s) + 20,
            random.Random(7))[0]), daemon=True)
        since = int(time.time()) - 5
        sender.start()
        time.sleep(8)
        backend.down(only=("influxdb",), progress=quiet)
        down = time.monotonic()
        time.sleep(max(0.0, outage_s - 1))  # the fault: InfluxDB away this long (its start counts too)
        backend.up(only=("influxdb",), progress=quiet)
        away = time.monotonic() - down
        sender.join(120)
        assert sent, "the sender did not finish"
        wait_until(lambda: stored_points(settings.influx_reader, settings.database, app, since) >= sent[0], 120, 2)
        stored = stored_points(settings.influx_reader, settings.database, app, since)
    rate = RATED_STORED_POINTS_S / SCALE
    print(f"\n{sent[0]:,} points sent at ~{rate:,.0f}/s, InfluxDB away {away:.1f} s, buffer {limit:,}: "
          f"{stored:,} stored")
    assert away >= outage_s * 0.9 and rate * away > limit / 2, "the outage must fill a real share of the buffer"
    assert stored == sent[0], f"{sent[0] - stored:,} of {sent[0]:,} points lost through a {away:.0f} s outage"
