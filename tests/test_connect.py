"""Spark Connect: who used a shared server's capacity. A real Connect server
(Spark 4, from the pyspark package) runs with the annotator attached; two
client sessions of two users run clearly different amounts of work at the
same time. Each session's and user's task time as sparkscope attributes it
is within 5 % of Spark's own event log (the tasks of the jobs Connect tagged
with that session), and the run's held slots and cost are split by those
shares."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from sparkscope import cli
from sparkscope.dashboards import build
from sparkscope.process import wait_until
from sparkscope.provision.annotator_jar import ensure_annotator_jar
from sparkscope.report.capacity import capacity, connect_users
from sparkscope.report import command
from sparkscope.report.run_facts import RunReader
from sparkscope.settings import ROOT
from sparkscope.spark.conf import annotator_env, annotator_properties, sparkscope_properties
from sparkscope.spark.submit import ensure_pyspark, spark_env
from sparkscope.store.figures import Prices
from sparkscope_testkit.grafana13 import RULE_SETS
from sparkscope_testkit.sandbox import free_port

from conftest import JOBS, SINK_PERIOD_S, SPARK4_VERSION

WITHIN = 0.05
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
OPERATION_TAG = "SparkConnect_OperationTag_"
# alice runs 3 aggregations of 80 M rows, bob one of 30 M: 8 times the work, in
# tasks of seconds (a task's launch-to-finish time holds some 0.1 s beyond its
# run time: in tasks far shorter, that alone would be 5 %).
WORK = {"alice": (80_000_000, 3), "bob": (30_000_000, 1)}
PRICES = Prices(per_core_hour=0.5, per_gb_hour=0.1, currency="EUR")


def event_log_truth(log_dir: Path, app_id: str) -> dict[str, dict[str, float]]:
    """Per Connect session, from Spark's event log: its user, and the task time of
    the jobs tagged with it: its tasks' launch to finish times summed ("wall"),
    and their run + deserialize time ("metrics", what the run's task-seconds count)."""
    path = next(p for p in log_dir.iterdir() if p.name.startswith(app_id))
    stage_job, job_session, sessions = {}, {}, {}
    for line in path.read_text().splitlines():
        event = json.loads(line)
        kind = event["Event"]
        if kind.endswith("SparkListenerConnectOperationStarted"):
            sessions.setdefault(event["sessionId"], {"user": event["userId"], "wall": 0.0, "metrics": 0.0})
        elif kind == "SparkListenerJobStart":
            tags = (event.get("Properties") or {}).get("spark.job.tags", "")
            owner = next((t for t in tags.split(",") if t.startswith(OPERATION_TAG)), None)
            if owner:
                job_session[event["Job ID"]] = owner.split("_Session_")[1].split("_Operation_")[0]
            for stage in event["Stage IDs"]:
                stage_job.setdefault(stage, event["Job ID"])
        elif kind == "SparkListenerTaskEnd":
            session = job_session.get(stage_job.get(event["Stage ID"]))
            if session is None:
                continue
            info, metrics = event["Task Info"], event.get("Task Metrics") or {}
            sessions[session]["wall"] += (info["Finish Time"] - info["Launch Time"]) / 1000
            sessions[session]["metrics"] += (metrics.get("Executor Run Time", 0)
                                             + metrics.get("Executor Deserialize Time", 0)) / 1000
    return {session: truth for session, truth in sessions.items() if truth["wall"]}


def start_connect_server(stack, home: Path, log: Path, events: Path, port: int) -> subprocess.Popen:
    jar = ensure_annotator_jar(ROOT, progress=lambda _: None)
    conf = {**sparkscope_properties(stack.settings, period_s=SINK_PERIOD_S),
            **annotator_properties(stack.settings, jar),
            "spark.connect.grpc.binding.address": "127.0.0.1", "spark.connect.grpc.binding.port": str(port),
            "spark.eventLog.enabled": "true", "spark.eventLog.dir": events.as_uri(),
            "spark.eventLog.compress": "false", "spark.eventLog.rolling.enabled": "false",
            "spark.ui.enabled": "false"}
    argv = [str(home / "bin" / "spark-submit"), "--master", "local-cluster[2,1,1024]", "--class", SERVER_CLASS,
            "--name", "sparkscope connect test"]
    for key, value in conf.items():
        argv += ["--conf", f"{key}={value}"]
    env = {**spark_env(log, home), **annotator_env(stack.settings), "SPARK_CONNECT_MODE": "0",
           "PYSPARK_PYTHON": str(home.parents[3] / "bin" / "python")}
    with open(log, "w") as out:
        return subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def stop(server: subprocess.Popen) -> None:
    """SIGTERM: Spark's shutdown hook stops the context (the application's end
    reaches the annotator); its process group (the executors it started) after a deadline."""
    if server.poll() is None:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(90)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(server.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    server.wait(10)


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), 1):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def connect_run(stack, tmp_path_factory):
    home = ensure_pyspark(SPARK4_VERSION, stack.settings.cache_dir, progress=lambda _: None, extras=("connect",))
    tmp = tmp_path_factory.mktemp("connect")
    events = tmp / "eventlog"
    events.mkdir()
    port = free_port()
    server = start_connect_server(stack, home, tmp / "server.log", events, port)
    sessions = {}
    try:
        assert wait_until(lambda: listening(port) or server.poll() is not None, 180), "no Connect server in 180 s"
        assert server.poll() is None, (tmp / "server.log").read_text()[-3000:]
        python = str(home.parents[3] / "bin" / "python")
        clients = {user: subprocess.Popen([python, "-W", "ignore", str(JOBS / "connect_client.py"),
                                           f"sc://127.0.0.1:{port}/", user, str(rows), str(repeats)],
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                   for user, (rows, repeats) in WORK.items()}
        for user, client in clients.items():
            out, err = client.communicate(timeout=600)
            assert client.returncode == 0, f"{user}'s client exited {client.returncode}: {err[-2000:]}"
            sessions[user] = next(line.split()[1] for line in out.splitlines() if line.startswith("SESSION "))
    finally:
        stop(server)
    app_id = next(p.name for p in events.iterdir() if p.name.startswith("app-")).removesuffix(".inprogress")
    stack.wait_for(f"SELECT \"duration_ms\" FROM \"sparkscope_application\" WHERE \"applicationid\" = "
                   f"'{app_id}' AND \"status\" = 'FINISHED'", bool, 60)
    stack.wait_for_telegraf_to_drain()
    reader = RunReader(stack.settings.influx_reader, stack.settings.database)
    facts = reader.read(app_id)
    return app_id, sessions, reader, facts, event_log_truth(events, app_id), tmp


def test_each_connect_session_and_user_is_attributed_its_own_task_time_and_share(connect_run):
    app_id, sessions, _, facts, truth, _ = connect_run
    assert set(truth) == set(sessions.values()), (truth, sessions)
    cap = capacity(facts, PRICES)
    who = connect_users(facts, cap)
    assert who is not None
    print(f"\nevent log: {truth}\nsparkscope: {[(a.user, a.session, a.task_seconds, a.share) for a in who.sessions]}")
    by_session = {a.session: a for a in who.sessions}
    by_user = {a.user: a for a in who.users}
    assert set(by_session) == set(truth) and set(by_user) == set(WORK)
    total = sum(t["wall"] for t in truth.values())
    for user, session in sessions.items():
        mine, spark = by_session[session], truth[session]
        assert mine.user == user == spark["user"]
        # Spark's own clock: each task's launch to finish.
        assert mine.task_seconds == pytest.approx(spark["wall"], rel=WITHIN), (user, mine, spark)
        assert by_user[user].task_seconds == pytest.approx(mine.task_seconds)  # one session each
        # What was held, split by share of task time: slots and money.
        share = spark["wall"] / total
        assert mine.share == pytest.approx(share, rel=WITHIN)
        assert mine.slot_seconds == pytest.approx(cap.slot_seconds * share, rel=WITHIN)
        assert mine.cost == pytest.approx(cap.cost * share, rel=WITHIN)
    alice, bob = by_user["alice"], by_user["bob"]
    # Clearly different amounts of work, so that sessions swapped would fail the checks above: alice
    # reads 8x bob's rows, but on a loaded machine each job's fixed costs (planning, code generation,
    # a cold JIT) take a share of both (a clean-clone run measured 14.4 s against 5.3 s).
    assert alice.task_seconds > 1.5 * bob.task_seconds, (alice, bob)
    # The shares cover the run's whole held capacity, the server's own jobs included.
    held = sum(a.slot_seconds for a in who.users) + (who.other.slot_seconds if who.other else 0)
    assert held == pytest.approx(cap.slot_seconds, rel=1e-6)
    # alice's three statements are three operations, bob's one.
    ops = [a for a in who.operations]
    assert sorted(a.user for a in ops) == ["alice"] * 3 + ["bob"]
    assert all(a.session == sessions[a.user] for a in ops)


def test_the_report_and_its_json_show_who_used_the_server(stack, connect_run, monkeypatch, capsys):
    app_id, sessions, reader, facts, truth, tmp = connect_run
    monkeypatch.setattr(command, "load_settings", lambda: stack.settings)
    assert cli.main(["report", app_id, "--json", "--out", str(tmp / "report")]) == 0
    document = json.loads(capsys.readouterr().out)
    connect = document["capacity"]["connect"]
    assert {u["user"] for u in connect["users"]} == set(WORK)
    rows = {s["session"]: s for s in connect["sessions"]}
    for user, session in sessions.items():
        assert rows[session]["user"] == user
        assert rows[session]["task_seconds"] == pytest.approx(truth[session]["wall"], rel=WITHIN)
    assert connect["operations_total"] == 4
    page = Path(document["report"]).read_text()
    assert "Who used it: Spark Connect users, sessions and operations" in page
    for session in sessions.values():
        assert session in page


@pytest.mark.parametrize("rules", sorted(RULE_SETS))
def test_the_summary_dashboard_tables_the_work_per_connect_user_and_session(stack, connect_run, rules):
    app_id, sessions, _, facts, truth, _ = connect_run
    board = build()["spark-application.json"]
    start, end = facts.started_ms - 1000, (facts.ended_ms or int(time.time() * 1000)) + 1000
    dash = stack.open_dashboard(board, start, end, rules=RULE_SETS[rules], url_vars={"applicationid": app_id})
    panels = {p["title"]: p for top in board["panels"] for p in [top, *top.get("panels", [])]}
    users = dash.run_panel(panels["Task time by Spark Connect user"])
    got = {}
    for frame in next(iter(users.values())):
        got.update(dict(frame_rows(frame, "connect_user", "task time")))
    for user, session in sessions.items():
        assert got[user] / 1000 == pytest.approx(truth[session]["wall"], rel=WITHIN), (got, truth)
    jobs = dash.run_panel(panels["Task time by Spark Connect session"])
    per_session: dict[str, float] = {}
    for frame in next(iter(jobs.values())):
        for session, ms in frame_rows(frame, "session", "task time"):
            per_session[session] = per_session.get(session, 0) + ms
    for session in sessions.values():
        assert per_session[session] / 1000 == pytest.approx(truth[session]["wall"], rel=WITHIN)


def frame_rows(series: dict, key: str, column: str):
    """(key, value) of a table's rows: the key from the series' tags or a column."""
    columns = series["columns"]
    for row in series.get("values") or []:
        values = dict(zip(columns, row))
        name = (series.get("tags") or {}).get(key, values.get(key))
        yield name, values[column]
