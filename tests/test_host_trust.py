"""What root trusts on this host: the code it imports, the files it signals
and appends to, the processes it starts and keeps running. Each test does
what another local user (or the machine) would do, and checks root is not
fooled or stopped by it."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparkscope.process import start_group, start_ticks, stop_group, wait_until
from sparkscope.settings import ROOT
from sparkscope.stack import StackError
from sparkscope.stack.native import NativeBackend, PidFile

from sparkscope_testkit.sandbox import isolated_settings

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="what root trusts matters only as root")

PLANTED_INIT = "import os, pathlib\npathlib.Path({marker!r}).write_text(f'planted code ran as uid {{os.geteuid()}}')\n"


def plant_sparkscope(where: Path, marker: Path) -> None:
    """A `sparkscope` package as a user would drop it in a directory they may write."""
    package = where / "sparkscope"
    for sub in (package, package / "threadprobe", package / "blockprobe"):
        sub.mkdir(parents=True, exist_ok=True)
        (sub / "__init__.py").write_text(PLANTED_INIT.format(marker=str(marker)))
        (sub / "__main__.py").write_text(PLANTED_INIT.format(marker=str(marker)))


@needs_root
def test_the_launcher_run_as_root_from_a_planted_directory_imports_only_sparkscope(tmp_path):
    """A user plants sparkscope/__main__.py in /tmp; root runs ./sparkscope from there."""
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    marker = tmp_path / "planted-ran"
    plant_sparkscope(shared, marker)
    # A ready venv whose python is the project's (the launcher's first run would pip install).
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    (venv / "bin" / "python").chmod(0o755)
    (venv / ".sparkscope-ready").touch()
    os.utime(venv / ".sparkscope-ready", (time.time() + 3600,) * 2)  # newer than pyproject.toml
    done = subprocess.run([str(ROOT / "sparkscope"), "--help"], cwd=shared, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "SPARKSCOPE_VENV": str(venv),
                                            "PYTHONPATH": str(ROOT / "src")})
    assert not marker.exists(), marker.read_text()
    assert done.returncode == 0 and "usage" in done.stdout, done.stderr


@needs_root
def test_a_root_probe_imports_nothing_from_its_state_dir(tmp_path):
    """The probes used to start with the state dir as cwd, first on sys.path."""
    settings = isolated_settings(tmp_path / "state", THREADPROBE_PYSPY="false")
    settings.state_dir.mkdir(parents=True)
    marker = tmp_path / "planted-ran"
    plant_sparkscope(settings.state_dir, marker)
    backend = NativeBackend(settings)
    said: list[str] = []
    try:
        assert backend.start_threadprobe(said.append), said
        assert not marker.exists(), marker.read_text()
    finally:
        backend.stop_probe("threadprobe")


@needs_root
def test_root_refuses_a_state_dir_others_may_write(tmp_path):
    """Pid files there would make root's `down` signal any process; log
    symlinks there would make root append to any file."""
    settings = isolated_settings(tmp_path / "state")
    settings.state_dir.mkdir(parents=True)
    settings.state_dir.chmod(0o777)
    # A victim process (another user's) and a pid file naming it, as the planter writes it.
    victim = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "60"],
                              start_new_session=True)
    try:
        assert wait_until(lambda: start_ticks(victim.pid) is not None, 5)
        (settings.state_dir / "pids").mkdir(mode=0o777)
        (settings.state_dir / "pids" / "threadprobe.pid").write_text(f"{victim.pid} {start_ticks(victim.pid)}\n")
        with pytest.raises(StackError, match="state dir .*writable by group and others.*chmod"):
            NativeBackend(settings).down(progress=lambda _: None)
        assert victim.poll() is None, "root's down signalled a process named by a planted pid file"
        with pytest.raises(StackError, match="state dir"):
            NativeBackend(settings).up(only=("influxdb",), progress=lambda _: None)
    finally:
        stop_group(victim.pid, proc=victim)


def test_data_a_root_up_handed_to_its_service_user_is_named_with_its_owner_not_a_bare_denial(tmp_path,
                                                                                               monkeypatch):
    """A later `up` without root would start InfluxDB on data it cannot open; up says
    whose the data is and how to take it over, before anything starts."""
    import pwd
    settings = isolated_settings(tmp_path / "state")
    data = settings.state_dir / "influxdb"
    data.mkdir(parents=True)
    os.chown(data, 65534, 65534)  # as a root up leaves it for SPARKSCOPE_SERVICE_USER=nobody
    me = 4321
    monkeypatch.setattr(os, "geteuid", lambda: me)
    backend = NativeBackend(settings)
    with pytest.raises(StackError, match=f"{data} belongs to {pwd.getpwuid(65534).pw_name}.*sudo chown -R"):
        backend._refuse_others_data("influxdb", data)
    os.chown(data, me, me)
    backend._refuse_others_data("influxdb", data)  # one's own: nothing to say


def test_a_log_or_pid_file_that_is_a_symlink_is_not_followed(tmp_path):
    target = tmp_path / "victim"
    target.write_text("precious\n")
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "threadprobe.log").symlink_to(target)
    with pytest.raises(OSError, match="symbolic link|Too many levels"):
        start_group(["true"], logs / "threadprobe.log")
    assert target.read_text() == "precious\n"
    pids = tmp_path / "pids"
    pids.mkdir()
    (pids / "threadprobe.pid").symlink_to(target)
    assert PidFile(tmp_path, "threadprobe").running_pid() is None
    with pytest.raises(OSError):
        PidFile(tmp_path, "threadprobe").write(os.getpid())
    assert target.read_text() == "precious\n"


def test_logs_are_private_to_their_owner(tmp_path):
    """Logs may carry what a service prints about its users: 0600, whatever the umask."""
    old = os.umask(0o022)
    try:
        proc = start_group(["true"], tmp_path / "logs" / "x.log")
        proc.wait()
    finally:
        os.umask(old)
    assert (tmp_path / "logs" / "x.log").stat().st_mode & 0o077 == 0


# --- the thread probe's root py-spy: bounded, and only on real PySpark workers -------

FORGED_WORKERS = 24
SLEEPER = "import time; time.sleep(120)"


def forged_executor(tmp_path: Path, real_jvm: bool) -> subprocess.Popen:
    """What any local user can start: a process that says it is a Spark executor
    (a real JVM, or anything renamed `java`), with many "PySpark worker" children."""
    python = os.path.realpath(sys.executable)  # not a launcher script that would exec it under another argv[0]
    child = f"{python} -c '{SLEEPER}' -m pyspark.daemon"
    args = "org.apache.spark.executor.CoarseGrainedExecutorBackend --executor-id 1 --app-id app-forged"
    if not real_jvm:
        script = f"for i in $(seq {FORGED_WORKERS}); do {child} & done; " \
                 f"exec -a java {python} -c '{SLEEPER}' {args}"
        return subprocess.Popen(["bash", "-c", script], start_new_session=True)
    source = tmp_path / "Forged.java"
    source.write_text(
        "public class Forged { public static void main(String[] a) throws Exception {"
        f" for (int i = 0; i < {FORGED_WORKERS}; i++) new ProcessBuilder(\"{python}\", \"-c\", \"{SLEEPER}\","
        " \"-m\", \"pyspark.daemon\").start(); Thread.sleep(120000); } }")
    subprocess.run(["javac", "-d", str(tmp_path), str(source)], check=True, timeout=120)
    # The class name is the last word that counts: it ends with ExecutorBackend.
    return subprocess.Popen(["java", "-cp", str(tmp_path), "Forged", *args.split()], start_new_session=True)


@pytest.mark.skipif(shutil.which("javac") is None, reason="the forged executor is a small Java program")
@pytest.mark.parametrize("real_jvm", [False, True], ids=["renamed-python", "real-jvm"])
def test_a_forged_executor_gets_a_bounded_number_of_py_spys(tmp_path, real_jvm):
    from sparkscope.probes.threadprobe import jvms, procfs, python_workers
    if python_workers.py_spy_path() is None:
        pytest.skip("py-spy is not installed")
    forged = forged_executor(tmp_path, real_jvm)
    said: list[str] = []
    workers = python_workers.PythonWorkers(said.append)
    try:
        assert wait_until(lambda: len([c for c in procfs.children(forged.pid)
                                       if "pyspark.daemon" in (procfs.cmdline(c) or [])]) == FORGED_WORKERS, 60)
        def as_executor():
            return jvms.from_cmdline(forged.pid, int(start_ticks(forged.pid)), procfs.cmdline(forged.pid) or [])
        assert wait_until(lambda: as_executor() is not None, 30)  # bash has exec'd its `java`
        jvm = as_executor()
        assert jvm.app_id == "app-forged"  # it passes for an executor by its argv
        for _ in range(3):  # three refreshes: the bound holds across them
            workers.refresh([jvm], 1.0)
        started = len(workers.running) + len(workers.finished)
        if real_jvm:
            assert 0 < started <= python_workers.MAX_PER_EXECUTOR
            assert any(f"{FORGED_WORKERS - started} more" in line and "not profiled" in line for line in said), said
        else:
            assert started == 0
            assert any("not a JVM" in line for line in said), said
    finally:
        workers.stop()
        stop_group(forged.pid, proc=forged)


# --- faults a probe lives through ---------------------------------------------------

class Impostor:
    """A listener on the events port that first answers like an SSH server (a
    local user who bound the port while Telegraf restarted), then like Telegraf."""

    def __init__(self, impostor_answers: int):
        import socket
        import threading
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.left = impostor_answers
        self.bodies: list[str] = []
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                data = b""
                try:
                    while b"\r\n\r\n" not in data:
                        data += conn.recv(65536) or b"\r\n\r\n"
                    head, _, body = data.partition(b"\r\n\r\n")
                    length = next((int(h.split(b":")[1]) for h in head.split(b"\r\n")
                                   if h.lower().startswith(b"content-length:")), 0)
                    while len(body) < length:
                        body += conn.recv(65536)
                except OSError:
                    continue
                if self.left > 0:
                    self.left -= 1
                    conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")
                else:
                    self.bodies.append(body.decode(errors="replace"))
                    conn.sendall(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")

    def close(self) -> None:
        self.sock.close()


def test_the_block_probe_lives_through_a_listener_that_speaks_no_http(tmp_path):
    from test_blockprobe import DEV_VDA, bt
    period = (bt("hist", {"@hist": {f"{DEV_VDA},R": [{"min": 128, "max": 255, "count": 1}]}}) + "\n"
              + bt("printf", "end 1000\n"))
    script = tmp_path / "bpftrace"  # a period every 0.2 s, as bpftrace with a short period
    script.write_text(f"#!/bin/sh\nwhile true; do cat <<'EOF'\n{period}\nEOF\nsleep 0.2; done\n")
    script.chmod(0o755)
    listener = Impostor(impostor_answers=3)
    code = ("import sys; from sparkscope.probes.blockprobe.probe import run; "
            f"sys.exit(run('http://127.0.0.1:{listener.port}', 1, 100, backoff_s=(0.2,)))")
    log = tmp_path / "probe.log"
    with open(log, "w") as stderr:  # a file: the fake bpftrace would hold a pipe open
        probe = subprocess.Popen([sys.executable, "-c", code], stderr=stderr, start_new_session=True,
                                 env=dict(os.environ, PATH=f"{tmp_path}:{os.environ['PATH']}"))
    try:
        assert wait_until(lambda: len(listener.bodies) >= 2 or probe.poll() is not None, 30)
        assert probe.poll() is None, log.read_text()
        assert all("block_latency,device=" in body for body in listener.bodies)
    finally:
        stop_group(probe.pid, proc=probe)  # its group: the fake bpftrace too
        listener.close()
    assert "points not sent" in log.read_text()


# --- native services are kept running -------------------------------------------------

def test_a_native_service_that_dies_is_started_again_and_status_says_so(tmp_path):
    from sparkscope.store import influx
    from sparkscope_testkit.sandbox import throwaway_stack
    with throwaway_stack(tmp_path / "state", only=("influxdb",)) as settings:
        backend = NativeBackend(settings)
        leader = PidFile(settings.state_dir, "influxdb").running_pid()
        influxd = influxd_under(leader)
        assert influxd, "no influxd process under the recorded pid"
        os.kill(influxd[0], signal.SIGKILL)  # a crash: OOM killer, a panic
        assert wait_until(lambda: not influx.ping(settings.influx_url), 10)
        assert wait_until(lambda: influx.ping(settings.influx_url), 60), "influxdb was not started again"
        row = next(row for row in backend.status() if row.name == "influxdb")
        assert row.state == "up" and "restarted 1 times" in row.detail and "-9" in row.detail, row.detail
        # down stops it for good: nothing restarts what the user stopped.
        backend.down(only=("influxdb",), progress=lambda _: None)
        time.sleep(3)
        assert not influx.ping(settings.influx_url)


def test_a_service_that_fails_at_its_start_is_not_restarted_so_up_says_why_at_once(tmp_path):
    from sparkscope.stack.supervise import read_status, supervise
    started = time.monotonic()
    assert supervise(["sh", "-c", "echo bad setting >&2; exit 3"], tmp_path / "s.json") == 3
    assert time.monotonic() - started < 5
    assert read_status(tmp_path / "s.json") == {**read_status(tmp_path / "s.json"), "restarts": 0, "last_exit": 3}


# --- as root, only the probes run as root ----------------------------------------------

def influxd_under(leader: int) -> list[int]:
    """influxd processes below a service's recorded pid (supervisor, then the relay):
    by the program they run, which may have been started from a descriptor."""
    from sparkscope.probes.threadprobe import procfs
    found, todo = [], [leader]
    while todo:
        pid = todo.pop()
        try:
            if os.readlink(f"/proc/{pid}/exe").endswith("/influxd"):
                found.append(pid)
        except OSError:
            pass
        todo.extend(procfs.children(pid))
    return found


def process_uid(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[2])  # effective


@needs_root
def test_a_root_up_runs_influxdb_unprivileged_with_its_files_private(tmp_path, monkeypatch):
    """What a user gets from `sudo ./sparkscope up` by default (here without SUDO_USER: nobody)."""
    import pwd
    import tempfile
    from sparkscope.store import influx
    monkeypatch.delenv("SUDO_USER", raising=False)
    nobody = pwd.getpwnam("nobody")
    # A state dir and config the service user can reach: pytest's tmp dirs are root's
    # (0700), and so may the checkout be (a 0700 home folder).
    reachable = Path(tempfile.mkdtemp(prefix="sparkscope-service-user-"))
    reachable.chmod(0o755)
    shutil.copytree(ROOT / "influxdb", reachable / "checkout" / "influxdb")
    try:
        settings = dataclasses.replace(isolated_settings(reachable / "state", SPARKSCOPE_SERVICE_USER=""),
                                       root=reachable / "checkout")
        backend = NativeBackend(settings)
        try:
            backend.up(only=("influxdb",), progress=lambda _: None)
            leader = PidFile(settings.state_dir, "influxdb").running_pid()
            (influxd,) = influxd_under(leader)
            assert process_uid(influxd) == nobody.pw_uid
            assert influx.query(settings.influx_admin, "SHOW DATABASES")  # it works as that user
            meta = settings.state_dir / "influxdb" / "meta"
            assert meta.stat().st_uid == nobody.pw_uid and meta.stat().st_mode & 0o077 == 0
            log = settings.state_dir / "logs" / "influxdb.log"
            assert log.stat().st_uid == 0 and log.stat().st_mode & 0o077 == 0
        finally:
            backend.down(progress=lambda _: None)
    finally:
        shutil.rmtree(reachable, ignore_errors=True)


# --- what a stranger writes through the events port reaches `report` as data only -----

def test_report_on_runs_a_stranger_wrote_prints_no_escapes_and_writes_only_where_asked(tmp_path):
    """L1, L2, L8: through the events listener (no password on loopback), a
    newest "finished" run whose id holds a path and whose name holds a newline,
    and an earlier run of that name whose id holds terminal escapes."""
    import urllib.request
    from sparkscope.report.command import make_report, print_verdict
    from sparkscope.report.run_facts import RunReader
    from sparkscope_testkit.sandbox import throwaway_stack
    now = time.time_ns()
    name = 'etl\nnight'  # a raw newline inside the string field, as the listener stores it
    escape = "app-old\x1b]0;owned\x07\x1b[2J"
    body = "\n".join([
        f'sparkscope_application,applicationid={escape},status=RUNNING app_name="{name}",text="x" {now - 10**12}',
        f'sparkscope_application,applicationid={escape},status=FINISHED app_name="{name}",end_time_ms={now // 10**6 - 900_000}i,duration_ms=1000i {now - 9 * 10**11}',
        f'sparkscope_application,applicationid=app/../../planted,status=RUNNING app_name="{name}",text="x" {now - 5 * 10**11}',
        f'sparkscope_application,applicationid=app/../../planted,status=FINISHED app_name="{name}",end_time_ms={now // 10**6}i,duration_ms=1000i {now - 10**9}',
    ]).encode()
    with throwaway_stack(tmp_path / "state", only=("influxdb", "telegraf")) as settings:
        request = urllib.request.Request(f"{settings.events_url}/write?db={settings.database}", data=body)
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=10) as answer:
            assert answer.status == 204
        reader = RunReader(settings.influx_reader, settings.database)
        assert wait_until(lambda: len(reader.finished_runs()) == 2, 30)
        out_dir = tmp_path / "reports" / "mine"
        path, advice, run, runs = make_report(reader, None, out_dir)  # the default: the newest run
        printed: list[str] = []
        print_verdict(advice, runs, path, out=printed.append, run=run)
    assert path.parent == out_dir and path.is_file()
    assert not (tmp_path / "planted.html").exists()
    assert len(runs) == 2  # the earlier run of the same (newline-holding) name was found
    assert all("\x1b" not in line and "\x07" not in line for line in printed), printed
    assert any("app-old" in line for line in printed)


def test_a_complete_env_file_others_may_read_is_made_private_on_up(tmp_path, monkeypatch):
    """L6: a .env filled in by hand (`cp .env.example .env`, mode 0644) with every
    secret set: nothing is missing, and it used to stay readable by everyone."""
    import stat as stat_mod
    from sparkscope.settings import SECRET_KEYS, ensure_env_file, load_settings
    from test_auth import write_template
    for key in SECRET_KEYS:
        monkeypatch.delenv(key, raising=False)
    write_template(tmp_path)
    (tmp_path / ".env").write_text("".join(f"{key}=hand-written-{i:04d}-secret\n" for i, key in enumerate(SECRET_KEYS)))
    (tmp_path / ".env").chmod(0o644)
    said: list[str] = []
    assert ensure_env_file(load_settings(tmp_path, {}), progress=said.append) == []
    assert stat_mod.S_IMODE((tmp_path / ".env").stat().st_mode) == 0o600
    assert any("readable by other users" in line for line in said)


def test_influxdb_keeps_its_users_hashes_where_only_it_can_read(tmp_path):
    """L6: meta.db (users and bcrypt hashes) was 0644 in a 0755 dir under umask 022."""
    from sparkscope_testkit.sandbox import throwaway_stack
    old = os.umask(0o022)
    try:
        with throwaway_stack(tmp_path / "state", only=("influxdb",)) as settings:
            meta = settings.state_dir / "influxdb" / "meta"
            assert (meta / "meta.db").exists()
            assert meta.stat().st_mode & 0o077 == 0
    finally:
        os.umask(old)
