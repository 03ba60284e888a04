"""Settings come from .env.example, .env and the environment, and bad values
are refused with a message that names the key."""

from __future__ import annotations

import shutil

import pytest

from sparkscope.process import quiet
from sparkscope.stack import StackError
from sparkscope.stack.native import NativeBackend
from sparkscope.settings import ROOT, SettingsError, ensure_env_file, load_settings


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
