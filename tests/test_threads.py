"""The thread sampler's own logic, on /proc text captured from real Spark JVMs
and on a /proc tree laid out in a temporary directory (threads that vanish
mid-read, unreadable and garbled files). End to end, with real Spark and the
real stack: test_threadprobe.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from sparkscope.probes import procstat
from sparkscope.store.nested_set import parse_collapsed
from sparkscope.stack import native
from sparkscope.stack.native import NativeBackend
from sparkscope.settings import ROOT
from sparkscope.probes.threadprobe import jvms, periods, procfs
from sparkscope.probes.threadprobe.jvms import Discovery, SparkJvm, from_cmdline, resolve_driver
from sparkscope.probes.threadprobe.periods import JvmPeriod, thread_class
from sparkscope.probes.threadprobe.sampler import Errors, Sampler
from sparkscope_testkit.sandbox import isolated_settings, readable_source

# /proc/<pid>/task/<tid>/stat of a GC thread of a Spark 3.5 executor (Java 17), as read.
GC_STAT = ("26093 (GC Thread#0) S 25934 25934 25934 0 -1 4194368 4580 11934 0 0 6 3 13 18 20 0 130 0 1139344 "
           "3896164352 71456 18446744073709551615 94590019776512 94590019777397 140723601260784 0 0 0 4 0 16800975 "
           "1 0 0 -1 0 0 0 0 0 0")
# /proc/<pid>/task/<tid>/stack of a task thread reading from a FUSE mount, as read (innermost first).
FUSE_STACK = """[<0>] request_wait_answer+0x12f/0x210
[<0>] __fuse_simple_request+0xd8/0x290
[<0>] fuse_direct_io+0x24b/0x5a0
[<0>] fuse_direct_read_iter+0x57/0x90
[<0>] vfs_read+0x23c/0x360
[<0>] ksys_read+0x66/0xe0
[<0>] do_syscall_64+0x71/0x280
[<0>] entry_SYSCALL_64_after_hwframe+0x76/0x7e
"""
# An executor's command line (the classpath and --add-opens cut), as /proc/<pid>/cmdline splits it.
EXECUTOR_ARGV = ["/usr/lib/jvm/java-17-openjdk-amd64/bin/java", "-cp", "/opt/spark/conf:/opt/spark/jars/*",
                 "-Xmx1024M", "-Dspark.driver.port=45843", "org.apache.spark.executor.CoarseGrainedExecutorBackend",
                 "--driver-url", "spark://CoarseGrainedScheduler@localhost:45843", "--executor-id", "1",
                 "--hostname", "127.0.0.1", "--cores", "1", "--app-id", "app-20261123183936-0000",
                 "--worker-url", "spark://Worker@127.0.0.1:37303", "--resourceProfileId", "0"]
DRIVER_ARGV = ["/usr/lib/jvm/java-17-openjdk-amd64/bin/java", "-cp", "/opt/spark/jars/*", "-Xmx1g",
               "org.apache.spark.deploy.SparkSubmit", "--master", "local[2]", "--conf", "spark.ui.port=4321",
               "--name", "job", "job.py"]


def test_state_is_read_after_the_last_parenthesis_whatever_the_thread_name_holds():
    assert procstat.state(GC_STAT) == "S"
    tricky = GC_STAT.replace("(GC Thread#0) S", "(a) D (b) R) D")  # a name may hold ") " itself
    assert procstat.state(tricky) == "D"
    assert procstat.start_ticks(GC_STAT) == 1139344
    assert procstat.ppid(GC_STAT) == procstat.ppid(tricky) == 25934
    assert procstat.start_ticks(tricky) == 1139344 and procstat.ppid("26093 (cut") is None
    assert procstat.state("") is None and procstat.state("26093 (cut") is None
    assert procstat.state_of(tricky.encode()) == "D" and procstat.state_of(b"26093 (cut") is None
    assert procstat.cpu_seconds(GC_STAT) == sum(int(f) for f in GC_STAT.rsplit(")", 1)[1].split()[11:13]) / procstat.CLOCK_TICKS
    assert procstat.cpu_seconds("26093 (cut) S 1") is None


def test_kernel_stack_reads_outermost_first_without_offsets():
    frames = procfs.parse_stack(FUSE_STACK)
    assert frames[0] == "entry_SYSCALL_64_after_hwframe" and frames[-1] == "request_wait_answer"
    assert "fuse_direct_io" in frames and not any("+" in f for f in frames)


def test_schedstat_gives_cpu_and_run_queue_nanoseconds():
    assert procfs.parse_schedstat("213076398 41550507 580\n") == (213076398, 41550507)
    assert procfs.parse_schedstat("garbage") is None


@pytest.mark.parametrize("comm,cls", [("Executor task l", "task"), ("GC Thread#3", "gc"), ("G1 Conc#0", "gc"),
                                      ("VM Thread", "gc"), ("C2 CompilerThre", "jit"), ("C1 CompilerThre", "jit"),
                                      ("dispatcher-Exec", "other"), ("shuffle-client-", "other"),
                                      ("Executor task r", "other"), ("", "other")])
def test_task_threads_are_told_from_jvm_service_threads_by_name(comm, cls):
    # "Executor task reaper" is a service thread that shares the first 14 characters.
    assert thread_class(comm) == cls


def test_an_executor_command_line_names_its_application_executor_and_driver_port():
    jvm = from_cmdline(10, 99, EXECUTOR_ARGV)
    assert (jvm.executor_id, jvm.app_id, jvm.driver_port) == ("1", "app-20261123183936-0000", 45843)
    yarn = [a.replace("CoarseGrained", "YarnCoarseGrained") for a in EXECUTOR_ARGV]
    assert from_cmdline(10, 99, yarn).app_id == "app-20261123183936-0000"


def test_a_driver_is_found_without_its_id_and_other_processes_are_not_spark():
    driver = from_cmdline(11, 5, DRIVER_ARGV)
    assert (driver.executor_id, driver.app_id, driver.ui_port) == ("driver", None, 4321)
    assert from_cmdline(12, 5, ["/usr/bin/python3", "-m", "org.apache.spark.deploy.SparkSubmit"]) is None
    assert from_cmdline(13, 5, ["java", "-jar", "kafka.jar"]) is None
    assert from_cmdline(14, 5, EXECUTOR_ARGV[:-12]) is None  # no --app-id


def test_a_driver_takes_the_id_of_the_executors_that_name_its_port_before_asking_any_ui():
    driver = SparkJvm(20, 1, "driver", None)
    executor = SparkJvm(21, 1, "0", "app-1", driver_port=45843)
    asked: list[int] = []
    got = resolve_driver(driver, [executor], ask_ui=lambda p: asked.append(p) or None,
                         ports_of=lambda pid: {45843, 4040})
    assert got == "app-1" and asked == []


def test_a_local_mode_driver_is_named_by_its_ui_and_only_ui_ports_are_asked():
    driver = SparkJvm(20, 1, "driver", None, ui_port=30000)
    asked: list[int] = []

    def ui(port: int):
        asked.append(port)
        return "local-1795459168141" if port == 4041 else None

    got = resolve_driver(driver, [], ask_ui=ui, ports_of=lambda pid: {4040, 4041, 30000, 38111})
    assert got == "local-1795459168141"
    assert 38111 not in asked  # a Py4J or RPC port is never sent HTTP
    assert resolve_driver(driver, [], ask_ui=lambda p: None, ports_of=lambda pid: {38111}) is None


def test_a_period_becomes_averages_per_class_top_waits_and_an_offcpu_profile():
    period = JvmPeriod(samples=4)
    for _ in range(4):
        period.add("task", "disk")
        period.add("other", "sleeping")
    period.add("task", "running")
    period.cpu_ns["task"] = 5_000_000_000
    period.waits["disk", "request_wait_answer"] = 4
    for i in range(7):
        period.waits["sleeping", f"wait_{i}"] = 1
    period.stacks[("D: uninterruptible wait (disk, FUSE, NFS)", *procfs.parse_stack(FUSE_STACK))] = 4
    out = periods.lines("app-1", "0", period, 10_000_000_000, 10.0, 0.25)
    task = next(line for line in out if line.startswith("sparkscope_threads,applicationid=app-1,executorid=0,class=task "))
    assert "running=0.25,disk=1.0,sleeping=0.0" in task and "threads=1.25" in task and "on_cpu=0.5," in task
    assert task.endswith(" 10000000000") and "samples=4i" in task
    waits = [line for line in out if line.startswith("sparkscope_thread_waits")]
    assert len(waits) == periods.TOP_WAITS  # bounded, however many channels
    assert "io=0.0,network=0.0,lock=0.0,other_wait=0.0" in task  # no kinds counted in this made-up period
    assert waits[0].startswith("sparkscope_thread_waits,applicationid=app-1,executorid=0,state=disk,"
                               "wchan=request_wait_answer threads=1.0,seconds=10.0 ")
    flame = [line for line in out if line.startswith("sparkscope_flame,")]
    assert flame and all(",kind=offcpu " in line for line in flame)
    assert any('label="request_wait_answer"' in line for line in flame)
    # 4 samples 250 ms apart: one second of off-CPU time in ns at the root.
    assert "value=1000000000i" in flame[0]
    profile = next(line for line in out if line.startswith("sparkscope_profiles,"))
    assert "samples=4i" in profile and 'top="request_wait_answer"' in profile


# --------------------------------------------------------------- a /proc tree in a temporary directory

def fake_jvm(proc: Path, pid: int, argv: list[str], threads: dict[int, tuple[str, str]]) -> None:
    """A process dir: cmdline, stat, and one task dir per thread (name, state letter)."""
    base = proc / str(pid)
    (base / "task").mkdir(parents=True)
    (base / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    (base / "stat").write_text(GC_STAT.replace("26093 (GC Thread#0)", f"{pid} (java)"))
    (base / "comm").write_text("java\n")
    for tid, (comm, state) in threads.items():
        task = base / "task" / str(tid)
        task.mkdir()
        (task / "comm").write_text(comm + "\n")
        (task / "stat").write_text(GC_STAT.replace("(GC Thread#0) S", f"({comm}) {state}"))
        (task / "wchan").write_text("request_wait_answer" if state == "D" else "futex_do_wait")
        (task / "schedstat").write_text("1000 2000 3\n")
        (task / "stack").write_text(FUSE_STACK)


def test_threads_that_vanish_or_hold_garbage_are_skipped_and_counted_and_the_rest_kept(tmp_path):
    fake_jvm(tmp_path, 100, EXECUTOR_ARGV, {101: ("Executor task l", "D"), 102: ("GC Thread#0", "S"),
                                            103: ("Executor task l", "R"), 104: ("dispatcher-Exec", "S"),
                                            105: ("netty", "S"), 106: ("garbled", "S")})
    (tmp_path / "101" / "cmdline").parent.mkdir()  # a process that is gone but for its dir: no cmdline
    sampler = Sampler(kernel_stacks=True, proc=str(tmp_path))
    sampler.refresh()
    assert [s.jvm.app_id for s in sampler.jvms.values()] == ["app-20261123183936-0000"]
    shutil.rmtree(tmp_path / "100" / "task" / "105")  # exited before the listing: not seen at all
    (tmp_path / "100" / "task" / "106" / "stat").write_text("106 (garbled")
    sampler.sample()
    # One that exits after the listing, before its stat is read again: /proc then answers its open
    # file with an error, which a regular file cannot do; an empty read is the closest a file gets.
    (tmp_path / "100" / "task" / "104" / "stat").write_text("")
    sampler.sample()
    assert sampler.skipped == 2 + 1  # 106 garbled in both samples, 104 in the second
    state = next(iter(sampler.jvms.values()))
    assert 104 not in state.stat_fds  # its file was closed, not kept
    period = next(iter(sampler.jvms.values())).period
    assert period.samples == 2
    assert period.states["task", "disk"] == 2 and period.states["task", "running"] == 2
    assert period.states["gc", "sleeping"] == 2 and period.states["other", "sleeping"] == 1
    assert period.waits == Counter({("disk", "request_wait_answer"): 2})  # task threads only
    assert period.kinds == Counter({"io": 2})
    assert sum(period.stacks.values()) == 2


def test_an_executor_that_exits_is_written_once_then_forgotten(tmp_path):
    fake_jvm(tmp_path, 100, EXECUTOR_ARGV, {101: ("Executor task l", "R")})
    sampler = Sampler(proc=str(tmp_path))
    sampler.refresh()
    sampler.sample()
    fds = list(next(iter(sampler.jvms.values())).stat_fds.values())
    assert fds
    shutil.rmtree(tmp_path / "100")
    sampler.refresh()
    sampler.sample()  # gone: nothing read, nothing raised
    out = sampler.close_period(1_000, 10.0, 0.25)
    assert any("class=task running=1.0" in line for line in out), "what was measured before it exited is lost"
    sampler.refresh()
    assert sampler.jvms == {} and sampler.discovery.known == {}
    for fd in fds:  # every stat file it held open is closed
        with pytest.raises(OSError):
            os.fstat(fd)
    assert sampler.close_period(2_000, 10.0, 0.25) == []


def test_a_failing_step_is_said_once_and_counted_and_sampling_goes_on(capsys):
    errors = Errors()

    def broken():
        raise ValueError("odd /proc")

    assert errors.guard("sampling", broken) is None
    assert errors.guard("sampling", broken) is None
    assert errors.guard("sampling", lambda: 7) == 7
    assert errors.count == 2
    assert capsys.readouterr().err.count("sampling failed (ValueError: odd /proc)") == 1


def test_discovery_reads_each_command_line_once(tmp_path, monkeypatch):
    fake_jvm(tmp_path, 100, EXECUTOR_ARGV, {101: ("Executor task l", "R")})
    reads: list[int] = []
    real = procfs.cmdline
    monkeypatch.setattr(procfs, "cmdline", lambda pid, proc=procfs.PROC: reads.append(pid) or real(pid, proc))
    discovery = Discovery(str(tmp_path))
    for _ in range(5):
        assert [j.executor_id for j in discovery.scan()] == ["1"]
    # Once, with its parent's (25934 in the stat above) to tell a fork caught before its exec.
    assert reads == [100, 25934]



def test_a_launcher_script_that_execs_an_executor_is_found_once_it_has(tmp_path):
    """spark-submit and spark-class are bash scripts that exec java in the same
    process (same pid, same start time): a scan that lands before the exec sees
    bash, and the process must not stay "not Spark" for the rest of its life.
    A real exec, in the real /proc."""
    go = tmp_path / "go"
    script = (f"while [ ! -e {go} ]; do sleep 0.05; done; "
              f"exec -a java {sys.executable} -c 'import time; time.sleep(60)' "
              + " ".join(EXECUTOR_ARGV[EXECUTOR_ARGV.index("org.apache.spark.executor.CoarseGrainedExecutorBackend"):]))
    launcher = subprocess.Popen(["bash", "-c", script])
    try:
        # The first scan must land on bash, as it says: before Popen's child has
        # exec'd bash it is a fork of this python, as named as the python it
        # execs at the end, and a name that comes back cannot tell an exec.
        comm = Path(f"/proc/{launcher.pid}/comm")
        deadline = time.monotonic() + 30
        while comm.read_text().strip() != "bash" and time.monotonic() < deadline:
            time.sleep(0.01)
        discovery = Discovery()
        assert launcher.pid not in {j.pid for j in discovery.scan()}
        assert launcher.pid in discovery.known  # seen, and judged not Spark (yet)
        go.touch()
        deadline = time.monotonic() + 30
        found: list[SparkJvm] = []
        while not found and time.monotonic() < deadline:
            time.sleep(0.1)
            found = [j for j in discovery.scan() if j.pid == launcher.pid]
        assert [(j.executor_id, j.app_id) for j in found] == [("1", "app-20261123183936-0000")]
    finally:
        launcher.kill()
        launcher.wait()

def test_a_jvm_s_child_caught_before_its_exec_is_not_taken_for_the_jvm(tmp_path):
    """A Spark JVM forks all the time (pgrep for the process-tree metrics on
    every poll, PySpark's workers), and until the child execs it has the
    JVM's command line. Taken for the executor, its period point (same tags,
    same time) overwrote the executor's own: a CI run saw an executor with
    one sample and no task threads in the middle of its tasks. A real fork,
    in the real /proc, that never execs."""
    script = "import os, sys, time\nchild = os.fork()\nif child == 0:\n    time.sleep(60)\n    os._exit(0)\n" \
             "print(child, flush=True)\ntime.sleep(60)\n"
    args = EXECUTOR_ARGV[EXECUTOR_ARGV.index("org.apache.spark.executor.CoarseGrainedExecutorBackend"):]
    jvm = subprocess.Popen(["bash", "-c", f"exec -a java {sys.executable} -c \"$0\" \"$@\"", script, *args],
                           stdout=subprocess.PIPE, text=True)
    try:
        child = int(jvm.stdout.readline())
        assert procfs.cmdline(child) == procfs.cmdline(jvm.pid)  # the child looks like the executor
        discovery = Discovery()
        found = [j for j in discovery.scan() if j.pid in (jvm.pid, child)]
        assert [(j.pid, j.executor_id) for j in found] == [(jvm.pid, "1")]
        assert discovery.known[child][1] is None  # seen, judged not Spark
    finally:
        jvm.kill()
        jvm.wait()


# --------------------------------------------------------------- privileges and wiring

@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None or not Path("/usr/bin/python3").exists(),
                    reason="needs root, setpriv and the system python3 to run as an unprivileged user")
def test_an_unprivileged_user_is_told_kernel_stacks_need_root_and_states_go_on():
    done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c",
                           "from sparkscope.probes.threadprobe.readiness import why_no_kernel_stacks; "
                           "print(why_no_kernel_stacks())"],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(readable_source())),
                          cwd="/")
    assert done.returncode == 0, done.stderr
    assert "needs root" in done.stdout and "thread states and wait channels are sampled all the same" in done.stdout


def test_up_leaves_the_sampler_off_when_the_user_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("THREADPROBE_ENABLED", "false")
    said: list[str] = []
    assert NativeBackend(isolated_settings(tmp_path)).start_threadprobe(said.append) is False
    assert said == ["threadprobe off (THREADPROBE_ENABLED=false)"]


def test_the_sampler_itself_exits_quietly_when_switched_off():
    done = subprocess.run([sys.executable, "-m", "sparkscope.probes.threadprobe"], capture_output=True, text=True,
                          env=dict(os.environ, THREADPROBE_ENABLED="false", PYTHONPATH=str(ROOT / "src")), timeout=60)
    assert done.returncode == 0 and "off (THREADPROBE_ENABLED=false)" in done.stderr


def test_status_names_the_thread_sampler_under_telegraf(stack):
    rows = {row.name: row for row in NativeBackend(stack.settings).status()}
    running = native.PidFile(stack.settings.state_dir, native.THREADPROBE).running_pid()
    assert running, "up did not start the thread sampler"
    assert f"threadprobe: pid {running}, thread states of Spark JVMs" in rows["telegraf"].detail


def test_collapsed_text_of_py_spy_parses_with_the_shared_flame_parser():
    # py-spy record --format raw, as it writes (function (file:line);... count)
    raw = ('process 4242:"python3 -m pyspark.daemon";<module> (pyspark/daemon.py:212);'
           'burn_in_python (job.py:14) 37\n')
    assert parse_collapsed(raw.splitlines()) == {
        ('process 4242:"python3 -m pyspark.daemon"', "<module> (pyspark/daemon.py:212)",
         "burn_in_python (job.py:14)"): 37}


@pytest.mark.parametrize("state,wchan,kind", [
    ("sleeping", "request_wait_answer", "io"),  # FUSE: interruptible, yet I/O
    ("disk", "", "io"), ("disk", "folio_wait_bit_common", "io"), ("sleeping", "rpc_wait_bit_killable", "io"),
    ("sleeping", "wait_woken", "network"), ("sleeping", "sk_wait_data", "network"),
    ("sleeping", "futex_do_wait", "lock"), ("sleeping", "futex_wait_queue", "lock"),
    ("sleeping", "hrtimer_nanosleep", "other_wait"), ("sleeping", "", "other_wait")])
def test_off_cpu_task_threads_are_told_by_what_their_wait_channel_waits_for(state, wchan, kind):
    assert periods.wait_kind(state, wchan) == kind


def test_past_the_open_files_budget_threads_are_still_sampled_with_one_shot_reads(tmp_path):
    fake_jvm(tmp_path, 100, EXECUTOR_ARGV, {tid: ("Executor task l", "R") for tid in range(101, 111)})
    sampler = Sampler(proc=str(tmp_path))
    sampler.max_open = 3
    sampler.refresh()
    sampler.sample()
    sampler.sample()
    state = next(iter(sampler.jvms.values()))
    assert len(state.stat_fds) == sampler.open_files == 3
    assert state.period.states["task", "running"] == 20 and sampler.skipped == 0
    sampler.close_period(1_000, 10.0, 0.25)
    sampler.close_files(state)
    assert sampler.open_files == 0


def test_listening_ports_are_found_past_the_first_page_of_the_socket_table():
    # /proc/<pid>/net/tcp gives at most a page per read: with 80 listeners
    # (about 150 bytes a row) most of the table lies past the first page.
    import socket

    listeners = []
    try:
        for _ in range(80):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            s.listen()
            listeners.append(s)
        ports = {s.getsockname()[1] for s in listeners}
        assert ports <= jvms.listening_ports(os.getpid())
    finally:
        for s in listeners:
            s.close()


def test_a_driver_left_nameless_is_said_once_after_its_start_up_and_again_when_named(tmp_path, monkeypatch):
    pid = 99_999_999  # no such pid in the real /proc, whose sockets listening_ports reads
    fake_jvm(tmp_path, pid, DRIVER_ARGV, {pid: ("main", "S")})
    now = [1000.0]
    monkeypatch.setattr(jvms.time, "monotonic", lambda: now[0])
    discovery = Discovery(str(tmp_path))
    assert discovery.scan() == [] and discovery.messages == []  # starting up: UI and executors come later
    now[0] += jvms.NAME_GRACE_S + 1
    discovery.scan()
    discovery.scan()
    assert len(discovery.messages) == 1 and "application id not known" in discovery.messages[0]
    monkeypatch.setattr(jvms, "resolve_driver", lambda jvm, executors: "local-1795459168141")
    assert [j.app_id for j in discovery.scan()] == ["local-1795459168141"]
    assert discovery.messages[-1] == f"driver pid {pid}: application local-1795459168141, sampled from now on"


def test_the_sampler_comes_back_after_an_uncaught_error_with_a_growing_pause(capsys):
    from sparkscope.probes.threadprobe import sampler
    calls, pauses = [], []

    def start() -> int:
        calls.append(1)
        if len(calls) < 4:
            raise OSError(f"crash {len(calls)}")
        return 0

    assert sampler.run_with_restarts(start, backoff_s=(1, 2, 4), sleep=pauses.append) == 0
    assert len(calls) == 4 and pauses == [1, 2, 4]
    said = capsys.readouterr().err + capsys.readouterr().out
    assert "starting again in 4 s (restart 3)" in said


def test_one_period_sends_at_most_its_bound_and_counts_the_cut():
    from sparkscope.probes.threadprobe import sampler
    lines = [f"x v={n}i" for n in range(sampler.MAX_LINES_PER_PERIOD + 123)]
    kept, cut = sampler.bounded(lines)
    assert len(kept) == sampler.MAX_LINES_PER_PERIOD and cut == 123 and kept[0] == lines[0]
    assert sampler.bounded(lines[:10]) == (lines[:10], 0)
