"""The compose backend, through the same CLI as the native one: `up`, `status`
and `down` drive docker compose with the right arguments and read its answers
in every format it prints. No Docker engine runs here, so a fake `docker` on
PATH (src/sparkscope_testkit/fake_docker.py) records the calls, answers as the real one
does, and stands the services up as small local processes on free ports."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from sparkscope import cli, versions
from sparkscope.demo import command as demo_command
from sparkscope.process import quiet
from sparkscope.stack import StackError, choose_backend, open_stack, record_backend, recorded_backend
from sparkscope.stack.compose import containers_from_inspect, parse_ps_json
from sparkscope.settings import ROOT
from sparkscope_testkit.fake_docker import FakeDocker
from sparkscope_testkit.sandbox import isolated_settings

COMPOSE_ARGS = ["--project-directory", str(ROOT), "-f", str(ROOT / "docker-compose.yml")]


@pytest.fixture
def settings(tmp_path):
    return isolated_settings(tmp_path / "state")


@pytest.fixture
def docker(tmp_path, monkeypatch, settings):
    fake = FakeDocker(tmp_path / "docker")
    monkeypatch.setenv("PATH", f"{fake.path}:/usr/bin:/bin")
    monkeypatch.setenv("GRAFANA_ADMIN_PASSWORD", settings.grafana_password)  # no .env is written
    monkeypatch.setattr(cli, "load_settings", lambda: settings)
    yield fake
    fake.stop_all()


def run_cli(*argv: str) -> tuple[int, str]:
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(out):
        code = cli.main(list(argv))
    return code, out.getvalue()


def compose_calls(fake: FakeDocker) -> list[list[str]]:
    """The compose subcommands run, without the version probes and the project flags."""
    out = []
    for argv in fake.calls():
        args = argv[2:] if argv[:2] == ["docker", "compose"] else argv[1:] if argv[0] == "docker-compose" else None
        if args and args[:4] == COMPOSE_ARGS:
            out.append(args[4:])
    return out


def test_ps_json_is_read_one_object_per_line_and_as_one_array():
    objects = [{"Service": "influxdb", "State": "running", "Name": "sparkscope-influxdb-1"},
               {"Service": "grafana", "State": "exited", "Name": "sparkscope-grafana-1"}]
    lines = "\n".join(json.dumps(o) for o in objects) + "\n"
    assert parse_ps_json(lines) == objects == parse_ps_json(json.dumps(objects))
    assert parse_ps_json("") == [] == parse_ps_json("[]")


def test_compose_v1_containers_are_read_from_docker_inspect():
    inspected = ('[{"Id": "ab", "Name": "/sparkscope_influxdb_1", "State": {"Status": "running", '
                 '"Health": {"Status": "healthy"}}, "Config": {"Image": "influxdb:1.13.1", '
                 '"Labels": {"com.docker.compose.service": "influxdb"}}}]')
    assert containers_from_inspect(inspected) == [{"Service": "influxdb", "Name": "sparkscope_influxdb_1",
                                                   "State": "running", "Health": "healthy",
                                                   "Image": "influxdb:1.13.1"}]


def test_up_status_down_with_compose_v2_the_cli_remembers_the_backend(docker, settings):
    code, out = run_cli("up", "--backend", "compose")
    assert code == 0, out
    ups = [c for c in compose_calls(docker) if c[0] == "up"]
    assert ups == [["up", "-d", "influxdb", "telegraf", "grafana"]]
    # compose gets the ports and credentials from the same settings the native runner uses
    env = docker.call_env()[-1]
    assert env["INFLUXDB_PORT"] == str(settings.influxdb_port) and env["GRAPHITE_BIND"] == "127.0.0.1"
    assert env["GRAFANA_ADMIN_PASSWORD"] == settings.grafana_password
    assert recorded_backend(settings) == "compose"
    assert "compose backend" in out

    code, out = run_cli("status")  # no --backend: the recorded one
    assert code == 0, out
    influxdb = next(line for line in out.splitlines() if line.startswith("influxdb"))
    assert influxdb.split()[:4] == ["influxdb", "compose", "up", "container"]
    assert "sparkscope-influxdb-1" in influxdb and settings.influx_url in influxdb
    assert versions.INFLUXDB in influxdb and "database spark: 2.0 MB, 1,234 series" in influxdb
    grafana = next(line for line in out.splitlines() if line.startswith("grafana"))
    assert versions.GRAFANA in grafana and "sparkscope-grafana-1" in grafana

    code, out = run_cli("down")
    assert code == 0, out
    assert [c for c in compose_calls(docker) if c[0] != "ps"][-1] == ["down"]  # down, not down -v: data stays
    assert recorded_backend(settings) is None


def test_one_service_is_stopped_alone_and_status_says_how_to_start_it(docker, settings):
    assert run_cli("up", "--backend", "compose")[0] == 0
    assert run_cli("down", "influxdb")[0] == 0
    assert ["stop", "influxdb"] in compose_calls(docker) and ["down"] not in compose_calls(docker)
    code, out = run_cli("status")
    assert code == 3
    lines = out.splitlines()
    influxdb = lines.index(next(l for l in lines if l.startswith("influxdb")))
    assert lines[influxdb].split()[:3] == ["influxdb", "compose", "down"]
    assert "docker compose logs influxdb" in lines[influxdb + 1] and "./sparkscope up influxdb" in lines[influxdb + 1]
    assert recorded_backend(settings) == "compose"  # telegraf and grafana still run


def test_older_compose_v2_prints_one_json_array(docker, settings):
    docker.configure(engine=True, plugin=True, ps_format="array", fail_up="")
    assert run_cli("up", "--backend", "compose")[0] == 0
    code, out = run_cli("status")
    assert code == 0, out
    assert sum(" compose  up " in line for line in out.splitlines()) == 3


def test_docker_compose_v1_is_used_when_the_plugin_is_missing(docker, settings):
    docker.configure(engine=True, plugin=False, ps_format="lines", fail_up="")
    code, out = run_cli("up", "--backend", "compose")
    assert code == 0, out
    assert ["docker-compose", *COMPOSE_ARGS, "up", "-d", "influxdb", "telegraf", "grafana"] in docker.calls()
    code, out = run_cli("status")
    assert code == 0, out
    assert ["ps", "-q"] in compose_calls(docker)
    assert any(argv[:2] == ["docker", "inspect"] for argv in docker.calls())
    assert "container sparkscope_influxdb_1" in out


def test_a_failing_compose_up_says_what_compose_said_and_the_way_out(docker, settings):
    docker.configure(engine=True, plugin=True, ps_format="lines",
                     fail_up="Error response from daemon: pull access denied for influxdb")
    code, out = run_cli("up", "--backend", "compose")
    assert code == 1  # a runtime error
    assert "up -d" in out and "exited 1" in out and "./sparkscope up --backend native" in out
    assert recorded_backend(settings) == "compose"  # up was attempted: down and status look there


def test_without_a_record_the_backend_is_compose_only_when_an_engine_answers(docker, settings):
    assert choose_backend(settings) == "compose"
    docker.configure(engine=False, plugin=True, ps_format="lines", fail_up="")
    assert choose_backend(settings) == "native"
    record_backend(settings, "compose")
    assert choose_backend(settings) == "compose"  # what runs wins over what answers
    assert choose_backend(settings, "native") == "native"  # --backend wins over both
    with pytest.raises(StackError, match="native or compose"):
        choose_backend(settings, "kubernetes")


def test_compose_up_refuses_while_the_native_stack_runs(docker, settings, monkeypatch):
    from sparkscope.stack.native import NativeBackend

    record_backend(settings, "native")
    monkeypatch.setattr(NativeBackend, "processes", lambda self: {"influxdb": "pid 1", "telegraf": None,
                                                                   "grafana": None})
    with pytest.raises(StackError, match=r"the native stack is running; stop it first \(./sparkscope down\)"):
        open_stack(settings, "compose").up(progress=quiet)
    assert compose_calls(docker) == []


def test_the_demo_brings_the_stack_up_with_the_backend_up_would_choose(docker, settings):
    lines: list[str] = []
    stack = demo_command.bring_up(settings, out=lines.append)
    assert stack.name == "compose" and "stack: compose backend (a Docker engine answers)" in lines
    assert ["up", "-d", "influxdb", "telegraf", "grafana"] in compose_calls(docker)
    assert recorded_backend(settings) == "compose"  # so `./sparkscope down` stops what the demo started
