"""Who may do what: InfluxDB with authentication, its three users, the
secrets in .env, and the binds that keep InfluxDB private when Grafana is
exposed. Everything against a real InfluxDB 1.8 started as the stack starts
it (the native backend), or as compose's influxdb-setup would set it up
(influxdb/setup.sh, run here with sh and curl)."""

from __future__ import annotations

import base64
import os
import re
import shutil
import socket
import ssl
import stat
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from sparkscope.process import start_group, stop_group, wait_until
from sparkscope.provision.go import ensure_influxd
from sparkscope.store import influx, schema
from sparkscope.errors import SparkscopeError
from sparkscope.generate.steps import COMMAND
from sparkscope.stack import native, rollups
from sparkscope.stack.native import NativeBackend
from sparkscope.settings import ROOT, SECRET_KEYS, ensure_env_file, load_settings, read_env_file

from sparkscope_testkit.sandbox import isolated_settings, settings_environ, throwaway_stack

SETUP_SH = ROOT / "influxdb" / "setup.sh"


def http_status(url: str, user: str = "", password: str = "", data: bytes | None = None) -> int:
    request = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
    if user:
        request.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code


def refused(call) -> str:
    with pytest.raises(influx.InfluxError) as err:
        call()
    return str(err.value)


@pytest.fixture(scope="module")
def influx_only(tmp_path_factory):
    with throwaway_stack(tmp_path_factory.mktemp("auth"), only=("influxdb",)) as settings:
        yield settings


def test_without_a_user_influxdb_answers_nothing_but_ping(influx_only):
    url, db = influx_only.influx_url, influx_only.database
    assert http_status(f"{url}/ping") == 204
    # What answers without a user, exactly what docs/security.md says answers (ping-auth-enabled
    # would put the four behind a user together, and the health checks with them).
    said = " ".join((ROOT / "docs" / "security.md").read_text().split("InfluxDB asks everyone for a user", 1)[1]
                    .split("Its debug endpoints", 1)[0].split())
    for path in ("/ping", "/status", "/health", "/metrics"):
        assert http_status(url + path) in (200, 204) and f"`{path}`" in said, path
    assert http_status(f"{url}/query?db={db}&q=SHOW+MEASUREMENTS") == 401
    assert http_status(f"{url}/write?db={db}", data=b"intruder value=1") == 401
    # The attack of the review, sent as GET: refused before it is parsed.
    assert http_status(f"{url}/query?q=DROP+DATABASE+%22{db}%22") == 401
    # Debug endpoints: pprof's profile and the expvar dump are the admin's alone.
    for path in ("/debug/vars", "/debug/pprof/profile?seconds=1", "/debug/requests"):
        assert http_status(url + path) == 401, path
        assert http_status(url + path, influx_only.influx_read_user, influx_only.influx_read_password) == 403, path
    assert http_status(f"{url}/debug/vars", influx_only.influx_admin_user, influx_only.influx_admin_password) == 200
    assert influx.query(influx_only.influx_admin, "SHOW DATABASES")  # the admin is who up says


def test_each_user_can_do_its_part_and_nothing_else(influx_only):
    s, db = influx_only, influx_only.database
    stamp = int(time.time())
    influx.write(s.influx_writer, db, f"auth_probe value=1 {stamp}")
    assert influx.query(s.influx_reader, 'SELECT "value" FROM "auth_probe"', db)[0]["values"][0][1] == 1

    # The reader: reads only.
    assert "403" in refused(lambda: influx.write(s.influx_reader, db, f"auth_probe value=2 {stamp + 1}"))
    for statement in ('DROP MEASUREMENT "auth_probe"', f'DROP DATABASE "{db}"', 'CREATE DATABASE "other"',
                      'CREATE USER "mallory" WITH PASSWORD \'mallory-pass-1\' WITH ALL PRIVILEGES',
                      f'DROP CONTINUOUS QUERY "sparkscope_1m" ON "{db}"', 'SHOW USERS'):
        assert "not this user's privilege" in refused(lambda: influx.query(s.influx_reader, statement, db)), statement
    # The writer: writes only (Telegraf never reads).
    assert "not this user's privilege" in refused(lambda: influx.query(s.influx_writer, 'SELECT * FROM "auth_probe"', db))
    assert "not this user's privilege" in refused(
        lambda: influx.query(s.influx_writer, 'DROP MEASUREMENT "auth_probe"', db))
    # A wrong password is told apart from a missing privilege, and names no secret.
    wrong = influx.Endpoint(s.influx_url, s.influx_read_user, "not-the-password")
    said = refused(lambda: influx.query(wrong, "SHOW MEASUREMENTS", db))
    assert "401" in said and ".env" in said and "not-the-password" not in said
    # Everything survived the attempts.
    assert len(influx.query(s.influx_reader, 'SELECT "value" FROM "auth_probe"', db)[0]["values"]) == 1
    assert [row[0] for row in influx.query(s.influx_admin, "SHOW USERS")[0]["values"]] == [
        s.influx_admin_user, s.influx_write_user, s.influx_read_user]


def test_up_again_sets_changed_passwords_and_refuses_a_wrong_admin(influx_only):
    s, db = influx_only, influx_only.database
    import dataclasses
    rotated = dataclasses.replace(s, influx_read_password="rotated-reader-0123")
    influx.ensure_users(rotated.influx_users, db, s.retention)
    assert influx.query(rotated.influx_reader, "SHOW MEASUREMENTS", db) is not None
    assert "401" in refused(lambda: influx.query(s.influx_reader, "SHOW MEASUREMENTS", db))
    influx.ensure_users(s.influx_users, db, s.retention)  # back
    wrong_admin = dataclasses.replace(s, influx_admin_password="not-the-admin-0123")
    said = refused(lambda: influx.ensure_users(wrong_admin.influx_users, db, s.retention))
    assert "refused user 'sparkscope_admin'" in said and "not-the-admin-0123" not in said
    # ... and no second admin was created on the way.
    assert len(influx.query(s.influx_admin, "SHOW USERS")[0]["values"]) == 3


def start_influxd(settings, auth: bool) -> subprocess.Popen:
    """InfluxDB as the native backend starts it; auth=False as a stack before authentication ran it."""
    service = native.influxdb_service(settings, lambda _: None)
    for path in service.dirs:
        path.mkdir(parents=True, exist_ok=True)
    env = dict(service.env, **({} if auth else {"INFLUXDB_HTTP_AUTH_ENABLED": "false"}))
    for key in ("SPARKSCOPE_FIRST_ADMIN_USER", "SPARKSCOPE_FIRST_ADMIN_PASSWORD"):
        env.pop(key, None)  # a fresh InfluxDB without users, as compose's setup finds it
    proc = start_group(service.argv, settings.state_dir / "logs" / "influxdb-by-test.log", env=env)
    assert wait_until(lambda: influx.ping(settings.influx_url), 60), "influxd did not answer"
    return proc


def test_an_unauthenticated_stack_upgraded_keeps_its_data(tmp_path):
    settings = isolated_settings(tmp_path / "state")
    old = start_influxd(settings, auth=False)
    now = int(time.time())
    try:
        plain = influx.Endpoint(settings.influx_url)
        influx.ensure_database(plain, settings.database, settings.retention)
        influx.write(plain, settings.database, "\n".join(f"old_run value={i} {now - 3600 + i}" for i in range(50)))
    finally:
        stop_group(old.pid, proc=old)
    backend = NativeBackend(settings)
    try:
        backend.up(only=("influxdb",), progress=lambda _: None)
        assert http_status(f"{settings.influx_url}/query?db=spark&q=SELECT+*+FROM+old_run") == 401
        rows = influx.query(settings.influx_reader, 'SELECT count("value") FROM "old_run"', settings.database)
        assert rows[0]["values"][0][1] == 50
    finally:
        backend.down(progress=lambda _: None)


def backup(influxd: Path, port: int, into: Path) -> tuple[bool, str]:
    """What any user of this host can run against InfluxDB's backup port (no
    credentials exist for it): whether it finished, and what it said. It
    retries a refused connection for ever, so 20 s bound it."""
    try:
        done = subprocess.run([str(influxd), "backup", "-portable", "-host", f"127.0.0.1:{port}", str(into)],
                              capture_output=True, text=True, timeout=20)
        return done.returncode == 0, done.stdout + done.stderr
    except subprocess.TimeoutExpired as err:
        return False, (err.stdout or b"").decode(errors="replace") + (err.stderr or b"").decode(errors="replace")


def test_nobody_on_the_host_gets_a_backup_of_the_native_influxdb(tmp_path, monkeypatch):
    settings = isolated_settings(tmp_path / "state")
    influxd = ensure_influxd(settings.cache_dir, progress=lambda _: None)
    backend = NativeBackend(settings)
    try:
        backend.up(only=("influxdb",), progress=lambda _: None)
        influx.write(settings.influx_writer, settings.database, f"secret_run value=1 {int(time.time())}")
        finished, said_ = backup(influxd, settings.influxdb_port + 2, tmp_path / "stolen")
        assert not finished and "connection refused" in said_, said_
        assert not list((tmp_path / "stolen").glob("*.meta"))
        assert influx.query(settings.influx_reader, 'SELECT count("value") FROM "secret_run"', settings.database)
    finally:
        backend.down(progress=lambda _: None)
    # Where no namespace can be made, the port is on the host's loopback as
    # InfluxDB opens it: the same command gets every database and the users'
    # password hashes, and up says so.
    monkeypatch.setattr(native, "_private_network", {"answer": "user namespaces are off here"})
    said: list[str] = []
    try:
        backend.up(only=("influxdb",), progress=said.append)
        assert any("backup port" in line and "compose" in line for line in said), said
        finished, said_ = backup(influxd, settings.influxdb_port + 2, tmp_path / "stolen-shared")
        assert finished, said_
        assert b"$2a$" in b"".join(meta.read_bytes() for meta in (tmp_path / "stolen-shared").glob("*.meta"))
    finally:
        backend.down(progress=lambda _: None)


def users_and_grants(admin: influx.Endpoint) -> dict:
    users = {row[0]: row[1] for row in influx.query(admin, "SHOW USERS")[0]["values"]}
    grants = {user: [tuple(r) for s in influx.query(admin, f"SHOW GRANTS FOR {influx.identifier(user)}")
                     for r in s.get("values", [])] for user in users}
    policies = [tuple(r) for r in influx.query(admin, 'SHOW RETENTION POLICIES ON "spark"')[0]["values"]]
    queries = {name: text.replace('"', "") for name, text in rollups.existing_queries(admin, "spark").items()}
    lookup = {m: influx.query(admin, f'SELECT * FROM "sparkscope_meta".{influx.identifier(m)}', "spark")
              for m in (schema.RESOLUTION_MEASUREMENT, schema.PEAK_SOURCE_MEASUREMENT,
                        schema.TASK_SCOPE_MEASUREMENT)}
    return {"users": users, "grants": grants, "policies": policies, "queries": queries, "lookup": lookup}


def run_setup_sh(settings, **override: str) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ["PATH"], "INFLUX_URL": settings.influx_url, "SPARKSCOPE_DB": settings.database,
           "SPARKSCOPE_RETENTION": settings.retention,
           "INFLUXDB_ADMIN_PASSWORD": settings.influx_admin_password,
           "INFLUXDB_WRITE_PASSWORD": settings.influx_write_password,
           "INFLUXDB_READ_PASSWORD": settings.influx_read_password, **override}
    return subprocess.run(["sh", str(SETUP_SH)], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(shutil.which("curl") is None, reason="influxdb/setup.sh runs curl (the influxdb image has it)")
def test_compose_setup_script_leaves_what_up_leaves(tmp_path, influx_only):
    """compose's influxdb-setup (setup.sh) and the native up (influx.ensure_users)
    are two writings of one setup: run against a fresh InfluxDB, setup.sh
    leaves the users, privileges and policy up leaves; run again, it changes
    nothing; given a wrong admin password, it stops and says so."""
    settings = isolated_settings(tmp_path / "state")
    fresh = start_influxd(settings, auth=True)
    try:
        first = run_setup_sh(settings)
        assert first.returncode == 0, first.stderr
        assert "created admin user sparkscope_admin" in first.stdout
        for secret in (settings.influx_admin_password, settings.influx_read_password):
            assert secret not in first.stdout + first.stderr
        by_script = users_and_grants(settings.influx_admin)
        by_up = users_and_grants(influx_only.influx_admin)
        assert by_script == by_up
        assert len(by_script["queries"]) == len(rollups.wanted_queries("spark")) and len(by_script["lookup"]) == 3
        # An older version's regex query is dropped on the next run.
        influx.query(settings.influx_admin, 'CREATE CONTINUOUS QUERY "sparkscope_1m" ON "spark" BEGIN SELECT '
                     'max("value") AS "value" INTO "spark"."sparkscope_1m".:MEASUREMENT FROM '
                     '"spark"."sparkscope"./.*/ GROUP BY time(1m), * END')
        assert by_script["grants"][settings.influx_read_user] == [("spark", "READ")]
        assert by_script["grants"][settings.influx_write_user] == [("spark", "WRITE")]
        again = run_setup_sh(settings)
        assert again.returncode == 0 and "created" not in again.stdout
        assert users_and_grants(settings.influx_admin) == by_script
        wrong = run_setup_sh(settings, INFLUXDB_ADMIN_PASSWORD="not-the-admin-0123")
        assert wrong.returncode == 1 and "refuses sparkscope_admin" in wrong.stderr
        unsafe = run_setup_sh(settings, INFLUXDB_READ_PASSWORD="x' WITH ALL PRIVILEGES --")
        assert unsafe.returncode == 1 and "INFLUXDB_READ_PASSWORD" in unsafe.stderr
        assert users_and_grants(settings.influx_admin) == by_script
    finally:
        stop_group(fresh.pid, proc=fresh)


def test_exposing_grafana_leaves_influxdb_on_loopback(tmp_path):
    settings = isolated_settings(tmp_path / "state", SPARKSCOPE_HTTP_BIND="0.0.0.0")
    service = native.influxdb_service(settings, lambda _: None)
    served = service.argv[service.argv.index("--listen") + 1] if "--listen" in service.argv else \
        service.env["INFLUXDB_HTTP_BIND_ADDRESS"]  # the relay's address, or influxd's own without a namespace
    assert served == f"127.0.0.1:{settings.influxdb_port}"
    assert native.grafana_service.__name__  # Grafana's own bind is SPARKSCOPE_HTTP_BIND:
    assert settings.http_bind == "0.0.0.0" and settings.influxdb_bind == "127.0.0.1"
    others = [a for a in subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split()
              if ":" not in a and not a.startswith("127.")]
    if not others:
        pytest.skip("this machine has no address besides loopback to try InfluxDB from")
    backend = NativeBackend(settings)
    try:
        backend.up(only=("influxdb",), progress=lambda _: None)
        with pytest.raises(OSError):
            socket.create_connection((others[0], settings.influxdb_port), timeout=3).close()
        socket.create_connection(("127.0.0.1", settings.influxdb_port), timeout=3).close()
    finally:
        backend.down(progress=lambda _: None)


def write_template(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / ".env.example", root / ".env.example")


def test_a_new_env_file_is_private_from_its_first_byte_and_secrets_are_not_printed(tmp_path, monkeypatch):
    for key in SECRET_KEYS:
        monkeypatch.delenv(key, raising=False)
    write_template(tmp_path)
    opened_modes = []
    real_open = os.open

    def spy_open(path, flags, mode=0o777, *args, **kwargs):
        if str(path).endswith(".env"):
            opened_modes.append((flags & os.O_CREAT and flags & os.O_EXCL, mode))
        return real_open(path, flags, mode, *args, **kwargs)

    monkeypatch.setattr(os, "open", spy_open)
    old_umask = os.umask(0)  # the mode must not depend on the user's umask
    said: list[str] = []
    try:
        written = ensure_env_file(load_settings(tmp_path, {}), progress=said.append)
    finally:
        os.umask(old_umask)
    assert sorted(written) == sorted(SECRET_KEYS)
    assert opened_modes and all(excl and mode == 0o600 for excl, mode in opened_modes)
    assert stat.S_IMODE((tmp_path / ".env").stat().st_mode) == 0o600
    values = read_env_file(tmp_path / ".env")
    settings = load_settings(tmp_path, {})
    assert settings.missing_secrets() == []
    for key in SECRET_KEYS:
        assert len(values[key]) >= 24 and values[key] not in " ".join(said)
    assert settings.influx_read_password != settings.influx_write_password != settings.influx_admin_password


def test_an_existing_env_file_gets_the_missing_secrets_and_loses_nothing(tmp_path, monkeypatch):
    for key in SECRET_KEYS:
        monkeypatch.delenv(key, raising=False)
    write_template(tmp_path)
    (tmp_path / ".env").write_text("# mine\nGRAFANA_ADMIN_PASSWORD=my-own-grafana-pw\nGRAFANA_PORT=3999\n"
                                   "INFLUXDB_READ_PASSWORD=\n")
    (tmp_path / ".env").chmod(0o644)  # as `cp .env.example .env` leaves it
    said: list[str] = []
    written = ensure_env_file(load_settings(tmp_path, {}), progress=said.append)
    assert sorted(written) == ["EVENTS_PASSWORD", "INFLUXDB_ADMIN_PASSWORD", "INFLUXDB_READ_PASSWORD",
                               "INFLUXDB_WRITE_PASSWORD"]
    assert stat.S_IMODE((tmp_path / ".env").stat().st_mode) == 0o600
    assert any("readable by other users" in line for line in said)
    text = (tmp_path / ".env").read_text()
    assert text.startswith("# mine\nGRAFANA_ADMIN_PASSWORD=my-own-grafana-pw\nGRAFANA_PORT=3999\n")
    settings = load_settings(tmp_path, {})
    assert settings.grafana_password == "my-own-grafana-pw" and settings.grafana_port == 3999
    assert settings.missing_secrets() == [] and text.count("INFLUXDB_READ_PASSWORD=") == 1
    assert ensure_env_file(settings, progress=said.append) == []  # a second up changes nothing


def test_a_password_that_could_quote_out_is_refused(tmp_path):
    write_template(tmp_path)
    from sparkscope.settings import SettingsError
    with pytest.raises(SettingsError, match="INFLUXDB_WRITE_PASSWORD"):
        load_settings(tmp_path, {"INFLUXDB_WRITE_PASSWORD": "abc' WITH ALL PRIVILEGES"})
    with pytest.raises(SettingsError, match="INFLUXDB_READ_USER"):
        load_settings(tmp_path, {"INFLUXDB_READ_USER": 'r" WITH ALL PRIVILEGES'})


def test_the_compose_rollups_file_is_what_up_creates():
    """influxdb/rollups.setup is generated from stack/rollups.py: regenerate it
    (with every other generated file) after a change."""
    assert (ROOT / rollups.SETUP_FILE).read_text() == rollups.setup_file_text(), f"stale: run {COMMAND}"


def test_the_events_listener_asks_for_a_password_by_default_once_it_listens_beyond_loopback(tmp_path):
    assert isolated_settings(tmp_path).events_credentials is None  # loopback: nothing to ask
    exposed = isolated_settings(tmp_path, GRAPHITE_BIND="0.0.0.0")
    assert exposed.events_credentials == ("sparkscope", exposed.events_password)
    assert isolated_settings(tmp_path, GRAPHITE_BIND="0.0.0.0", EVENTS_AUTH="off").events_credentials is None
    assert isolated_settings(tmp_path, EVENTS_AUTH="on").events_credentials is not None


def sparkscope_cli(settings, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **settings_environ(settings)}
    return subprocess.run([str(ROOT / "sparkscope"), *argv], env=env, capture_output=True, text=True, timeout=120)


def test_with_events_auth_only_spark_and_the_probes_write_events(tmp_path, monkeypatch):
    """EVENTS_AUTH=on on loopback (tests bind nothing else): Telegraf's events
    listener refuses a line without the password, takes the probes' lines
    (http.post_lines) and a real Spark driver's annotator given what
    ./sparkscope conf prints."""
    from conftest import Stack, run_spark_job
    from sparkscope.store import http
    from sparkscope.probes.blockprobe import probe
    from sparkscope.provision.annotator_jar import ensure_annotator_jar
    from sparkscope.spark.conf import annotator_env, annotator_properties

    with throwaway_stack(tmp_path / "state", only=("influxdb", "telegraf"), EVENTS_AUTH="on") as settings:
        stack = Stack(settings)
        url = settings.events_url
        line = f"sparkscope_intruder value=1 {time.time_ns()}".encode()
        assert http_status(f"{url}/write", data=line) == 401
        assert http_status(f"{url}/write", settings.events_user, "not-the-password", data=line) == 401

        monkeypatch.setenv(http.EVENTS_USER_ENV, settings.events_user)
        monkeypatch.setenv(http.EVENTS_PASSWORD_ENV, settings.events_password)
        probe.send(url, [f"block_latency,device=authtest,direction=read count=3i,mean_ms=1,p50_ms=1,p99_ms=1,"
                         f"max_ms=1 {time.time_ns()}"])

        printed = sparkscope_cli(settings, "conf", "--host", "127.0.0.1")
        assert printed.returncode == 0, printed.stderr
        assert settings.events_password not in printed.stdout + printed.stderr
        assert "spark.sparkscope.influx.passwordEnv=SPARKSCOPE_EVENTS_PASSWORD" in printed.stdout
        jar = ensure_annotator_jar(ROOT, progress=lambda _: None)
        run = run_spark_job(stack, "steady_job.py", tmp_path, master="local[1]", args=["2"],
                            conf=annotator_properties(settings, jar), env=annotator_env(settings))
        stack.wait_for(f"SELECT count(\"duration_ms\") FROM \"sparkscope_application\" WHERE "
                       f"\"applicationid\" = {influx.string_literal(run.app_id)}", bool, deadline_s=60)
        stack.wait_for('SELECT "count" FROM "block_latency" WHERE "device" = \'authtest\'', bool)
        assert stack.influx('SELECT * FROM "sparkscope_intruder"') == []

    with throwaway_stack(tmp_path / "off", only=()) as loopback:
        assert "influx.password" not in sparkscope_cli(loopback, "conf").stdout


def test_a_pasted_summary_hint_runs_nothing_a_run_id_holds():
    """The demo summary prints curl lines naming the run: a crafted id, pasted
    into a shell, reaches curl as text, and InfluxQL as a quoted string."""
    from sparkscope.demo.summary import shell_double_quoted
    crafted = "x' ; DROP MEASUREMENT \"canary\" ; SELECT '$(touch /tmp/pwned)`id`\\"
    statement = f"SELECT text FROM sparkscope_query WHERE applicationid={influx.string_literal(crafted)}"
    out = subprocess.run(["sh", "-c", f"printf %s {shell_double_quoted('q=' + statement)}"],
                         capture_output=True, text=True, timeout=10).stdout
    assert out == "q=" + statement
    assert statement.endswith("applicationid='x\\' ; DROP MEASUREMENT \"canary\" ; SELECT \\'$(touch /tmp/pwned)`id`\\\\'")


@pytest.mark.skipif(os.geteuid() != 0, reason="what root may run matters only as root")
def test_as_root_nothing_runs_from_where_another_user_could_change_it(tmp_path, monkeypatch):
    from sparkscope.probes.privilege import why_untrusted
    from sparkscope.stack import StackError
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "tool").write_text("#!/bin/sh\n")
    shared.chmod(0o777)
    assert "writable by group and others" in why_untrusted(shared / "tool")
    shared.chmod(0o755)
    os.chown(shared / "tool", 1000, 1000)
    assert "belongs to uid 1000" in why_untrusted(shared / "tool")
    os.chown(shared / "tool", 0, 0)
    assert why_untrusted(shared / "tool") is None  # under /tmp (sticky), root's own dirs: fine

    # InfluxDB from a cache dir a user may write to: up refuses to start it as root.
    settings = isolated_settings(tmp_path / "state", SPARKSCOPE_CACHE_DIR=str(tmp_path / "cache"))
    real = native.ensure_influxd(isolated_settings(tmp_path / "s2").cache_dir, lambda _: None)
    planted = settings.cache_dir / real.relative_to(isolated_settings(tmp_path / "s3").cache_dir)
    planted.parent.mkdir(parents=True)
    shutil.copy2(real, planted)
    planted.parent.chmod(0o777)
    with pytest.raises(StackError, match="not started as root .*writable by group and others"):
        NativeBackend(settings).up(only=("influxdb",), progress=lambda _: None)
    assert influx.ping(settings.influx_url) is False

    # The probes' Python from a directory others may write: not started, and said why.
    link_dir = tmp_path / "venv-bin"
    link_dir.mkdir(mode=0o777)
    link_dir.chmod(0o777)
    (link_dir / "python").symlink_to(os.path.realpath(os.sys.executable))
    monkeypatch.setattr(native.sys, "executable", str(link_dir / "python"))
    said: list[str] = []
    assert NativeBackend(isolated_settings(tmp_path / "s4")).start_threadprobe(said.append) is False
    assert any("as root it would run" in line and "writable" in line for line in said), said


class FirstAdminRace:
    """A stranger on this host who wants the first admin of a fresh InfluxDB:
    from before `up` until it returns, connect to InfluxDB's port in a loop and
    send CREATE USER evil ... WITH ALL PRIVILEGES without credentials. Records
    every answer that created the user (200 with no error)."""

    STATEMENT = b"q=" + urllib.parse.quote_plus("CREATE USER evil WITH PASSWORD 'x' WITH ALL PRIVILEGES").encode()

    def __init__(self, port: int, tls: bool = False, unix_socket: Path | None = None):
        self.port, self.won, self.tries, self.tls, self.unix_socket = port, [], 0, tls, unix_socket
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def attempt(self) -> None:
        request = (b"POST /query HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                   b"Content-Type: application/x-www-form-urlencoded\r\n"
                   b"Content-Length: %d\r\n\r\n" % len(self.STATEMENT)) + self.STATEMENT
        if self.unix_socket is not None:  # where a container's published port is, in the compose test
            raw = socket.socket(socket.AF_UNIX)
            raw.settimeout(5)
            raw.connect(str(self.unix_socket))
        else:
            raw = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        with raw:
            conn = raw
            if self.tls:  # as curl -k would: any server certificate, no client certificate
                context = ssl.create_default_context()
                context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
                conn = context.wrap_socket(raw)
            conn.sendall(request)
            answer = b""
            while chunk := conn.recv(65536):
                answer += chunk
        self.tries += 1
        if answer.startswith(b"HTTP/1.1 200") and b'"error"' not in answer:
            self.won.append(answer.decode(errors="replace"))

    def run(self) -> None:
        while not self.done.is_set():
            try:
                self.attempt()
            except OSError:
                time.sleep(0.001)  # not listening yet: knock again at once

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        time.sleep(0.5)  # and a little after up returned
        self.done.set()
        self.thread.join(10)


@pytest.mark.parametrize("namespace", ["network namespace", "no namespace"])
def test_a_stranger_racing_up_never_creates_the_first_admin(tmp_path, monkeypatch, namespace):
    settings = isolated_settings(tmp_path / "state")
    if namespace == "no namespace":  # as on a host with user namespaces off
        monkeypatch.setattr(native, "_private_network", {"answer": "user namespaces are off here"})
    backend = NativeBackend(settings)
    try:
        with FirstAdminRace(settings.influxdb_port) as race:
            try:
                backend.up(only=("influxdb",), progress=lambda _: None)
                up_error = None
            except SparkscopeError as err:  # today: setup finds the stranger's admin and gives up
                up_error = str(err)
        assert not race.won, f"the stranger created an admin ({len(race.won)} of {race.tries} tries won)"
        assert race.tries > 0, "the stranger never got an answer: the race was not run"
        assert up_error is None, up_error
        users = {row[0] for row in influx.query(settings.influx_admin, "SHOW USERS")[0]["values"]}
        assert "evil" not in users and settings.influx_admin.user in users
        if namespace == "no namespace":
            # influxd's own listener is on the host's loopback too, where a stranger
            # finds it (/proc/net/tcp): it must answer nobody's HTTP, plain or TLS.
            log = (settings.state_dir / "logs" / "influxdb.log").read_text()
            own_port = int(re.findall(r'msg="Listening on HTTP".*addr=127\.0\.0\.1:(\d+)', log)[-1])
            assert own_port != settings.influxdb_port
            for stranger in (FirstAdminRace(own_port), FirstAdminRace(own_port, tls=True)):
                try:
                    stranger.attempt()  # plain: "400 Client sent an HTTP request to an HTTPS server"
                except OSError:
                    pass  # ssl.SSLError is one: no certificate of its CA, no HTTP
                assert not stranger.won
    finally:
        backend.down(progress=lambda _: None)


@pytest.mark.parametrize("entrypoint", ["first-admin.sh", "the image's own (before)"])
def test_a_stranger_racing_a_new_compose_influxdb_never_creates_the_first_admin(tmp_path, entrypoint):
    """Compose's influxdb container, as far as it runs without Docker: the same
    influxd and config in a network namespace of its own (the container's), its
    published port stood in for by a Unix socket the stranger reaches from the
    host. Before, a new volume answered anyone until influxdb-setup ran."""
    settings = isolated_settings(tmp_path / "state")
    influxd = ensure_influxd(settings.cache_dir, progress=lambda _: None)
    published = tmp_path / "published.sock"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("INFLUXDB_")},
           **{key: str(path) for key, path in native.influx_dirs(settings.state_dir).items()},
           "INFLUXDB_HTTP_UNIX_SOCKET_ENABLED": "true", "INFLUXDB_HTTP_BIND_SOCKET": str(published),
           "INFLUXDB_HTTP_BIND_ADDRESS": "127.0.0.1:8086", "INFLUXDB_BIND_ADDRESS": "127.0.0.1:8088",
           "SPARKSCOPE_FIRST_ADMIN_USER": settings.influx_admin_user,
           "SPARKSCOPE_FIRST_ADMIN_PASSWORD": settings.influx_admin_password}
    command = [str(influxd), "-config", str(ROOT / "influxdb" / "influxdb.conf")]
    if entrypoint == "first-admin.sh":
        command = ["sh", str(ROOT / "influxdb" / "first-admin.sh"), *command]
    # A container's network has its loopback up; a new namespace's starts down.
    container = start_group([*native.PRIVATE_NETWORK, "sh", "-c", 'ip link set lo up && exec "$@"', "container",
                             *command], tmp_path / "container.log", env=env)
    try:
        with FirstAdminRace(0, unix_socket=published) as race:
            # influxdb-setup starts once the container is healthy, 10 s and more later.
            assert wait_until(lambda: race.tries > 50 or container.poll() is not None, 60), race.tries
            time.sleep(2)
        log = (tmp_path / "container.log").read_text()
        if entrypoint != "first-admin.sh":
            assert race.won, "the race found no window: it cannot tell the fix from no fix"
            return
        assert not race.won, f"the stranger created an admin ({len(race.won)} of {race.tries} tries won)"
        assert "admin " + settings.influx_admin_user + " created" in log, log
        assert settings.influx_admin_password not in log
        answer = unix_query(published, "SHOW USERS", settings.influx_admin_user, settings.influx_admin_password)
        assert f'["{settings.influx_admin_user}",true]' in answer, answer
    finally:
        stop_group(container.pid, proc=container)


def unix_query(path: Path, statement: str, user: str, password: str) -> str:
    body = ("q=" + urllib.parse.quote_plus(statement)).encode()
    token = base64.b64encode(f"{user}:{password}".encode())
    request = (b"POST /query HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Basic " + token +
               b"\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    with socket.socket(socket.AF_UNIX) as conn:
        conn.settimeout(10)
        conn.connect(str(path))
        conn.sendall(request)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer.decode(errors="replace")
