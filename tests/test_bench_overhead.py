"""bench/overhead.py's attribution of Spark's CPU to the threads that used it,
read from a /proc tree made here: a driver JVM whose worker thread started an
executor JVM and a pgrep, as local-cluster does."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_overhead():
    spec = importlib.util.spec_from_file_location("bench_overhead", ROOT / "bench" / "overhead.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def stat(pid: int, name: str, ppid: int, utime: int, stime: int = 0, cutime: int = 0) -> str:
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime
    return f"{pid} ({name}) S {ppid} 0 0 0 0 0 0 0 0 0 {utime} {stime} {cutime} 0 20 0 1 0 100\n"


def process(proc: Path, pid: int, ppid: int, comm: str, threads: dict[int, tuple[str, int]], cutime: int = 0,
            children: dict[int, list[int]] | None = None) -> None:
    (proc / str(pid)).mkdir(parents=True, exist_ok=True)
    total = sum(ticks for _, ticks in threads.values())
    (proc / str(pid) / "stat").write_text(stat(pid, comm, ppid, total, cutime=cutime))
    for tid, (name, ticks) in threads.items():
        task = proc / str(pid) / "task" / str(tid)
        task.mkdir(parents=True, exist_ok=True)
        (task / "stat").write_text(stat(tid, name, ppid, ticks))
        (task / "children").write_text(" ".join(map(str, (children or {}).get(tid, []))))


def gone(proc: Path, pid: int) -> None:
    for path in sorted((proc / str(pid)).rglob("*"), key=lambda p: -len(p.parts)):
        path.unlink() if path.is_file() else path.rmdir()
    (proc / str(pid)).rmdir()


def test_threads_are_summed_by_part_and_the_drivers_reaped_executor_is_not_counted_as_pgrep(tmp_path):
    overhead = load_overhead()
    proc = tmp_path / "proc"
    # The driver (pid 100): its worker thread 102 started the executor (200); 30 ticks of pgrep reaped so far.
    driver = {100: ("java", 50), 101: ("spark-listener-", 7), 102: ("dispatcher-Coar", 4)}
    process(proc, 100, 1, "java", driver, cutime=30, children={102: [200]})
    process(proc, 200, 100, "java", {200: ("java", 20), 201: ("Executor task l", 300), 202: ("C2 CompilerThre", 90)},
            cutime=12, children={201: [300]})
    process(proc, 300, 200, "python3", {300: ("python3", 40)})
    cpu = overhead.ThreadCpu(100, proc=str(proc))
    assert sorted(cpu.descendants()) == [100, 200, 300]  # the executor is found under the thread that started it
    cpu.sample()
    # The executor ends and the driver reaps it: its 450 ticks land in the driver's cutime.
    gone(proc, 300)
    gone(proc, 200)
    process(proc, 100, 1, "java", {**driver, 101: ("spark-listener-", 9)}, cutime=30 + 450 + 12 + 40,
            children={102: []})
    cpu.sample()
    seconds = {part: round(s * overhead.procstat.CLOCK_TICKS) for part, s in cpu.seconds_by_part().items()}
    assert seconds["tasks"] == 300 and seconds["JIT"] == 90 and seconds["Python"] == 40
    assert seconds["listener bus"] == 9  # the last reading
    assert seconds["scheduling, RPC"] == 4 and seconds["JVM main thread"] == 70
    # pgrep: the driver's 30 ticks as read while its executor lived, and the executor's own 12.
    assert seconds[overhead.CHILDREN] == 42, seconds


def test_a_thread_is_put_where_its_name_says():
    overhead = load_overhead()
    assert overhead.thread_part("sparkscope-anno") == "sparkscope threads"
    assert overhead.thread_part("metrics-graphit") == "metrics sink"
    assert overhead.thread_part("executor-metri") == "metrics polling"
    assert overhead.thread_part("G1 Conc#0") == "GC"
    assert overhead.thread_part("Finalizer") == "other JVM threads"


def test_bpftrace_s_counts_are_read_and_anything_else_is_not():
    overhead = load_overhead()
    counts = {"processes": 0, "threads": 0}
    assert overhead.parse_task_counts("@processes: 17", counts) and overhead.parse_task_counts("@threads: 940", counts)
    assert counts == {"processes": 17, "threads": 940}
    for other in ("22:01:05", "Attaching 3 probes...", "@processes: many", "@other: 3"):
        assert not overhead.parse_task_counts(other, counts)
    assert counts == {"processes": 17, "threads": 940}


def test_threads_started_are_not_counted_as_processes_started():
    """/proc/stat counts a thread as a process started; the bench's counter tells them
    apart, so a JVM's new threads no longer read as forks (pgrep) in its figures."""
    import os
    import shutil
    import subprocess
    import threading
    import pytest
    if os.geteuid() != 0 or not shutil.which("bpftrace"):
        pytest.skip("needs root and bpftrace (the suite installs bpftrace from apt)")
    overhead = load_overhead()
    counter = overhead.TaskCounter()
    why = counter.start()
    assert why is None, why
    try:
        processes, threads = counter.now()
        for _ in range(3):
            subprocess.run(["true"], check=True)
        made = [threading.Thread(target=lambda: None) for _ in range(500)]
        for t in made:
            t.start()
            t.join()
        processes2, threads2 = counter.now()
        assert processes2 - processes >= 3
        assert threads2 - threads >= 500
        assert processes2 - processes < 500, "threads counted as processes"
    finally:
        counter.stop()
    assert counter.proc is None


def test_event_lines_are_read_and_counts_are_not_taken_for_events():
    overhead = load_overhead()
    assert overhead.parse_task_event("P 10 11") == ("P", 10, "11")
    assert overhead.parse_task_event("T 10 12") == ("T", 10, "12")
    assert overhead.parse_task_event("E 11 /usr/bin/chmod") == ("E", 11, "/usr/bin/chmod")
    for other in ("@processes: 17", "P ten 11", "T 10 x", "22:01:05", "X 1 2"):
        assert overhead.parse_task_event(other) is None, other


def test_a_runs_processes_are_those_of_its_own_tree_not_the_machines():
    """What another program starts meanwhile (a shell, a git) is not the run's: the
    count follows spark-submit's descendants, and names the programs they ran."""
    import os
    import shutil
    import subprocess
    import pytest
    if os.geteuid() != 0 or not shutil.which("bpftrace"):
        pytest.skip("needs root and bpftrace (the suite installs bpftrace from apt)")
    overhead = load_overhead()
    counter = overhead.TaskCounter()
    assert counter.start() is None
    try:
        mark = counter.mark()
        run = subprocess.Popen(["bash", "-c", "/bin/true; /bin/true; (/bin/sleep 0.2); wait"])
        for _ in range(5):  # the rest of the machine, meanwhile
            subprocess.run(["/bin/true"], check=True)
        run.wait()
        processes, threads, programs = counter.tree(run.pid, mark)
    finally:
        counter.stop()
    assert programs.get("/bin/true", 0) + programs.get("/usr/bin/true", 0) == 2, programs
    assert programs.get("/bin/sleep", 0) + programs.get("/usr/bin/sleep", 0) == 1, programs
    assert 3 <= processes <= 4, (processes, programs)  # true, true, the subshell and its sleep
    assert threads == 0
