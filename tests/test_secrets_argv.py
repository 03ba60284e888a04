"""Secrets never ride in a command line: /proc/<pid>/cmdline is readable by
every user of the host (and by any hostPID pod on a Kubernetes node)."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from sparkscope.process import stop_group

from sparkscope_testkit.sandbox import isolated_settings

from test_auth import run_setup_sh, start_influxd


def curl_spy(bin_dir: Path, argv_log: Path) -> str:
    """A curl on PATH that records its argv (what `ps` shows) and runs the real one."""
    bin_dir.mkdir()
    real = shutil.which("curl")
    spy = bin_dir / "curl"
    spy.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> {argv_log}\nexec {real} \"$@\"\n")
    spy.chmod(0o755)
    return f"{bin_dir}:{os.environ['PATH']}"


@pytest.mark.skipif(shutil.which("curl") is None, reason="influxdb/setup.sh runs curl (the influxdb image has it)")
def test_compose_setup_passes_no_password_in_curls_argv(tmp_path):
    settings = isolated_settings(tmp_path / "state")
    fresh = start_influxd(settings, auth=True)
    argv_log = tmp_path / "curl-argv"
    try:
        path = curl_spy(tmp_path / "bin", argv_log)
        first = run_setup_sh(settings, PATH=path)  # creates the admin, the writer and the reader
        again = run_setup_sh(settings, PATH=path)  # SET PASSWORD for both
        assert first.returncode == 0 and again.returncode == 0, first.stderr + again.stderr
    finally:
        stop_group(fresh.pid, proc=fresh)
    seen = argv_log.read_text()
    assert seen.count("/query") > 10  # the spy saw the statements' requests
    for secret in (settings.influx_admin_password, settings.influx_write_password, settings.influx_read_password):
        assert secret not in seen
    leftovers = [p for p in Path(os.environ.get("TMPDIR", "/tmp")).iterdir()
                 if p.is_file() and p.stat().st_uid == os.geteuid() and p.stat().st_mode & stat.S_IROTH
                 and settings.influx_write_password in p.read_text(errors="replace")]
    assert leftovers == []
