"""Settings come from .env.example, .env and the environment, and bad values
are refused with a message that names the key."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from sparkscope.process import quiet
from sparkscope.stack import StackError
from sparkscope.stack.native import NativeBackend
from sparkscope.settings import ROOT, SettingsError, ensure_env_file, load_settings, shipped_defaults


@pytest.fixture
def root(tmp_path):
    shutil.copy(ROOT / ".env.example", tmp_path / ".env.example")
    return tmp_path


def test_defaults_keep_every_listener_on_loopback(root):
    s = load_settings(root, {})
    assert s.http_bind == "127.0.0.1" and s.influx_url == "http://127.0.0.1:8086"
    assert s.graphite_bind == "127.0.0.1" and s.graphite_port == 2003
    assert s.password_is_placeholder
    # A .env.example of an older checkout, without the key: the same.
    example = (root / ".env.example").read_text()
    (root / ".env.example").write_text(example.replace("GRAPHITE_BIND=127.0.0.1\n", ""))
    assert load_settings(root, {}).graphite_bind == "127.0.0.1"


def test_dot_env_overrides_example_and_environment_overrides_dot_env(root):
    (root / ".env").write_text("GRAFANA_PORT=3300\nGRAFANA_ADMIN_PASSWORD='s3cret'\n")
    assert load_settings(root, {}).grafana_port == 3300
    assert load_settings(root, {}).grafana_password == "s3cret"
    assert load_settings(root, {"GRAFANA_PORT": "3400"}).grafana_port == 3400


def test_the_suite_s_own_stacks_take_nothing_from_the_developer_s_env(root, tmp_path, monkeypatch):
    """A developer who exposes their stack (INFLUXDB_BIND=0.0.0.0 in the checkout's .env)
    must not get test InfluxDBs listening on every interface."""
    from sparkscope_testkit import sandbox
    (root / ".env").write_text("INFLUXDB_BIND=0.0.0.0\nALERT_SLACK_URL=https://hooks.example/dev\n")
    assert load_settings(root, {}).influxdb_bind == "0.0.0.0"  # what up on that checkout does
    monkeypatch.setattr(sandbox, "ROOT", root)
    isolated = sandbox.isolated_settings(tmp_path / "state")
    assert isolated.influxdb_bind == "127.0.0.1"
    assert "hooks.example" not in str(isolated.as_env())


@pytest.mark.parametrize("key,value,message", [
    ("GRAFANA_PORT", "70000", "GRAFANA_PORT"),
    ("INFLUXDB_PORT", "http", "INFLUXDB_PORT"),
    ("SPARKSCOPE_RETENTION", "thirty days", "InfluxQL duration"),
    ("SPARKSCOPE_DB", "spark; DROP", "SPARKSCOPE_DB"),
    # Empty would make Telegraf and InfluxDB listen on every interface.
    ("GRAPHITE_BIND", "", "GRAPHITE_BIND is empty"),
    ("SPARKSCOPE_HTTP_BIND", " ", "SPARKSCOPE_HTTP_BIND is empty"),
])
def test_bad_values_are_refused_naming_the_key(root, key, value, message):
    with pytest.raises(SettingsError, match=message):
        load_settings(root, {key: value})


def test_malformed_env_line_names_file_and_line(root):
    (root / ".env").write_text("GRAFANA_PORT=3300\nthis line is wrong\n")
    with pytest.raises(SettingsError, match=r"\.env:2"):
        load_settings(root, {})


def test_env_values_are_read_as_docker_compose_reads_them(root):
    """docs.docker.com/compose/env-file/: an unquoted value's ` # comment` is not
    the value; in quotes a # is; `export KEY=` is KEY=; the README's own alert line."""
    (root / ".env").write_text(
        "ALERT_WEBHOOK_URL=https://hooks.example.com/sparkscope   # any endpoint\n"
        "ALERT_SLACK_URL=https://hooks.slack.com/x#anchor\n"  # no space before #: part of the value
        "ALERT_EMAIL_TO=\"ops # on call <ops@example.com>\"  # a comment after the quote\n"
        "export SPARKSCOPE_DB=spark_x\n"
        "GRAFANA_ADMIN_PASSWORD='it\\'s # secret'\n"
        "GRAFANA_ADMIN_USER=\"ad\\tmin\"\n"
        "  # an indented comment line\n")
    settings = load_settings(root, {})
    contacts = dict(settings.alert_contacts)
    assert {k: contacts[k] for k in ("ALERT_WEBHOOK_URL", "ALERT_SLACK_URL", "ALERT_EMAIL_TO")} == {
        "ALERT_WEBHOOK_URL": "https://hooks.example.com/sparkscope",
        "ALERT_SLACK_URL": "https://hooks.slack.com/x#anchor",
        "ALERT_EMAIL_TO": "ops # on call <ops@example.com>"}
    assert settings.database == "spark_x"
    assert settings.grafana_password == "it's # secret"
    assert settings.grafana_user == "ad\tmin"


@pytest.mark.parametrize("line, message", [
    ('ALERT_EMAIL_TO="unclosed # value', r"\.env:1: the value's \" is never closed"),
    ("ALERT_EMAIL_TO='a' b", r"\.env:1: 'b' after the closing '"),
    ("ALERT_WEBHOOK_URL=https://x/$HOOK", r"\.env:1: .*holds a \$.*single quotes"),
    ('ALERT_WEBHOOK_URL="https://x/${HOOK}"', r"\.env:1: .*holds a \$.*single quotes"),
    ("ALERT WEBHOOK=x", r"\.env:1: 'ALERT WEBHOOK' is not a variable name"),
])
def test_env_lines_compose_would_read_otherwise_are_refused_naming_file_and_line(root, line, message):
    (root / ".env").write_text(line + "\n")
    with pytest.raises(SettingsError, match=message):
        load_settings(root, {})


def test_a_dollar_in_single_quotes_is_kept_as_compose_keeps_it(root):
    (root / ".env").write_text("ALERT_WEBHOOK_URL='https://x/$HOOK'\n")
    assert dict(load_settings(root, {}).alert_contacts)["ALERT_WEBHOOK_URL"] == "https://x/$HOOK"


def test_up_refuses_the_placeholder_password(root):
    settings = load_settings(root, {"GRAFANA_ADMIN_PASSWORD": "change-me"})
    with pytest.raises(StackError, match="placeholder"):
        NativeBackend(settings).up(progress=quiet)


def test_up_writes_a_private_env_with_a_random_password_when_none_exists(root, monkeypatch):
    monkeypatch.delenv("GRAFANA_ADMIN_PASSWORD", raising=False)
    assert ensure_env_file(load_settings(root, {}), progress=lambda _: None)
    written = load_settings(root, {})
    assert not written.password_is_placeholder and len(written.grafana_password) >= 20
    assert (root / ".env").stat().st_mode & 0o077 == 0
    assert not ensure_env_file(written, progress=lambda _: None)  # never overwrites


def test_settings_written_as_env_read_back_the_same(tmp_path):
    """as_env is what compose and CLI subprocesses get: every setting must come
    back through load_settings unchanged (a key missing there would silently
    fall back to a default)."""
    from sparkscope_testkit.sandbox import isolated_settings
    settings = isolated_settings(tmp_path, "pass", GRAFANA_HOME="/opt/grafana", EVENTS_AUTH="on",
                                 TELEGRAF_BUFFER_STRATEGY="disk", TELEGRAF_BUFFER_LIMIT="1234",
                                 SPARKSCOPE_NO_END_GRACE_S="7", INFLUXDB_READ_USER="someone_else")
    assert load_settings(ROOT, settings.as_env()) == settings


# --- every default written once: .env.example ---------------------------------------------

SUBSTITUTION = re.compile(r"\$\{([A-Z_]+):-([^}]*)\}")
# Variables of the programs' own environment that the runners compute from
# settings (never set in .env): their fallback, from the defaults.
DERIVED = {
    "GRAPHITE_LISTEN": lambda d: {f":{d['GRAPHITE_PORT']}"},  # Telegraf in its container: every interface of it
    "EVENTS_LISTEN": lambda d: {f":{d['EVENTS_PORT']}"},
    # Natively on loopback; for compose's setup service, the influxdb service by name.
    "INFLUX_URL": lambda d: {f"http://127.0.0.1:{d['INFLUXDB_PORT']}", f"http://influxdb:{d['INFLUXDB_PORT']}"},
    "TELEGRAF_BUFFER_DIR": lambda d: {"/var/lib/telegraf/buffer"},  # the compose volume's mount
    "ROLLUPS_FILE": lambda d: {'$(dirname "$0")/rollups.setup'},  # beside setup.sh
    # Telegraf's listener credentials: set only when EVENTS_AUTH is on, so none by default.
    **{key: (lambda d: {""}) for key in ("EVENTS_USER", "EVENTS_PASSWORD", "EVENTS_LISTENER_USER",
                                         "EVENTS_LISTENER_PASSWORD")},
}
FILES_WITH_FALLBACKS = ("docker-compose.yml", "telegraf/telegraf.conf", "influxdb/setup.sh")


def fallback_problems(texts: dict[str, str], defaults: dict[str, str]) -> list[str]:
    problems = []
    for name, text in texts.items():
        for key, fallback in SUBSTITUTION.findall(text):
            if key in DERIVED:
                expected = DERIVED[key](defaults)
            elif key in defaults:
                expected = {defaults[key]}
            else:
                problems.append(f"{name}: ${{{key}}} is neither a setting of .env.example nor derived from one")
                continue
            if fallback not in expected:
                problems.append(f"{name}: ${{{key}:-{fallback}}}, but the default is {' or '.join(sorted(map(repr, expected)))}")
    return problems


def test_every_fallback_in_compose_telegraf_and_setup_is_the_default_of_env_example():
    texts = {name: (ROOT / name).read_text() for name in FILES_WITH_FALLBACKS}
    assert sum(len(SUBSTITUTION.findall(t)) for t in texts.values()) > 40  # the scan sees them at all
    assert fallback_problems(texts, shipped_defaults()) == []


def test_a_fallback_that_differs_from_the_default_is_found():
    compose = (ROOT / "docker-compose.yml").read_text()
    assert "${GRAPHITE_PORT:-2003}" in compose
    drifted = compose.replace("${GRAPHITE_PORT:-2003}", "${GRAPHITE_PORT:-2004}", 1)
    assert fallback_problems({"c": drifted}, shipped_defaults()) == [
        "c: ${GRAPHITE_PORT:-2004}, but the default is '2003'"]
    assert fallback_problems({"c": "${NEW_KNOB:-1}"}, shipped_defaults()) == [
        "c: ${NEW_KNOB} is neither a setting of .env.example nor derived from one"]


def test_the_probes_spark_conf_and_settings_defaults_are_env_examples():
    from sparkscope.probes.blockprobe import probe
    from sparkscope.probes.threadprobe import sampler
    d = shipped_defaults()
    assert probe.DEFAULT_PERIOD_S == int(d["BLOCKPROBE_PERIOD_S"])
    assert probe.DEFAULT_THRESHOLD_MS == float(d["BLOCKPROBE_THRESHOLD_MS"])
    assert sampler.DEFAULT_RATE_HZ == float(d["THREADPROBE_RATE_HZ"])
    assert sampler.DEFAULT_PERIOD_S == int(d["THREADPROBE_PERIOD_S"])
    for name in ("spark-conf/metrics.properties", "spark-conf/spark-defaults.conf"):
        ports = re.findall(r"^[^#]*sink\.graphite\.port=(\d+)", (ROOT / name).read_text(), re.M)
        assert ports == [d["GRAPHITE_PORT"]], name
    # With neither a .env nor a template in its root, a checkout reads the shipped defaults.
    s = load_settings(Path("/nonexistent-root"), {})
    assert (s.graphite_port, s.events_port, s.database, s.no_end_grace_s) == (
        int(d["GRAPHITE_PORT"]), int(d["EVENTS_PORT"]), d["SPARKSCOPE_DB"], int(d["SPARKSCOPE_NO_END_GRACE_S"]))


def test_one_telegraf_buffer_size_everywhere_rides_out_the_downtime_at_the_rated_load():
    """TELEGRAF_BUFFER_LIMIT: .env.example holds the number, sized to keep every
    point of the rated ingest through the InfluxDB downtime to survive (an
    eighth to spare for host metrics and events); telegraf.conf's fallback,
    compose's default and the chart's value are that number, and the chart's
    memory limit holds a full buffer (else the kernel kills Telegraf and the
    whole buffer goes)."""
    import yaml
    from sparkscope.settings import (BUFFER_BYTES_PER_POINT, INFLUX_DOWNTIME_TO_SURVIVE_S,
                                     INFLUX_RETURN_SLACK_S, RATED_STORED_POINTS_S)
    shipped = int(shipped_defaults()["TELEGRAF_BUFFER_LIMIT"])
    assert shipped >= RATED_STORED_POINTS_S * (INFLUX_DOWNTIME_TO_SURVIVE_S + INFLUX_RETURN_SLACK_S) * 9 // 8
    conf = re.findall(r"^\s*metric_buffer_limit = \$\{TELEGRAF_BUFFER_LIMIT:-(\d+)\}",
                      (ROOT / "telegraf" / "telegraf.conf").read_text(), flags=re.M)
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    compose_default = re.fullmatch(r"\$\{TELEGRAF_BUFFER_LIMIT:-(\d+)\}",
                                   compose["services"]["telegraf"]["environment"]["TELEGRAF_BUFFER_LIMIT"])
    values = yaml.safe_load((ROOT / "charts" / "sparkscope" / "values.yaml").read_text())["telegraf"]
    assert conf == [str(shipped)] and compose_default and int(compose_default.group(1)) == shipped
    assert values["buffer"]["limit"] == shipped
    memory = re.fullmatch(r"(\d+)([MG])i", values["resources"]["limits"]["memory"])
    limit_bytes = int(memory.group(1)) << (30 if memory.group(2) == "G" else 20)
    assert limit_bytes >= shipped * BUFFER_BYTES_PER_POINT + (256 << 20)
