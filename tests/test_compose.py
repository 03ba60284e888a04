"""docker-compose.yml is valid, keeps HTTP on loopback and needs a real password.
Validated offline with docker compose's own parser (no engine needed)."""

from __future__ import annotations

import re
import subprocess

import pytest

from sparkscope_dev.compose_validator import ensure_compose_validator
from sparkscope.settings import ROOT


@pytest.fixture(scope="module")
def compose():
    return ensure_compose_validator()


def run_compose(compose, env_file, *args):
    return subprocess.run([*compose, "--project-directory", str(ROOT), "-f", str(ROOT / "docker-compose.yml"),
                           "--env-file", str(env_file), *args], capture_output=True, text=True,
                          env={"PATH": "/usr/local/bin:/usr/bin:/bin"})


def filled_example() -> str:
    """.env.example with every password set, as ./sparkscope up writes them."""
    text = (ROOT / ".env.example").read_text().replace("change-me", "a-real-password")
    return re.sub(r"^(\w+_PASSWORD)=$", lambda m: f"{m.group(1)}={m.group(1).lower()}-0123456789", text, flags=re.M)


def test_compose_file_is_valid(compose, tmp_path):
    env = tmp_path / ".env"
    env.write_text(filled_example())
    result = run_compose(compose, env, "config", "-q")
    assert result.returncode == 0, result.stderr


def test_compose_refuses_to_start_without_a_grafana_password(compose, tmp_path):
    env = tmp_path / ".env"
    env.write_text(filled_example().replace("GRAFANA_ADMIN_PASSWORD=a-real-password\n", ""))
    result = run_compose(compose, env, "config", "-q")
    assert result.returncode != 0 and "GRAFANA_ADMIN_PASSWORD" in result.stderr
    # Nor without InfluxDB's users' passwords: there is no default one.
    env.write_text(filled_example().replace("INFLUXDB_READ_PASSWORD=influxdb_read_password-0123456789\n", ""))
    result = run_compose(compose, env, "config", "-q")
    assert result.returncode != 0 and "INFLUXDB_READ_PASSWORD" in result.stderr


def test_every_port_binds_loopback_unless_graphite_is_asked_to_face_the_network(compose, tmp_path):
    env = tmp_path / ".env"
    example = filled_example()
    env.write_text(example)
    result = run_compose(compose, env, "config")
    assert result.returncode == 0, result.stderr
    config = _parse(result.stdout)
    ports = {name: svc.get("ports", []) for name, svc in config["services"].items()}
    assert _binds(ports["grafana"]) == {("127.0.0.1", "3000")}
    assert _binds(ports["influxdb"]) == {("127.0.0.1", "8086")}
    # Telegraf shares the host's network, so that its network input sees the
    # machine's interfaces: it binds the Graphite and events ports itself.
    telegraf = config["services"]["telegraf"]
    assert telegraf["network_mode"] == "host" and not ports["telegraf"]
    assert telegraf["environment"]["GRAPHITE_LISTEN"] == "127.0.0.1:2003"
    assert telegraf["environment"]["EVENTS_LISTEN"] == "127.0.0.1:8186"
    assert telegraf["environment"]["INFLUX_URL"] == "http://127.0.0.1:8086"
    # A cluster's executors send from other machines: asked for, both listeners face the network,
    # and only they.
    env.write_text(example.replace("GRAPHITE_BIND=127.0.0.1", "GRAPHITE_BIND=0.0.0.0"))
    result = run_compose(compose, env, "config")
    assert result.returncode == 0, result.stderr
    config = _parse(result.stdout)
    telegraf = config["services"]["telegraf"]
    assert telegraf["environment"]["GRAPHITE_LISTEN"] == "0.0.0.0:2003"
    assert telegraf["environment"]["EVENTS_LISTEN"] == "0.0.0.0:8186"
    assert _binds(config["services"]["grafana"]["ports"]) == {("127.0.0.1", "3000")}
    # Grafana shared with colleagues: InfluxDB stays on loopback, and the setup runs before
    # the services that log in to it.
    env.write_text(example.replace("SPARKSCOPE_HTTP_BIND=127.0.0.1", "SPARKSCOPE_HTTP_BIND=0.0.0.0"))
    config = _parse(run_compose(compose, env, "config").stdout)
    assert _binds(config["services"]["grafana"]["ports"]) == {("0.0.0.0", "3000")}
    assert _binds(config["services"]["influxdb"]["ports"]) == {("127.0.0.1", "8086")}
    for name in ("telegraf", "grafana"):
        assert config["services"][name]["depends_on"]["influxdb-setup"]["condition"] == \
            "service_completed_successfully"
    assert config["services"]["grafana"]["environment"]["INFLUX_USER"] == "sparkscope_reader"
    assert config["services"]["telegraf"]["environment"]["INFLUX_USER"] == "sparkscope_writer"


def _parse(text: str) -> dict:
    import yaml

    return yaml.safe_load(text)


def _binds(ports) -> set[tuple[str, str]]:
    out = set()
    for p in ports:
        if isinstance(p, str):
            host, published, _ = p.rsplit(":", 2)
            out.add((host, published))
        else:
            out.add((p.get("host_ip", "0.0.0.0"), str(p["published"])))
    return out
