"""`sparkscope top`: the screen drawn from what InfluxDB holds, at 80x24 and
200x50. The view and the keys are checked without a terminal; then the real
command runs in tmux against the session's stack: a finished run (values
equal to InfluxDB's), a job while it runs, InfluxDB going away and coming
back, a crafted run id, and the disks view's histogram against the stored
counts."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid

import pytest

from sparkscope.provision.annotator_jar import ensure_annotator_jar
from sparkscope.spark.conf import annotator_properties, sparkscope_properties
from sparkscope.spark.submit import spark_env, submit_argv
from sparkscope.store import influx
from sparkscope.stack.native import NativeBackend
from sparkscope.settings import ROOT
from sparkscope.top import data, view
from sparkscope.top.command import keys_of, press
from sparkscope.top.data import Activity, DiskNow, DisksSnapshot, ExecutorNow, Histogram, Run, Snapshot
from sparkscope.top.view import Screen, as_text

from conftest import JOBS, SINK_PERIOD_S, Stack, run_spark_job
from sparkscope_testkit.sandbox import settings_environ, throwaway_stack
from sparkscope_testkit.terminal import Terminal, needs_tmux

GiB, MiB = 2**30, 2**20


# --- the view, from plain values ----------------------------------------------------------

def executor(executor_id: str, heap: float, **values) -> ExecutorNow:
    base = dict(active_tasks=1, cores=2, heap_max=4 * GiB, rss_jvm=3 * GiB, rss_python=200 * MiB,
                rss_other=0, execution=100 * MiB, storage=50 * MiB, gc_ms_per_s=50, shuffle_read=2 * MiB,
                shuffle_write=MiB, heap_history=[GiB, 2 * GiB, heap], last_ms=1_000)
    base.update(values)
    return ExecutorNow(executor_id, heap_used=heap, **base)


def snapshot(executors: list[ExecutorNow], **values) -> Snapshot:
    base = dict(run=Run("app-1", "nightly etl", 0), at_ms=65_000, running={}, last={}, stragglers=[],
                removed=[], interval_s=5)
    base.update(values)
    return Snapshot(executors=executors, **base)


def rows_of(text: str, ids) -> list[str]:
    """The executor ids in the order the table lists them."""
    return [line.split()[0] for line in text.splitlines() if line.split() and line.split()[0] in ids]


def test_the_table_lists_executors_by_heap_and_fits_80x24():
    execs = [executor(str(n), heap=(n % 7 + 1) * 300 * MiB) for n in range(40)] + [executor("driver", GiB)]
    screen = Screen(snapshot=snapshot(execs))
    text = as_text(screen, 80, 24)
    lines = text.splitlines()
    assert len(lines) <= 24 and max(len(line) for line in lines) <= 80, text
    shown = rows_of(text, {e.executor_id for e in execs})
    heaps = {e.executor_id: e.heap_used for e in execs}
    assert len(shown) >= 12 and [heaps[i] for i in shown] == sorted((heaps[i] for i in shown), reverse=True)
    assert "executors 1-" in text and "of 41" in text  # more rows than room: it says so
    assert "2.1G/4.0G" in text  # 7 x 300 MiB of 4 GiB


def test_wider_terminals_get_rss_by_process_and_the_heap_history():
    screen = Screen(snapshot=snapshot([executor("1", 2 * GiB)]))
    narrow, wide = as_text(screen, 80, 24), as_text(screen, 200, 50)
    assert "Python" not in narrow and "heap history" not in narrow
    header = next(line for line in wide.splitlines() if "Python" in line)
    assert "JVM" in header and "other" in header and "heap history" in header
    row = next(line for line in wide.splitlines() if line.startswith("1 "))
    assert "200M" in row and "3.2G" in row  # Python alone, and JVM + Python + other
    assert view.sparkline([GiB, 2 * GiB, 2 * GiB], 4 * GiB) in row


def test_the_header_names_the_run_and_what_runs_now():
    stage = Activity("stage", "4.0", "stage 4.0 running: sum at etl.py:26 (8 tasks)", 60_000, "RUNNING")
    query = Activity("query", "2", "query 2: count at etl.py:20 (3.0 s)", 10_000, "SUCCEEDED")
    snap = snapshot([executor("1", GiB, cores=4, active_tasks=3), executor("2", GiB, cores=4, active_tasks=4)],
                    running={"stage": [stage]}, last={"query": query})
    text = as_text(Screen(snapshot=snap), 80, 24)
    assert "app-1" in text and "nightly etl" in text and "running 1m05s" in text
    assert "executors 2  tasks 7 of 8 slots" in text
    # An executor whose cores are not known yet (its `added` event comes a refresh
    # later): no total that would count the others' slots alone.
    snap.executors[1].cores = None
    assert "executors 2  tasks 7" in as_text(Screen(snapshot=snap), 80, 24)
    assert "slots" not in as_text(Screen(snapshot=snap), 80, 24)
    snap.executors[1].cores = 4
    assert "stage 4.0 running: sum at etl.py:26" in text
    assert "last: query 2: count at etl.py:20" in text


def test_a_run_whose_driver_went_silent_is_shown_as_no_end_seen_not_running():
    killed = Run("app-1", "nightly etl", 0, ended_ms=40_000, ending="NO_END_SEEN")
    text = as_text(Screen(snapshot=snapshot([executor("1", GiB)], run=killed)), 80, 24)
    assert "no end seen" in text and "running" not in text.split("\n")[0]


def test_flags_name_stragglers_lost_executors_and_memory_near_its_limit():
    straggler = Activity("stage", "3.0", "stage 3.0: ...", 1_000, "SUCCEEDED",
                         {"name": "join at etl.py:9", "task_max_ms": 9_100, "task_p50_ms": 800,
                          "slowest_executor": "7", "straggler": "true"})
    snap = snapshot([executor("1", 3.8 * GiB), executor("2", GiB, limit=3 * GiB)], stragglers=[straggler],
                    removed=[{"time": 30_000, "executor_id": "5", "reason": "Container killed: exit code 137"}])
    text = as_text(Screen(snapshot=snap), 200, 50)
    assert "STRAGGLER stage 3.0 join at etl.py:9: slowest task 9.1s vs median 800ms, on executor 7" in text
    assert "LOST executor 5" in text and "Container killed: exit code 137" in text
    assert "MEMORY executor 1: heap 3.8G of 4.0G (95%)" in text
    assert "MEMORY executor 2: RSS 3.2G of a 3.0G container" in text


def test_a_measured_working_set_is_judged_against_the_measured_limit_and_shown_beside_it():
    """Where the container plugin read the cgroup, its working set (what the OOM
    killer judges) is the flag's measure, not the process tree's RSS."""
    near = executor("2", GiB, limit=2 * GiB, working_set=1.9 * GiB, rss_jvm=GiB, rss_python=0)
    roomy = executor("3", GiB, limit=2 * GiB, working_set=GiB, rss_jvm=1.9 * GiB, rss_python=0)
    text = as_text(Screen(snapshot=snapshot([near, roomy])), 200, 50)
    assert "MEMORY executor 2: working set 1.9G of a 2.0G container (95%)" in text
    assert "MEMORY executor 3" not in text  # its RSS counts shared file pages the kernel can reclaim
    header = next(line for line in text.splitlines() if line.startswith("executor "))
    assert "wset" in header and "limit" in header
    assert "wset" not in as_text(Screen(snapshot=snapshot([executor("1", GiB)])), 200, 50)


def test_an_executor_removed_when_the_run_ended_is_not_flagged_lost():
    run = Run("app-1", "x", 0, ended_ms=50_000)
    snap = snapshot([executor("1", GiB)], run=run, removed=[{"time": 50_000, "executor_id": "1", "reason": "stop"}])
    assert "LOST" not in as_text(Screen(snapshot=snap), 200, 50)


def test_names_from_the_database_are_shown_literally_without_control_characters():
    run = Run("x' OR '1'='1", "[bold red]evil[/] \x1b[2J\x1b]0;title\x07", 0)
    text = as_text(Screen(snapshot=snapshot([executor("[b]1\x1b[H", GiB)], run=run)), 200, 50)
    assert "x' OR '1'='1" in text and "[bold red]evil[/]" in text
    assert "\x1b" not in text and "\x07" not in text
    assert "[b]1" in text


def test_keys_sort_scroll_switch_views_and_quit():
    screen = Screen(snapshot=snapshot([executor(str(n), GiB) for n in range(3)]))
    assert keys_of("m\x1b[Bq\x1b") == ["m", "down", "q", "esc"]
    assert keys_of("\x1b[5~\x1bOA\x1b[1;5Cx") == ["pgup", "up", "x"]  # unknown sequences are skipped whole
    assert press(screen, "t") == "fetch" and (screen.sort, screen.descending) == ("t", True)
    assert press(screen, "t") == "fetch" and screen.descending is False  # again: the other way
    press(screen, "e")
    assert rows_of(as_text(screen, 80, 24), {"0", "1", "2"}) == ["0", "1", "2"]
    press(screen, "e")
    assert rows_of(as_text(screen, 80, 24), {"0", "1", "2"}) == ["2", "1", "0"]
    assert press(screen, "d") == "fetch" and screen.mode == "disks"
    assert press(screen, "p") == "fetch" and screen.mode == "pick"
    screen.runs = [Run("app-2", "b", 0), Run("app-1", "a", 0, 5)]
    assert press(screen, "down") == "draw" and screen.picked == 1
    assert press(screen, "enter") == "fetch" and screen.chosen.app_id == "app-1" and screen.mode == "run"
    assert press(screen, "q") == "quit"


def test_many_executors_scroll():
    screen = Screen(snapshot=snapshot([executor(str(n), GiB + n) for n in range(300)]))
    first = rows_of(as_text(screen, 80, 24), {str(n) for n in range(300)})
    press(screen, "pgdn")
    second = rows_of(as_text(screen, 80, 24), {str(n) for n in range(300)})
    assert first[0] == "299" and second[0] == first[10]
    press(screen, "end")
    last = rows_of(as_text(screen, 80, 24), {str(n) for n in range(300)})
    assert last[-1] == "0"


def test_the_banner_keeps_the_last_data_on_screen():
    screen = Screen(snapshot=snapshot([executor("1", GiB)]), error="InfluxDB not reachable at 127.0.0.1:1",
                    updated_ms=1_000)
    lines = as_text(screen, 80, 24).splitlines()
    assert "retrying every 5 s" in lines[0] and "InfluxDB not reachable" in lines[0] + lines[1]
    assert any(line.startswith("1 ") for line in lines)


def test_the_histogram_is_drawn_as_bpftrace_draws_log2_buckets():
    hist = Histogram("h", "sda", "read", 1_000, {64: 10, 128: 40, 512: 5})
    lines = [line.plain for line in view.histogram_lines(hist, 80)]
    assert [line.split("|")[0].split() for line in lines] == [
        ["[32,", "64)", "10"], ["[64,", "128)", "40"], ["[128,", "256)", "0"], ["[256,", "512)", "5"]]
    ats = [line.split("|")[1].count("@") for line in lines]
    assert ats[1] == max(ats) and ats[2] == 0 and ats[0] == round(10 / 40 * ats[1])
    assert view.histogram_lines(Histogram("h", "sda", "read", 0, {2048: 1}), 80)[0].plain.startswith("[1K, 2K)")


def test_the_disks_view_lists_devices_busiest_first_with_await():
    disks = [DiskNow("h", "sda", reads=100, writes=50, read_bytes=4 * MiB, busy=0.25, await_ms=2.5),
             DiskNow("h", "nvme0n1", reads=900, busy=0.8, await_ms=0.1), DiskNow("h", "loop3")]
    screen = Screen(mode="disks", disks=DisksSnapshot(0, disks, [], [], 10), snapshot=snapshot([]))
    text = as_text(screen, 80, 24)
    assert "loop3" not in text  # an idle loop device is left out
    assert text.index("nvme0n1") < text.index("sda")
    assert re.search(r"sda\s+100\s+50\s+4\.0M\s+0\s+25%\s+2\.5ms", text), text


# --- the reads, from InfluxDB's answers ----------------------------------------------------

def test_what_runs_now_is_a_running_point_without_its_end():
    rows = [
        {"_measurement": "sparkscope_stage", "status": "RUNNING", "time": 10, "stage_id": 1, "attempt": 0,
         "text": "stage 1.0 running: a"},
        {"_measurement": "sparkscope_stage", "status": "SUCCEEDED", "straggler": "true", "time": 10, "stage_id": 1,
         "attempt": 0, "text": "stage 1.0: a", "end_time_ms": 20},
        {"_measurement": "sparkscope_stage", "status": "RUNNING", "time": 30, "stage_id": 2, "attempt": 0,
         "text": "stage 2.0 running: b"},
        {"_measurement": "sparkscope_job", "status": "RUNNING", "time": 5, "job_id": 0, "text": "job 0 running"},
        {"_measurement": "sparkscope_executor", "event": "removed", "time": 25, "executor_id": "3", "reason": "lost"},
    ]
    running, last, stragglers, removed = data.split_annotations(rows)
    assert [a.key for a in running["stage"]] == ["2.0"] and [a.key for a in running["job"]] == ["0"]
    assert last["stage"].key == "1.0" and [a.key for a in stragglers] == ["1.0"]
    assert running["query"] == [] and last["query"] is None
    assert [r["executor_id"] for r in removed] == ["3"]


def test_a_container_limit_is_known_on_yarn_and_kubernetes_only():
    assert data.container_limit({"spark.master": "yarn", "spark.executor.memory": "4g"}) == pytest.approx(4.4 * GiB)
    assert data.container_limit({"spark.master": "k8s://x", "spark.executor.memory": "2g",
                                 "spark.executor.memoryOverhead": "1g",
                                 "spark.executor.pyspark.memory": "512m"}) == 3.5 * GiB
    assert data.container_limit({"spark.master": "yarn", "spark.executor.memory": "1g"}) == 1.375 * GiB  # 384M least
    assert data.container_limit({"spark.master": "local-cluster[2,1,1024]"}) is None


def test_the_newest_histogram_period_and_the_probe_period():
    rows = [{"device": "sda", "direction": "read", "le_us": "128", "count": 3, "time": 20_000},
            {"device": "sda", "direction": "read", "le_us": "128", "count": 9, "time": 10_000},
            {"device": "sda", "direction": "read", "le_us": "256", "count": 1, "time": 20_000}]
    hists, period_s = data.latest_histograms(rows)
    assert [(h.device, h.buckets) for h in hists] == [("sda", {128: 3, 256: 1})] and period_s == 10


def test_every_spark_measurement_top_reads_is_stored_by_the_shipped_filter():
    conf = (ROOT / "telegraf" / "telegraf.conf").read_text()
    kept = re.search(r'name = \[(.*?)\]\s*action = "pass"', conf, re.S).group(1)
    patterns = re.findall(r'"([^"]+)"', kept)
    missing = [m for m in [*data.GAUGES, *data.COUNTERS] if not any(fnmatch.fnmatch(m, p) for p in patterns)]
    assert not missing, f"top reads {missing}, which telegraf.conf's filter drops"


# --- the command in a real terminal, against a real stack ----------------------------------

def table_rows(text: str) -> dict[str, list[str]]:
    """The executor table: executor id -> its cells (a bar and heap used/max count as two)."""
    lines = text.splitlines()
    start = next((n for n, line in enumerate(lines) if line.startswith("executor") and "heap" in line), None)
    rows: dict[str, list[str]] = {}
    if start is None:
        return rows
    for line in lines[start + 1:]:
        cells = line.split()
        if len(cells) < 8 or not ("/" in cells[3] and cells[3][0].isdigit()):
            break
        rows[cells[0]] = cells
    return rows


def last_values(stack: Stack, app_id: str, measurement: str) -> dict[str, float]:
    series = stack.influx(f'SELECT last("value") FROM "{measurement}" WHERE "applicationid" = '
                          f'{influx.string_literal(app_id)} GROUP BY "executorid"')
    return {s["tags"]["executorid"]: s["values"][0][1] for s in series}


@needs_tmux
@pytest.mark.parametrize("width, height", [(80, 24), (200, 50)])
def test_a_finished_run_shows_every_executor_with_the_values_influxdb_holds(stack, metrics_run, width, height):
    app = metrics_run.app_id
    heap, heap_max, active = (last_values(stack, app, m) for m in ("JVMHeapMemory", "heap.max",
                                                                   "threadpool.activeTasks"))
    rss = {e: sum(last_values(stack, app, m).get(e, 0) for m in
                  ("ProcessTreeJVMRSSMemory", "ProcessTreePythonRSSMemory", "ProcessTreeOtherRSSMemory"))
           for e in heap}
    assert set(heap) == {"driver", "0", "1"}
    stage = stack.influx(f"SELECT \"text\" FROM \"sparkscope_stage\" WHERE \"applicationid\" = '{app}' "
                         "AND \"status\" <> 'RUNNING' ORDER BY time DESC LIMIT 1")[0]["values"][0][1]
    stragglers = stack.influx(f"SELECT \"stage_id\", \"attempt\" FROM \"sparkscope_stage\" WHERE "
                              f"\"applicationid\" = '{app}' AND \"straggler\" = 'true' ORDER BY time DESC")
    stragglers = [f"{v[1]}.{v[2]}" for v in stragglers[0]["values"]] if stragglers else []
    with Terminal(stack.settings, [app, "--interval", "1"], width, height) as term:
        text = term.wait_for(lambda t: "executor" in t and set(table_rows(t)) == set(heap), "the three executors")
        lines = text.splitlines()
        assert len(lines) <= height and max(map(len, lines)) <= width
        assert app in lines[0] and "sparkscope-test-metrics" in lines[0] and "ended" in lines[0]
        rows = table_rows(text)
        for executor_id, cells in rows.items():
            assert cells[3] == f"{view.size(heap[executor_id])}/{view.size(heap_max[executor_id])}", cells
            assert cells[4] == view.size(rss[executor_id]), cells
            tasks = active.get(executor_id)
            assert cells[1].split("/")[0] == ("-" if tasks is None else f"{tasks:.0f}"), cells
        # Sorted by heap, highest first.
        assert list(rows) == sorted(heap, key=lambda e: -heap[e])
        stage_line = next(line for line in lines if line.startswith("stage"))
        assert stage[:width - 20] in stage_line, text
        # The stages InfluxDB holds as stragglers, newest first, and no other (on this busy machine
        # the annotator may flag a few-second one; test_a_stage_with_one_slow_task_is_flagged_straggler
        # makes one for certain).
        shown = re.findall(r"STRAGGLER stage (\d+\.\d+)", text)
        assert shown == stragglers[:len(shown)] and (shown or not stragglers), (stragglers, text)
        term.keys("e")
        assert list(table_rows(term.wait_for(lambda t: list(table_rows(t))[0] == "driver", "sorted by id"))) == \
            ["driver", "0", "1"]
        term.keys("e")
        term.wait_for(lambda t: list(table_rows(t)) == ["1", "0", "driver"], "sorted by id, the other way")
        term.keys("d")
        term.wait_for(lambda t: "Disks at the run's end" in t and "device" in t, "the disks view")
        term.keys("p")
        term.wait_for(lambda t: "Pick a run" in t and app in t, "the run picker listing this run")
        term.keys("Escape")
        term.wait_for(lambda t: "Disks at the run's end" in t, "the disks view again")
        term.keys("d")
        term.wait_for(lambda t: list(table_rows(t)) == ["1", "0", "driver"], "the executors again")
        term.keys("q")
        after = term.wait_for(lambda t: "EXIT=" in t, "the command's end", 10)
        assert "EXIT=0" in after and "Traceback" not in after


@pytest.fixture(scope="module")
def skewed_run(stack, tmp_path_factory):
    """tests/jobs/skewed_stage_job.py: one stage whose partition 0 sleeps 20 s and the others do not."""
    jar = ensure_annotator_jar(ROOT, progress=lambda _: None)
    run = run_spark_job(stack, "skewed_stage_job.py", tmp_path_factory.mktemp("skewed"), master="local[2]",
                        conf=annotator_properties(stack.settings, jar), timeout_s=300)
    (stage_id,) = json.loads(re.search(r"^MARK (.*)$", run.stdout, re.M).group(1))["stages"]
    stack.wait_for(f"SELECT \"duration_ms\" FROM \"sparkscope_application\" WHERE \"applicationid\" = "
                   f"{influx.string_literal(run.app_id)} AND \"status\" = 'FINISHED'", bool)
    return run, stage_id


@needs_tmux
def test_a_stage_with_one_slow_task_is_flagged_straggler(stack, skewed_run):
    run, stage_id = skewed_run
    stored = stack.influx('SELECT "straggler", "task_max_ms", "task_p50_ms", "slowest_partition", "name" FROM '
                          f'"sparkscope_stage" WHERE "applicationid" = {influx.string_literal(run.app_id)} AND '
                          f'"stage_id" = {stage_id} AND "status" = \'SUCCEEDED\'')
    (_, straggler, slowest, median, partition, name), = stored[0]["values"]
    assert straggler == "true" and partition == 0 and slowest >= 20_000 and slowest >= 3 * median, stored
    said = (f"STRAGGLER stage {stage_id}.0 {name}: slowest task {view.seconds(slowest)} vs median "
            f"{view.seconds(median)}, on executor driver")
    for width, height in ((80, 24), (200, 50)):
        with Terminal(stack.settings, [run.app_id, "--interval", "1"], width, height) as term:
            text = term.wait_for(lambda t: "STRAGGLER" in t, f"the straggler flag at {width}x{height}")
            (flag,) = [line.rstrip() for line in text.splitlines() if line.startswith("STRAGGLER")]
            # At 80 columns the line is cut with an ellipsis; at 200 it is whole.
            assert flag == said if len(said) <= width else said.startswith(flag.rstrip("…")), (said, text)
            term.keys("q")
            assert "EXIT=0" in term.wait_for(lambda t: "EXIT=" in t, "the command's end", 10)


@pytest.fixture(scope="module")
def running_job(stack, tmp_path_factory):
    """A real job in local-cluster mode, with the annotator, running while the test looks."""
    jar = ensure_annotator_jar(ROOT, progress=lambda _: None)
    props = sparkscope_properties(stack.settings, period_s=SINK_PERIOD_S)
    props.update(annotator_properties(stack.settings, jar))
    log = tmp_path_factory.mktemp("top-spark") / "steady_job.log"
    proc = subprocess.Popen(submit_argv(JOBS / "steady_job.py", "local-cluster[2,1,1024]", props, ["30"]),
                            env=spark_env(log), stdout=subprocess.PIPE, stderr=open(log, "w"), text=True,
                            start_new_session=True)
    try:
        first = proc.stdout.readline()
        assert first.startswith("APP_ID "), f"no app id from spark-submit; log {log}"
        yield first.split()[1]
    finally:
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def is_steady_stage(line: str) -> bool:
    """The stage line of tests/jobs/steady_job.py's run: its call site's file name may
    be cut at 80 columns when the checkout's path is long, so the line is told by
    its own words and the job's file name as far as it shows."""
    return line.startswith("stage") and "collect at" in line and "steady_job" in line


@needs_tmux
def test_a_running_job_is_picked_by_default_and_shows_its_executors_and_stage(stack, running_job):
    app = running_job
    with Terminal(stack.settings, ["--interval", "1"], 80, 24) as term:
        # Each executor's cores come from the annotator's "added" event, flushed apart from
        # the executor's own metrics: a refresh between the two knows one executor's slot.
        text = term.wait_for(lambda t: app in t and {"driver", "0", "1"} <= set(table_rows(t))
                             and any(is_steady_stage(line) for line in t.splitlines()) and " of 2 slots" in t,
                             "the running job's executors, its stage and both executors' slots", 90)
        samples = {}
        for s in stack.influx(f'SELECT "value" FROM "JVMHeapMemory" WHERE "applicationid" = \'{app}\' '
                              'AND time > now() - 6s GROUP BY "executorid"'):
            samples[s["tags"]["executorid"]] = {view.size(v) for _, v in s["values"]}
        heap_max = last_values(stack, app, "heap.max")
        lines = text.splitlines()
        assert "running" in lines[0]
        for executor_id, cells in table_rows(text).items():
            used, most = cells[3].split("/")
            # What InfluxDB held within the last refreshes (one per second).
            assert used in samples[executor_id] and most == view.size(heap_max[executor_id]), (cells, samples)
        assert any(is_steady_stage(line) for line in lines)
        assert re.search(r"executors 3  tasks \d+ of 2 slots", text)
        term.keys("q")
        assert "EXIT=0" in term.wait_for(lambda t: "EXIT=" in t, "the command's end", 10)


# --- synthetic runs written as Spark and the annotator write them --------------------------

def tag(value: str) -> str:
    """A line-protocol tag value."""
    return re.sub(r"([,= \\])", r"\\\1", value)


def string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_run(settings, app_id: str, executors: dict[str, float], at_s: int | None = None, name: str = "x",
              stage: str = "") -> None:
    """A running application: its RUNNING point, each executor's heap (max 4 GiB, RSS twice the heap)
    now, and a running and a straggler stage."""
    now = at_s or int(time.time())
    app = f"applicationid={tag(app_id)}"
    lines = [f"sparkscope_application,{app},status=RUNNING app_name={string(name)} {(now - 60) * 10**9}"]
    for executor_id, heap in executors.items():
        for t in (now - 2, now - 1):
            lines.append(f"JVMHeapMemory,{app},executorid={tag(executor_id)} value={heap} {t * 10**9}")
            lines.append(f"heap.max,{app},executorid={tag(executor_id)} value={4 * GiB} {t * 10**9}")
            lines.append(f"ProcessTreeJVMRSSMemory,{app},executorid={tag(executor_id)} value={2 * heap} {t * 10**9}")
    if stage:
        lines.append(f"sparkscope_stage,{app},status=RUNNING stage_id=3i,attempt=0i,text={string(stage)} "
                     f"{(now - 5) * 10**9}")
        lines.append(f"sparkscope_stage,{app},status=SUCCEEDED,straggler=true stage_id=2i,attempt=0i,"
                     f"name={string('skewed join')},task_max_ms=9000i,task_p50_ms=700i,slowest_executor=\"7\","
                     f"text=\"stage 2.0\" {(now - 30) * 10**9}")
    influx.write(settings.influx_writer, settings.database, "\n".join(lines), precision="ns")


def top_once(settings, *args: str, width: int = 200, height: int = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, **settings_environ(settings), "COLUMNS": str(width), "LINES": str(height)}
    return subprocess.run([sys.executable, "-m", "sparkscope", "top", "--once", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def test_a_crafted_run_id_is_shown_literally_and_reads_only_its_own_points(stack):
    crafted = f"x' OR '1'='1 {uuid.uuid4().hex[:6]}"
    decoy = crafted.split("'")[0]  # "x": what an unquoted id would read as well
    # Executor ids are tag values anyone reaching the listener can write too.
    executors = {"7'/x": 300 * MiB, **{str(n): n * MiB for n in range(20, 40)}}
    write_run(stack.settings, crafted, executors, name="[red]etl[/red] it's \"quoted\"",
              stage="stage 3.0 running: it's a stage (8 tasks)")
    write_run(stack.settings, decoy, {"9": 900 * MiB})
    result = top_once(stack.settings, crafted)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert crafted in text and "[red]etl[/red] it's \"quoted\"" in text
    assert set(table_rows(text)) == set(executors)
    assert table_rows(text)["7'/x"][3:5] == ["300M/4.0G", "600M"]
    # A screen too small for every executor reads all columns of the rows it shows only,
    # picked by a regex of their ids.
    small = top_once(stack.settings, crafted, width=80, height=12).stdout
    assert list(table_rows(small))[:2] == ["7'/x", "39"] and table_rows(small)["7'/x"][4] == "600M", small
    assert "stage 3.0 running: it's a stage (8 tasks)" in text
    assert "STRAGGLER stage 2.0 skewed join: slowest task 9.0s vs median 700ms, on executor 7" in text


def test_the_disks_view_draws_the_probes_stored_counts(stack):
    app = f"app-top-disks-{uuid.uuid4().hex[:6]}"
    host, device = "top-test", f"sdtop{uuid.uuid4().hex[:6]}"
    now = int(time.time())
    write_run(stack.settings, app, {"1": GiB}, at_s=now)
    periods = {now - 12: {64: 5, 128: 50}, now - 2: {32: 3, 128: 120, 256: 40, 2048: 7}}
    lines = [f"block_latency_hist,host={host},device={device},direction=read,le_us={le} count={n}i {at * 10**9}"
             for at, buckets in periods.items() for le, n in buckets.items()]
    lines.append(f"block_outlier,host={host},device={device},direction=read latency_ms=123.4,bytes=4096i,pid=42i,"
                 f"comm=\"kworker/1\" {(now - 4) * 10**9}")
    lines.append(f"block_outlier,host={host},device={device},direction=read latency_ms=999.0,bytes=4096i,pid=43i,"
                 f"comm=\"older\" {(now - 20) * 10**9}")  # in the period before: not listed
    influx.write(stack.settings.influx_writer, stack.settings.database, "\n".join(lines), precision="ns")
    stored = {int(s["tags"]["le_us"]): s["values"][0][1] for s in stack.influx(
        f"SELECT \"count\" FROM \"block_latency_hist\" WHERE \"device\" = '{device}' AND time = {now - 2}s "
        "GROUP BY \"le_us\"")}
    assert stored == periods[now - 2]
    result = top_once(stack.settings, app, "--disks", width=120, height=400)
    assert result.returncode == 0, result.stderr
    text = result.stdout.splitlines()
    start = next((n for n, line in enumerate(text) if f"{device} read:" in line), None)
    assert start is not None, result.stdout
    assert "170 I/Os" in text[start] and "10 s period" in text[start]
    drawn = {}
    for line in text[start + 1:]:
        match = re.match(r"\[(\w+), (\w+)\)\s+(\d+) \|(@*) *\|$", line)
        if not match:
            break
        upper = int(match.group(2).replace("K", "")) * (1024 if "K" in match.group(2) else 1)
        drawn[upper] = int(match.group(3))
    assert {le: n for le, n in drawn.items() if n} == stored
    assert set(drawn) == {32, 64, 128, 256, 512, 1024, 2048}  # the empty buckets between are drawn
    outliers = "\n".join(text[start:])
    assert f"{device} read 123.4 ms 4.0K pid 42 kworker/1" in outliers and "older" not in outliers


@needs_tmux
def test_influxdb_lost_shows_a_banner_and_the_view_comes_back(tmp_path):
    with throwaway_stack(tmp_path / "state", only=("influxdb",)) as settings:
        app = "app-top-outage"
        write_run(settings, app, {"1": GiB})
        with Terminal(settings, [app, "--interval", "1"], 80, 24) as term:
            term.wait_for(lambda t: "1" in table_rows(t), "executor 1")
            NativeBackend(settings).down(only=("influxdb",))
            text = term.wait_for(lambda t: "InfluxDB not reachable" in t, "the banner")
            assert "retrying every 1 s" in text and "1" in table_rows(text)  # the last data stays
            time.sleep(3)  # the behaviour under test: three more refreshes fail, and the view stays
            text = term.screen()
            assert "InfluxDB not reachable" in text and "Traceback" not in text and "EXIT=" not in text
            NativeBackend(settings).up(only=("influxdb",))
            write_run(settings, app, {"1": 2 * GiB})
            text = term.wait_for(lambda t: "not reachable" not in t and "2.0G/4.0G" in t, "the view back")
            term.keys("q")
            assert "EXIT=0" in term.wait_for(lambda t: "EXIT=" in t, "the command's end", 10)
