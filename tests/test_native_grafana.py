"""Natively, sparkscope starts the Grafana the user installed and never
builds one: found through GRAFANA_HOME or on PATH; without one, the rest of
the stack runs, `up` says how to get Grafana, and `status` shows it as not
installed rather than failing."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from sparkscope import cli, versions
from sparkscope.process import quiet
from sparkscope.stack.grafana_local import GrafanaNotFound, find_grafana
from sparkscope.stack.native import NativeBackend, PidFile
from sparkscope.settings import ROOT, load_settings
from sparkscope_testkit import fake_grafana
from sparkscope_testkit.sandbox import settings_environ, throwaway_stack

FAKE = Path(fake_grafana.__file__)


def grafana_home(root: Path, binary: str = "grafana") -> Path:
    """A Grafana home laid out as Grafana's tarball unpacks: bin/<binary>, conf/defaults.ini."""
    (root / "bin").mkdir(parents=True)
    (root / "conf").mkdir()
    (root / "conf" / "defaults.ini").write_text("[server]\n")
    launcher = root / "bin" / binary
    launcher.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE} \"$@\"\n")
    launcher.chmod(0o755)
    return root


def test_grafana_home_that_holds_no_grafana_is_refused_naming_the_setting(tmp_path):
    (tmp_path / "bin").mkdir()
    with pytest.raises(GrafanaNotFound, match=r"GRAFANA_HOME=.* is not a Grafana home directory"):
        find_grafana(str(tmp_path))


def test_a_packaged_grafana_on_path_is_found_with_its_share_home(tmp_path):
    # .deb/.rpm and Homebrew: the binary in <prefix>/sbin or bin, the home in <prefix>/share/grafana.
    home = grafana_home(tmp_path / "usr" / "share" / "grafana")
    sbin = tmp_path / "usr" / "sbin"
    sbin.mkdir()
    (sbin / "grafana").symlink_to(home / "bin" / "grafana")
    found = find_grafana("", path=str(sbin))
    assert found is not None and found.home == home and found.binary == home / "bin" / "grafana"
    assert found.argv(ROOT / "grafana" / "grafana.ini")[:4] == [str(home / "bin" / "grafana"), "server",
                                                                "--homepath", str(home)]


def test_without_grafana_up_starts_the_rest_says_how_to_get_it_and_status_is_not_a_failure(
        tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                               if not shutil.which("grafana", path=p)
                                               and not shutil.which("grafana-server", path=p)))
    with throwaway_stack(tmp_path / "state") as settings:
        for key, value in settings_environ(settings).items():
            monkeypatch.setenv(key, value)
        messages: list[str] = []
        NativeBackend(settings).up(progress=messages.append)  # a second up: all running but Grafana
        assert any(m.startswith("grafana   not started: Grafana is not installed here") and "--backend compose" in m
                   for m in messages), messages
        rows = {row.name: row for row in NativeBackend(settings).status()}
        assert (rows["influxdb"].state, rows["telegraf"].state, rows["grafana"].state) == (
            "up", "up", "not installed")
        assert "Grafana's own packages" in rows["grafana"].detail
        capsys.readouterr()
        assert cli.main(["status", "--backend", "native"]) == 0
        assert "not installed" in capsys.readouterr().out


def bundle_influxdb_plugin(home: Path) -> None:
    """The InfluxDB plugin as Grafana 13's tarball bundles it: data/plugins-bundled/<dir>/plugin.json."""
    plugin = home / "data" / "plugins-bundled" / "grafana-influxdb-datasource"
    plugin.mkdir(parents=True)
    (plugin / "plugin.json").write_text(json.dumps({"id": "influxdb", "type": "datasource"}))


# (version, whether its home bundles the InfluxDB plugin): 12.4 has it built in.
LAYOUTS = {"12.4": (versions.GRAFANA_12, False), "13-bundled": (versions.GRAFANA, True),
           "13-without-plugin": (versions.GRAFANA, False)}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_an_installed_grafana_is_started_with_our_provisioning_on_loopback_and_stopped_by_its_pid(
        tmp_path, monkeypatch, layout):
    version, bundled = LAYOUTS[layout]
    home = grafana_home(tmp_path / f"grafana-{version}")
    if bundled:
        bundle_influxdb_plugin(home)
    record = tmp_path / "record.json"
    monkeypatch.setenv("FAKE_GRAFANA_RECORD", str(record))
    monkeypatch.setenv("FAKE_GRAFANA_VERSION", version)
    with throwaway_stack(tmp_path / "state", only=("influxdb",)) as settings:
        env = dict(settings_environ(settings), GRAFANA_HOME=str(home))
        with_home = load_settings(ROOT, env)
        backend = NativeBackend(with_home)
        messages: list[str] = []
        backend.up(only=("grafana",), progress=messages.append)
        try:
            started = json.loads(record.read_text())
            assert started["argv"] == ["server", "--homepath", str(home), "--config",
                                       str(ROOT / "grafana" / "grafana.ini")]
            assert started["env"]["GF_PATHS_PROVISIONING"] == str(ROOT / "grafana" / "provisioning")
            assert started["env"]["SPARKSCOPE_DASHBOARDS_DIR"] == str(ROOT / "dashboards")
            assert (started["env"]["GF_SERVER_HTTP_ADDR"], started["env"]["GF_SERVER_HTTP_PORT"]) == (
                "127.0.0.1", str(with_home.grafana_port))
            row = next(r for r in backend.status() if r.name == "grafana")
            missing = [m for m in messages if "has no InfluxDB datasource plugin" in m]
            if layout == "13-without-plugin":
                # up and status both say it, with the commands that install it where this Grafana looks.
                plugins_dir = with_home.state_dir / "grafana" / "plugins"
                assert len(missing) == 1 and f"--pluginsDir {plugins_dir}" in missing[0], messages
                assert "GF_PLUGINS_PREINSTALL=influxdb" in missing[0]
                assert (row.state, row.version) == ("degraded", f"{version}-fake")
                assert "grafana cli plugins install influxdb" in row.detail
            else:
                assert missing == [] and (row.state, row.version) == ("up", f"{version}-fake")
            pid = PidFile(with_home.state_dir, "grafana").running_pid()
            assert pid is not None
        finally:
            backend.down(only=("grafana",), progress=quiet)
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
