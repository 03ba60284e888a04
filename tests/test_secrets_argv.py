"""Secrets never ride in a command line: /proc/<pid>/cmdline is readable by
every user of the host (and by any hostPID pod on a Kubernetes node)."""

from __future__ import annotations

import os
import time
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


def command_lines_holding(secret: str) -> list[str]:
    """Every process's argv that shows the secret, as any user's `ps` would."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if secret in argv:
                found.append(f"{entry.name}: {argv[:200]}")
    return found


def test_the_events_password_is_in_no_spark_command_line_and_events_still_arrive(tmp_path):
    """EVENTS_AUTH on: a real Spark run (driver and two executors) given what
    ./sparkscope conf and the demo give it. While it runs, no process's argv
    holds the password; its annotator events get through the listener's auth."""
    import threading
    from conftest import Stack, run_spark_job
    from sparkscope.store import influx
    from sparkscope.provision.annotator_jar import ensure_annotator_jar
    from sparkscope.settings import ROOT
    from sparkscope.spark import conf as spark_conf
    from sparkscope_testkit.sandbox import throwaway_stack

    with throwaway_stack(tmp_path / "state", only=("influxdb", "telegraf"), EVENTS_AUTH="on") as settings:
        stack = Stack(settings)
        jar = ensure_annotator_jar(ROOT, progress=lambda _: None)
        seen: list[str] = []
        done = threading.Event()

        def watch() -> None:  # what a local user polling /proc sees during the run
            while not done.is_set():
                seen.extend(command_lines_holding(settings.events_password))
                time.sleep(0.2)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            env = getattr(spark_conf, "annotator_env", lambda _: {})(settings)
            run = run_spark_job(stack, "steady_job.py", tmp_path, args=["2"],
                                conf=spark_conf.annotator_properties(settings, jar), env=env)
        finally:
            done.set()
            watcher.join()
        assert seen == []
        stack.wait_for(f"SELECT count(\"duration_ms\") FROM \"sparkscope_application\" WHERE "
                       f"\"applicationid\" = {influx.string_literal(run.app_id)}", bool, deadline_s=60)
