"""`sparkscope demo`: TPC-DS at the smallest scale on the session stack, with
real executor JVMs, the Graphite sink and the annotator; a failing query is
reported, not fatal; Ctrl-C stops Spark and leaves the stack up. Pure parts
(query loading, q30's alias, argument checks, data caching) are unit-tested."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sparkscope.cli import build_parser
from sparkscope.demo import command, tpcds
from sparkscope.demo.options import DemoOptions, expected_executors, parse_memory_mb
from sparkscope.demo.run import run_demo
from sparkscope.demo.summary import attribute_stages
from sparkscope.demo.tpcds import TpcdsError
from sparkscope.process import group_alive
from sparkscope.stack.native import NativeBackend
from sparkscope_testkit.sandbox import settings_environ
from sparkscope_testkit.terminal import Terminal, needs_tmux

SMALLEST_SCALE = 0.01  # the generator goes lower, but dimension tables stay their size
TWO_QUERIES = "q3,q7"
ALL_JVMS = {"driver", "0", "1"}


# --- query loading and arguments (no Spark) --------------------------------------------

def test_the_wheel_ships_the_spark_dialect_query_set():
    names = tpcds.available_queries()
    assert names[:3] == ["q1", "q2", "q3"] and names[-1] == "q99"
    assert {"q14a", "q14b", "q30", "q72"} <= set(names)
    assert len(names) == 118  # TPC-DS 99 plus the v2.7 variants Spark tests


def test_queries_are_in_natural_order_with_variants_after_their_base():
    names = tpcds.available_queries()
    assert names.index("q5") < names.index("q5a") < names.index("q6") < names.index("q10")


def test_q30_reads_the_review_date_column_the_generator_writes():
    (q30,) = tpcds.load_queries(["q30"])
    assert "c_last_review_date_sk AS c_last_review_date," in q30.sql
    # Only the select list changes: ORDER BY still names the result column.
    assert q30.sql.count("c_last_review_date_sk") == 1
    assert "c_email_address\n  , c_last_review_date, ctr_total_return" in q30.sql


def test_a_query_fix_that_no_longer_applies_fails_loudly():
    with pytest.raises(TpcdsError, match="q30"):
        tpcds.fix_query("q30", "SELECT c_customer_id FROM customer")


def test_loaded_queries_are_single_statements():
    for query in tpcds.load_queries(tpcds.available_queries()):
        assert query.sql and not query.sql.endswith(";"), query.name


def test_selecting_queries_keeps_order_and_accepts_bare_numbers():
    names = tpcds.available_queries()
    assert tpcds.select_queries("q7, 3,Q14a,q7", names) == ["q7", "q3", "q14a"]
    assert tpcds.select_queries(None, names) == names
    assert tpcds.select_queries("", names) == names


def test_unknown_query_names_are_an_error_that_lists_what_exists():
    with pytest.raises(TpcdsError) as err:
        tpcds.select_queries("q1,q100,qx", tpcds.available_queries())
    assert "q100, qx" in str(err.value) and "q1..q99" in str(err.value)


@pytest.mark.parametrize("scale", ["0", "-1", "abc", "nan", "inf"])
def test_scale_must_be_a_positive_number(scale):
    with pytest.raises(TpcdsError, match="scale"):
        tpcds.parse_scale(scale)


def test_scales_name_their_cache_directories():
    assert tpcds.data_dir(Path("/c"), 0.1) == Path("/c/tpcds/sf0.1")
    assert tpcds.data_dir(Path("/c"), 1.0) == Path("/c/tpcds/sf1")
    assert tpcds.data_dir(Path("/c"), 0.01) == Path("/c/tpcds/sf0.01")


@pytest.mark.parametrize("argv, message", [
    (["--scale", "0"], "scale must be greater than 0"),
    (["--executors", "0"], "--executors must be a whole number >= 1"),
    (["--repetitions", "x"], "--repetitions must be a whole number >= 1"),
    (["--executor-memory", "256m"], "Spark needs at least 450 MB"),
    (["--executor-memory", "lots"], "is not a size"),
])
def test_bad_demo_arguments_are_refused_with_a_reason(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["demo", *argv])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_demo_arguments_have_documented_defaults():
    args = build_parser().parse_args(["demo"])
    options = command.options_from_args(args)
    assert (options.scale, options.queries, options.executors, options.executor_memory_mb,
            options.repetitions) == (0.1, None, 2, 1024, 1)
    assert options.spark_master == "local-cluster[2,1,1024]"


def test_executor_memory_takes_spark_sizes():
    assert parse_memory_mb("1g") == 1024
    assert parse_memory_mb("1536m") == 1536
    assert parse_memory_mb("1.5G") == 1536
    assert parse_memory_mb("2048") == 2048


def test_an_unknown_query_fails_the_demo_before_the_stack_starts(capsys):
    from sparkscope.cli import main

    assert main(["demo", "--queries", "q3,q999"]) == 2
    err = capsys.readouterr().err
    assert "unknown TPC-DS query q999" in err


def test_expected_executors_follow_the_master():
    assert expected_executors("local-cluster[3,1,1024]") == {"driver", "0", "1", "2"}
    assert expected_executors("local[2]") == {"driver"}
    assert expected_executors("spark://host:7077") is None


def test_straggler_stages_are_named_by_the_job_that_ran_them():
    jobs = [
        {"time": 1000, "end_time_ms": 5000, "description": "TPC-DS q3", "execution_id": 4},
        {"time": 6000, "end_time_ms": 9000, "description": "collect at x.py:1", "execution_id": 5},
    ]
    queries = [{"time": 6000, "execution_id": "5", "description": "TPC-DS q7"}]
    stages = [
        {"time": 2000, "stage_id": "1", "task_max_ms": 3000, "task_p50_ms": 100},
        {"time": 7000, "stage_id": "2", "task_max_ms": 9000, "task_p50_ms": 500},
        {"time": 20000, "stage_id": "3", "task_max_ms": 2500, "task_p50_ms": 200},
    ]
    named = attribute_stages(stages, jobs, queries)
    assert [(s["stage_id"], s["query"]) for s in named] == [("2", "q7"), ("1", "q3"), ("3", "?")]


# --- data generation ----------------------------------------------------------------------

def test_data_is_generated_once_and_renamed_into_place(tmp_path):
    messages: list[str] = []
    first = tpcds.ensure_data(tmp_path, 0.001, progress=messages.append)
    assert tpcds.missing_tables(first) == []
    assert [p.name for p in first.parent.iterdir()] == ["sf0.001"]  # no temporary directory left
    inode = first.stat().st_ino
    again = tpcds.ensure_data(tmp_path, 0.001, progress=messages.append)
    assert again == first and again.stat().st_ino == inode
    assert "cached" in messages[-1]


def test_a_failed_generation_leaves_nothing_a_later_run_would_trust(tmp_path):
    with pytest.raises(TpcdsError, match="exited 1"):
        tpcds.ensure_data(tmp_path, 0.5, progress=lambda _: None, generator=["false"])
    assert list((tmp_path / "tpcds").iterdir()) == []


# --- the demo on the real stack -------------------------------------------------------------

@pytest.fixture(scope="module")
def demo_run(stack, tmp_path_factory):
    """q3 and q7 at the smallest scale; a 1 s sink period so short queries are sampled."""
    lines: list[str] = []
    options = DemoOptions(scale=SMALLEST_SCALE, queries=TWO_QUERIES, sink_period_s=1, timeout_s=300)
    result = run_demo(stack.settings, options, "native", out=lines.append)
    return result, lines


def test_demo_runs_every_query_and_exits_zero(demo_run):
    result, lines = demo_run
    assert result.exit_code == 0, "\n".join(lines)
    assert [(r.name, r.status) for r in result.results] == [("q3", "ok"), ("q7", "ok")]
    assert any(line.startswith("[1/2] q3") and " ok " in line for line in lines), lines
    assert any(line.startswith("[2/2] q7") for line in lines), lines


def test_demo_metrics_arrive_for_every_executor(stack, demo_run):
    result, _ = demo_run
    for measurement in ("JVMHeapMemory", "ProcessTreeJVMRSSMemory"):
        series = stack.influx(f'SELECT max("value") FROM "{measurement}" WHERE "applicationid" = '
                              f"'{result.app_id}' GROUP BY \"executorid\"")
        peaks = {s["tags"]["executorid"]: s["values"][0][1] for s in series}
        assert set(peaks) == ALL_JVMS, f"{measurement}: {peaks}"
        # Every JVM, the driver included: the driver samples its memory only at its heartbeat,
        # which the demo sets to 2 s so that a 20 s run gets samples from it.
        assert all(v > 0 for v in peaks.values()), f"{measurement}: {peaks}"
    assert set(result.peaks) == ALL_JVMS


def test_demo_queries_arrive_as_annotations_named_after_the_tpcds_query(stack, demo_run):
    result, _ = demo_run
    series = stack.wait_for(
        f'SELECT "description", "status" FROM "sparkscope_query" WHERE "applicationid" = '
        f"'{result.app_id}' AND \"status\" = 'SUCCEEDED'",
        lambda s: s and {"TPC-DS q3", "TPC-DS q7"} <= {row[1] for row in s[0]["values"]},
        deadline_s=15,
    )
    assert {row[2] for row in series[0]["values"]} == {"SUCCEEDED"}


def test_demo_jobs_carry_the_query_as_job_group(stack, demo_run):
    result, _ = demo_run
    groups = stack.influx(f'SELECT "job_group" FROM "sparkscope_job" '
                          f"WHERE \"applicationid\" = '{result.app_id}' AND \"status\" <> 'RUNNING'")
    assert {"tpcds-q3", "tpcds-q7"} <= {v[1] for v in groups[0]["values"]}


def test_demo_summary_says_what_ran_and_where_to_look(stack, demo_run):
    result, lines = demo_run
    text = "\n".join(lines)
    assert "queries   2 of 2 run: 2 ok, 0 failed" in text
    for jvm in ALL_JVMS:
        assert any(line.split()[:2] == [jvm, "heap"] for line in lines), text
    # A link that opens the live dashboard on this run, over its own time range.
    link = f"{stack.settings.grafana_url}/d/sparkscope-executors?var-applicationid={result.app_id}&from="
    assert link in text, text
    # Without a Grafana installed the summary says so and how to get one; with one, it does not.
    from sparkscope.stack.grafana_local import find_grafana
    said = "Grafana is not installed here" in text and "--backend compose" in text
    assert said == (find_grafana(stack.settings.grafana_home) is None), text
    assert f"applicationid='{result.app_id}'" in text  # the InfluxQL hint names this run
    # The memory verdict, its --conf line and the report page, written.
    verdict = next(line for line in lines if line.startswith("  memory    "))
    assert any(word in verdict for word in ("SHORT", "GENEROUS", "RIGHT")), verdict
    assert "--conf spark.executor.memory=" in text, text
    report = next(line.split("report: ", 1)[1].split()[0] for line in lines if "report: " in line)
    assert result.app_id in report and "plotly" in open(report, encoding="utf-8").read()[:200_000]


@pytest.fixture(scope="module")
def failing_run(stack, demo_run, tmp_path_factory):
    """A query over a table that does not exist, between two that work; same data, not
    regenerated. In local mode: executors are not what this run is about."""
    queries = tmp_path_factory.mktemp("queries")
    source = tpcds.queries_dir()
    (queries / "q3.sql").write_text((source / "q3.sql").read_text())
    (queries / "q_missing.sql").write_text("SELECT count(*) FROM no_such_table")
    (queries / "q7.sql").write_text((source / "q7.sql").read_text())
    lines: list[str] = []
    options = DemoOptions(scale=SMALLEST_SCALE, queries="q3,q_missing,q7", query_dir=queries,
                          master="local[2]", sink_period_s=1, timeout_s=300)
    data = tpcds.data_dir(stack.settings.cache_dir, SMALLEST_SCALE)
    inode = data.stat().st_ino
    result = run_demo(stack.settings, options, "native", out=lines.append)
    assert data.stat().st_ino == inode, "the second run regenerated the data"
    return result, lines


def test_a_failing_query_is_reported_and_the_others_still_run(failing_run):
    result, lines = failing_run
    statuses = [(r.name, r.status) for r in result.results]
    assert statuses == [("q3", "ok"), ("q_missing", "FAILED"), ("q7", "ok")], "\n".join(lines)
    failed_line = next(line for line in lines if "q_missing" in line and line.startswith("[2/3]"))
    assert "FAILED" in failed_line and "no_such_table" in failed_line


def test_a_failing_query_makes_the_exit_code_non_zero_and_is_in_the_summary(failing_run):
    result, lines = failing_run
    assert result.exit_code == 1
    text = "\n".join(lines)
    assert "queries   3 of 3 run: 2 ok, 1 failed" in text
    assert "FAILED q_missing: [TABLE_OR_VIEW_NOT_FOUND]" in text
    assert "TPC-DS data sf=0.01: cached" in text


def test_ctrl_c_stops_spark_says_what_ran_and_leaves_the_stack_up(stack):
    """The demo in a process of its own; SIGINT (what Ctrl-C sends) after the first query."""
    script = textwrap.dedent(f"""
        import signal, sys
        # As at a terminal: a shell that starts a job in the background without job
        # control (CI runners may) makes it ignore SIGINT, and its children inherit that.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        from sparkscope.demo.options import DemoOptions
        from sparkscope.demo.run import run_demo
        from sparkscope.settings import load_settings
        settings = load_settings(environ={json.dumps(settings_environ(stack.settings))})
        options = DemoOptions(scale={SMALLEST_SCALE}, queries="q3,q7,q19,q42,q52,q55", sink_period_s=1)
        sys.exit(run_demo(settings, options, "native").exit_code)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line.rstrip())
            if line.startswith("[1/6]"):
                break
        spark_pgids = spark_groups_of(proc.pid)
        assert spark_pgids, "no spark-submit process group under the demo:\n" + "\n".join(lines)
        os.kill(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    lines += out.splitlines()
    text = "\n".join(lines)
    assert proc.returncode == 130, text
    assert "interrupted: stopping Spark" in text
    assert "(interrupted)" in text and "ran: q3; stopped while q7 ran" in text
    assert "./sparkscope down stops it" in text
    for pgid in spark_pgids:
        assert not group_alive(pgid), f"Spark's process group {pgid} outlived the demo"
    assert all(row.state == "up" for row in NativeBackend(stack.settings).status()[:2])


def spark_groups_of(parent: int) -> set[int]:
    """Process groups of the parent's children (spark-submit runs in a session of its own)."""
    groups = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent:  # ppid
            groups.add(int(fields[2]))  # pgrp
    return groups - {parent}


@needs_tmux
def test_at_a_terminal_the_demo_runs_under_top_and_q_leaves_it_for_plain_lines(stack, demo_run):
    """As a person at an 100x30 terminal: the run's executors and the demo's progress
    under `sparkscope top`; q leaves the view and the workload goes on in plain lines,
    with the lines said under the view printed again."""
    script = textwrap.dedent(f"""
        import sys
        from sparkscope.demo.options import DemoOptions
        from sparkscope.demo.run import run_demo
        from sparkscope.settings import load_settings
        settings = load_settings(environ={json.dumps(settings_environ(stack.settings))})
        options = DemoOptions(scale={SMALLEST_SCALE}, queries="q3,q7,q19,q42,q52", sink_period_s=1)
        sys.exit(run_demo(settings, options, "native").exit_code)
    """)
    with Terminal(stack.settings, [], 100, 30, script=script) as term:
        shown = term.wait_for(lambda s: "[1/5] q3" in s and re.search(r"^executor +tasks +heap", s, re.M)
                              and re.search(r"^driver ", s, re.M), "the run's executors and the first query",
                              deadline_s=120)
        app_id = re.search(r"^(app-\S+|local-\S+)", shown, re.M).group(1)
        assert re.search(r"^[01] +\d/1 ", shown, re.M), shown  # an executor row: active tasks of its slot
        assert "sparkscope-demo-tpcds" in shown and "running" in shown, shown
        term.keys("q")
        done = term.wait_for(lambda s: "EXIT=" in s, "the demo's end after q", deadline_s=180, history=True)
    assert "EXIT=0" in done, done
    lines = done.splitlines()
    assert not any(re.match(r"^executor +tasks", line) for line in lines), "the view stayed:\n" + done
    said = [line for line in lines if re.match(r"^\[\d/5\] ", line)]
    assert [line.split()[1] for line in said] == ["q3", "q7", "q19", "q42", "q52"], done
    assert f"application {app_id}" in done or app_id in done, done
    assert "queries   5 of 5 run: 5 ok, 0 failed" in done, done


def test_through_a_pipe_the_demo_prints_plain_progress_lines(stack, demo_run):
    """Not a terminal (CI, `| tee`): no view, the lines as they come."""
    script = textwrap.dedent(f"""
        import sys
        from sparkscope.demo.options import DemoOptions
        from sparkscope.demo.run import _terminal_view
        from sparkscope.settings import load_settings
        settings = load_settings(environ={json.dumps(settings_environ(stack.settings))})
        print("view" if _terminal_view(settings, DemoOptions()) else "plain")
    """)
    piped = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                           stdin=subprocess.DEVNULL)
    assert piped.stdout.strip() == "plain"
    plain = script.replace("DemoOptions()", "DemoOptions(view=False)")
    with Terminal(stack.settings, [], 80, 24, script=plain) as term:
        assert "plain" in term.wait_for(lambda s: "EXIT=" in s, "the answer")
    with Terminal(stack.settings, [], 80, 24, script=script) as term:
        assert "view" in term.wait_for(lambda s: "EXIT=" in s, "the answer")


def test_the_demo_names_the_live_dashboard_when_a_grafana_answers(tmp_path):
    """The link is said as the run starts, and only when Grafana answers there."""
    from http.server import ThreadingHTTPServer
    from threading import Thread

    from sparkscope.demo.options import DemoResult
    from sparkscope.demo.run import _Events
    from sparkscope_testkit.fake_services import Grafana
    from sparkscope_testkit.sandbox import isolated_settings

    def said_at_start(settings) -> list[str]:
        lines: list[str] = []
        result = DemoResult(exit_code=0, planned=1, order=["q3"], log=tmp_path / "demo.log")
        _Events(settings, DemoOptions(), result, lines.append, 0.0).take(
            {"event": "app", "app_id": "app-1", "metrics_id": "app-1", "spark_version": "3.5"})
        assert result.app_id == "app-1"
        return lines

    server = ThreadingHTTPServer(("127.0.0.1", 0), Grafana)
    Thread(target=server.serve_forever, daemon=True).start()
    try:
        answering = isolated_settings(tmp_path, GRAFANA_PORT=str(server.server_address[1]))
        link = f"{answering.grafana_url}/d/sparkscope-executors?var-applicationid=app-1"
        assert any(link in line for line in said_at_start(answering))
    finally:
        server.shutdown()
        server.server_close()
    silent = isolated_settings(tmp_path)
    assert not any("/d/sparkscope-executors" in line for line in said_at_start(silent))


def test_a_run_spark_ended_in_error_points_at_the_executors_own_logs(tmp_path):
    from sparkscope.demo.options import DemoResult
    from sparkscope.demo.summary import print_summary
    from sparkscope_testkit.sandbox import isolated_settings

    def summary(master: str, spark_exit: int) -> str:
        lines: list[str] = []
        result = DemoResult(exit_code=1, planned=1, order=["q3"], log=tmp_path / "demo.log", app_id="app-7",
                            spark_exit=spark_exit, executor_logs=tmp_path / "demo.spark-x" / "work",
                            influx_error="not asked in this test")
        print_summary(isolated_settings(tmp_path), DemoOptions(master=master), result, "native", lines.append)
        return "\n".join(lines)

    said = summary("local-cluster[2,1,1024]", 1)
    assert f"spark-submit exited 1: see {tmp_path / 'demo.log'}" in said
    assert f"executors' own logs: {tmp_path / 'demo.spark-x' / 'work' / 'app-7'}/<executor id>/stderr" in said
    # Elsewhere they are the cluster's (its workers', YARN's, Kubernetes'), and local[N] has none.
    for master in ("yarn", "spark://host:7077", "local[2]"):
        assert "executors' own logs" not in summary(master, 1), master
    assert "executors' own logs" not in summary("local-cluster[2,1,1024]", 0)
