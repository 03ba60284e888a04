"""The command line's conventions, which scripts rely on: exit codes (0 ok,
1 runtime error, 2 usage error, 3 status not all up), --version, --help naming
every command, --json for status and report, and RUN taken the same way by
report, top and profile."""

from __future__ import annotations

import json
import re

import pytest

import sparkscope
from sparkscope import cli, versions
from sparkscope.command_line import EXIT_CODES
from sparkscope.profiles import command as profile_command
from sparkscope.report import command as report_command
from sparkscope.report.advice import advise
from sparkscope.settings import ROOT
from sparkscope_testkit.sandbox import isolated_settings

from test_report import facts


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """main's exit code, with argparse's own exits (usage errors) as their code."""
    try:
        code = cli.main(list(argv))
    except SystemExit as exit_:
        code = exit_.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_version_names_sparkscope_and_every_component_pinned(capsys):
    code, out, _ = run(capsys, "--version")
    assert code == 0
    assert out.startswith(f"sparkscope {sparkscope.__version__}\n")
    for pinned in (versions.INFLUXDB, versions.TELEGRAF, versions.GRAFANA, versions.GRAFANA_12, versions.SPARK,
                   versions.SPARK_4):
        assert pinned in out, f"--version leaves out {pinned}:\n{out}"
    declared = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    assert declared == sparkscope.__version__, "pyproject.toml and sparkscope/__init__.py disagree on the version"


def test_help_names_every_command_and_the_exit_codes(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0
    description = out.split("positional arguments")[0]
    commands = cli.build_parser()._subparsers._group_actions[0].choices
    assert set(commands) == {"up", "down", "status", "install", "conf", "demo", "report", "compare", "profile", "top"}
    missing = [c for c in commands if not re.search(rf"\b{c}\b", description)]
    assert not missing, f"the help's description leaves out {missing}"
    for code_, _meaning in EXIT_CODES:
        assert re.search(rf"^\s+{code_}\s", out, re.M), f"exit code {code_} is not in --help"


@pytest.mark.parametrize("argv", [
    ("status", "--bogus"),  # an unknown flag
    ("top", "--interval", "0"),  # a bad value
    ("frobnicate",),  # no such command
    ("test",),  # the developers' command is not the product's: ./sparkscope test runs sparkscope_dev
    ("conf", "--k8s", "--host", "h"),  # flags that cannot go together, found after argparse
])
def test_a_usage_error_exits_2(capsys, argv):
    code, _, err = run(capsys, *argv)
    assert code == 2, err


@pytest.fixture
def stack_down(tmp_path, monkeypatch):
    """Settings of a stack that is not running: nothing listens on its ports."""
    settings = isolated_settings(tmp_path / "state")
    for module in (cli, report_command):
        monkeypatch.setattr(module, "load_settings", lambda: settings)
    return settings


def test_a_runtime_error_exits_1_report_against_a_stack_that_is_down(capsys, stack_down):
    code, _, err = run(capsys, "report")
    assert code == 1
    assert "InfluxDB not reachable" in err and "./sparkscope up" in err


def test_status_of_a_stack_that_is_down_exits_3_and_its_json_says_why(capsys, stack_down):
    code, out, _ = run(capsys, "status", "--backend", "native")
    assert code == 3
    code, out, _ = run(capsys, "status", "--backend", "native", "--json")
    assert code == 3
    document = json.loads(out)
    assert document["all_up"] is False and document["backend"] == "native"
    assert [s["name"] for s in document["services"]] == ["influxdb", "telegraf", "grafana"]
    for service in document["services"]:
        assert set(service) >= {"name", "state", "pid", "url", "version"}
        assert service["pid"] is None
    influxdb = document["services"][0]
    assert influxdb["state"] == "down" and influxdb["url"].endswith(f":{stack_down.influxdb_port}")


def test_status_json_gives_a_native_service_its_pid_and_a_container_its_name():
    from sparkscope.stack import ServiceStatus
    rows = [ServiceStatus("influxdb", "native", "up", "pid 4242", "http://127.0.0.1:8086", "1.13.1"),
            ServiceStatus("telegraf", "compose", "up", "container sparkscope-telegraf-1", "127.0.0.1:2003"),
            ServiceStatus("grafana", "native", "not installed", "-", "http://127.0.0.1:3000")]
    document = cli.status_document("native", rows, True)
    assert json.loads(json.dumps(document)) == document
    assert [(s["pid"], s["container"], s["version"]) for s in document["services"]] == [
        (4242, None, "1.13.1"), (None, "sparkscope-telegraf-1", None), (None, None, None)]


def test_report_json_holds_the_facts_the_verdict_prints(tmp_path):
    run_ = facts()
    advice = advise(run_)
    runs = [report_command.run_summary(run_)]
    document = json.loads(json.dumps(report_command.report_document(run_, advice, runs, tmp_path / "r.html")))
    assert document["run"] == "app-1" and document["app_name"] == "etl"
    assert (document["started_ms"], document["ended_ms"], document["duration_ms"]) == (0, 60_000, 60_000)
    assert [e["id"] for e in document["executors"]] == ["0", "1"]
    assert document["peaks"]["heap"] == run_.executors["0"].peaks["JVMHeapMemory"]
    assert document["verdict"] == advice.verdict and document["summary"] == advice.summary
    assert document["conf"] == advice.conf_lines()
    assert [r["key"] for r in document["recommendations"]] == [r.key for r in advice.recommendations]
    assert document["report"].endswith("r.html")


@pytest.mark.parametrize("command", ["report", "top", "profile"])
def test_report_top_and_profile_take_the_run_as_their_first_argument(command):
    args = cli.build_parser().parse_args([command, "app-20261127101500-0003"])
    assert args.app_id == "app-20261127101500-0003"
    assert cli.build_parser().parse_args([command]).app_id is None  # the newest run


def test_profile_still_takes_app_and_says_it_is_deprecated(capsys):
    args = cli.build_parser().parse_args(["profile", "--app", "app-1"])
    assert profile_command.run_of(args) == "app-1"
    assert "--app is deprecated" in capsys.readouterr().err
    args = cli.build_parser().parse_args(["profile", "app-1", "--app", "app-2"])
    with pytest.raises(profile_command.UsageError, match="two runs given"):
        profile_command.run_of(args)


# --- status reads: InfluxDB's refusals from Telegraf's log, never a test write ----------

REFUSED = ("{at} E! [outputs.influxdb] When writing to [http://127.0.0.1:8086]: 500 Internal Server Error: "
           "engine: error writing WAL entry: write /state/influxdb/wal/spark/autogen/2/_00001.wal: "
           "no space left on device")


def test_influxdb_refusing_telegraf_s_writes_is_read_from_telegraf_s_log_within_the_last_minute():
    from datetime import datetime, timezone
    from sparkscope.stack.influx_storage import telegraf_refusal
    now = datetime(2026, 11, 27, 10, 0, 0, tzinfo=timezone.utc)
    lines = ["2026-11-27T09:58:00Z I! Starting Telegraf 1.37.3",
             REFUSED.format(at="2026-11-27T09:59:30Z"),
             "2026-11-27T09:59:30Z E! [agent] Error writing to outputs.influxdb: could not write any address"]
    assert telegraf_refusal(lines, now).endswith("no space left on device")
    assert telegraf_refusal(["telegraf-1  | " + lines[1]], now).startswith("500 Internal Server Error")  # compose
    assert telegraf_refusal(lines, now.replace(minute=2)) is None  # 2.5 minutes ago: since then it went through
    assert telegraf_refusal(lines[:1], now) is None
    # A refusal by the InfluxDB before its restart is not the current one's (the fix status gives
    # for a full disk is that restart), and an InfluxDB that was down refused nothing: its health says.
    assert telegraf_refusal(lines, now, since=datetime(2026, 11, 27, 9, 59, 40, tzinfo=timezone.utc)) is None
    assert telegraf_refusal(lines, now, since=datetime(2026, 11, 27, 9, 59, 0, tzinfo=timezone.utc))
    unreachable = ('2026-11-27T09:59:50Z E! [outputs.influxdb] When writing to [http://127.0.0.1:8086]: failed doing '
                   'req: Post "http://127.0.0.1:8086/write?db=spark": dial tcp 127.0.0.1:8086: connect: connection refused')
    assert telegraf_refusal([unreachable], now) is None
    # Nor is a write that met an InfluxDB still opening its files (the relay's queue, then
    # Telegraf's own timeout) or a connection cut: only an answer with an HTTP status refuses.
    for cause in ('context deadline exceeded (Client.Timeout exceeded while awaiting headers)', 'EOF'):
        assert telegraf_refusal([unreachable.replace("dial tcp 127.0.0.1:8086: connect: connection refused",
                                                     cause)], now) is None
    assert telegraf_refusal([REFUSED.format(at="2026-11-27T09:59:50Z").replace("500 Internal Server Error",
                                                                               "503 Service Unavailable")], now)


def test_a_process_start_is_read_to_the_tick_not_the_boot_s_whole_second():
    """status tells a refusal of the InfluxDB before a restart from one of the new
    process by the new one's start: /proc/stat's btime alone (whole seconds) put it
    up to a second early, so the old process's last refusal read as the new one's."""
    import subprocess
    from datetime import datetime, timezone
    from sparkscope.process import process_started_at
    before = datetime.now(timezone.utc)
    child = subprocess.Popen(["sleep", "5"])
    try:
        started = process_started_at(child.pid)
        after = datetime.now(timezone.utc)
    finally:
        child.kill()
        child.wait()
    assert (before - started).total_seconds() < 0.05 and started <= after


def test_status_reports_a_refusing_influxdb_from_telegraf_s_log_and_writes_nothing(tmp_path, monkeypatch):
    """Both running and answering, InfluxDB refusing Telegraf's writes: influxdb and
    telegraf are degraded (not all up); no write is attempted at all."""
    from datetime import datetime, timezone
    from sparkscope import stack as stack_module
    from sparkscope.stack.native import NativeBackend
    from sparkscope.store import influx
    settings = isolated_settings(tmp_path / "state")
    backend = NativeBackend(settings)
    log = backend.log_path("telegraf")
    log.parent.mkdir(parents=True)
    log.write_text(REFUSED.format(at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")) + "\n")
    monkeypatch.setattr(NativeBackend, "processes", lambda self: {"influxdb": "pid 1", "telegraf": "pid 2",
                                                                  "grafana": None})
    monkeypatch.setattr(stack_module, "health_checks", lambda s: {n: (lambda: True, "addr") for n in
                                                                 ("influxdb", "telegraf", "grafana")})
    monkeypatch.setattr(influx, "server_version", lambda url: "1.13.1")
    monkeypatch.setattr(influx, "database_stats", lambda *a: (_ for _ in ()).throw(influx.InfluxError("no")))
    monkeypatch.setattr(influx, "query", lambda *a, **k: [])
    monkeypatch.setattr(influx, "write", lambda *a, **k: pytest.fail("status wrote to InfluxDB"))
    rows = {r.name: r for r in backend.status()}
    assert rows["influxdb"].state == "degraded"
    assert "refuses writes: its disk is full" in rows["influxdb"].detail
    assert "InfluxDB says: 500 Internal Server Error" in rows["influxdb"].detail
    assert rows["telegraf"].state == "degraded" and "refused its writes" in rows["telegraf"].detail


@pytest.mark.parametrize("age_s, says", [(5, "no report yet (Telegraf started 5 s ago"),
                                         (300, "no report in the last 2 min")])
def test_a_telegraf_just_started_has_not_reported_yet_and_one_long_silent_is_suspect(tmp_path, monkeypatch,
                                                                                    age_s, says):
    """Right after `up`, Telegraf's first buffer report (every 10 s) is not stored yet: status
    says so rather than suggest InfluxDB is unreachable; minutes without one is a problem."""
    from datetime import datetime, timedelta, timezone
    from sparkscope import stack as stack_module
    from sparkscope.stack.native import NativeBackend
    from sparkscope.store import influx
    backend = NativeBackend(isolated_settings(tmp_path / "state"))
    monkeypatch.setattr(NativeBackend, "processes", lambda self: {"influxdb": "pid 1", "telegraf": "pid 2",
                                                                  "grafana": None})
    monkeypatch.setattr(NativeBackend, "started_at",
                        lambda self, name: datetime.now(timezone.utc) - timedelta(seconds=age_s))
    monkeypatch.setattr(stack_module, "health_checks", lambda s: {n: (lambda: True, "addr") for n in
                                                                 ("influxdb", "telegraf", "grafana")})
    monkeypatch.setattr(influx, "server_version", lambda url: "1.13.1")
    monkeypatch.setattr(influx, "database_stats", lambda *a: (_ for _ in ()).throw(influx.InfluxError("no")))
    monkeypatch.setattr(influx, "query", lambda *a, **k: [])
    rows = {r.name: r for r in backend.status()}
    assert rows["telegraf"].data.startswith("buffer: " + says)
