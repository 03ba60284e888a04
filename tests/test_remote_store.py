"""SPARKSCOPE_METRICS_STORE=remote: Spark's metrics go to a Prometheus-compatible
store the user runs, with its Basic auth and its CA, and status says whether
its PromQL API answers. The user's store here is a real Thanos Receive and
Query started by the test (Query over TLS with Basic auth), with a small
authenticating front on the remote-write port, as Mimir and Cortex have
behind their gateways: Thanos' own remote-write port takes no password."""

from __future__ import annotations

import re
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import JOBS, SINK_PERIOD_S
from sparkscope.process import quiet, start_group, stop_group, wait_until
from sparkscope.provision.go import ensure_telegraf, ensure_thanos
from sparkscope.settings import ROOT, SettingsError, load_settings
from sparkscope.spark.conf import sparkscope_properties
from sparkscope.spark.submit import run_submit, submit_argv
from sparkscope.stack import metrics_reads, remote_store, thanos
from sparkscope.stack.native import NativeBackend, telegraf_service, thanos_datasource_env
from sparkscope.store import http
from sparkscope.store.promql import PromReads
from sparkscope.store.prometheus import label_name, series_name
from sparkscope.store.promql import PromQuery
from sparkscope.store.reads import InfluxReads
from sparkscope.store.schema import APPLICATION, EXECUTOR, JVM_HEAP_MEMORY
from sparkscope_testkit.sandbox import isolated_settings, throwaway_stack

# Basic auth's password as a user may have it: quotes, a backslash, a dollar,
# spaces. It reaches Telegraf through its environment and a TOML string.
HOSTILE_PASSWORD = 'p"a\\ss ${HOME} $x \'w0rd'
USER = "spark-metrics"
# Thanos Receive files a write under the tenant its THANOS-TENANT header names, as the
# label tenant_id (Mimir and Cortex read X-Scope-OrgID, the setting's default).
TENANT_HEADER = "THANOS-TENANT"
TENANT = "team-a.spark_(1)*'!"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class AuthFront:
    """The remote-write port behind Basic auth: a write with the right
    credentials is passed on to Thanos Receive, any other gets 401."""

    def __init__(self, target: str, user: str, password: str):
        self.target, self.expected = target, http.basic_auth(user, password)
        self.accepted = self.refused = 0
        self.tenants: set[str] = set()  # THANOS-TENANT headers of accepted writes
        front = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Authorization") != front.expected:
                    front.refused += 1
                    self.send_response(401)
                    self.end_headers()
                    return
                request = urllib.request.Request(front.target, data=body, method="POST")
                for key in ("Content-Type", "Content-Encoding", "X-Prometheus-Remote-Write-Version", TENANT_HEADER):
                    if key in self.headers:
                        request.add_header(key, self.headers[key])
                front.tenants.add(self.headers.get(TENANT_HEADER, ""))
                try:
                    with http.urlopen(request, timeout=10) as resp:
                        status = resp.status
                except urllib.error.HTTPError as err:
                    status = err.code
                front.accepted += status < 300
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/api/v1/receive"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def users_store(tmp_path_factory):
    """A Thanos Receive (one ingester) and Query, as a user's store: Query's
    HTTP over TLS (its own CA) with Basic auth; stopped by the pids started."""
    root = tmp_path_factory.mktemp("users-store")
    binary = ensure_thanos(load_settings(dotenv=False).cache_dir, progress=lambda _: None)
    files = thanos.Files(root / "thanos")
    thanos.ensure_tls(files, "127.0.0.1")
    password = HOSTILE_PASSWORD  # one credential for writing and reading, as a user has
    hashed = subprocess.run([str(binary.with_name("bcrypt-hash"))], input=password + "\n",
                            capture_output=True, text=True, check=True).stdout.strip()
    web = root / "web.yml"
    web.write_text(thanos.web_config_text(hashed).replace(thanos.USER, USER) +
                   f"tls_server_config:\n  cert_file: {files.cert}\n  key_file: {files.key}\n")
    grpc, rw, http_r, capnp, http_q, grpc_q = (free_port() for _ in range(6))
    started, front = [], None
    receive = start_group([str(binary), "receive", f"--grpc-address=127.0.0.1:{grpc}",
                           f"--http-address=127.0.0.1:{http_r}", f"--remote-write.address=127.0.0.1:{rw}",
                           f"--receive.capnproto-address=127.0.0.1:{capnp}", f"--tsdb.path={root / 'tsdb'}",
                           '--label=replica="users-store"'], root / "receive.log")
    started.append(receive)
    try:
        query = start_group([str(binary), "query", f"--grpc-address=127.0.0.1:{grpc_q}",
                             f"--http-address=127.0.0.1:{http_q}", f"--http.config={web}",
                             f"--endpoint=127.0.0.1:{grpc}"], root / "query.log")
        started.append(query)
        point = PromQuery(f"https://127.0.0.1:{http_q}", USER, password, ca_file=str(files.ca), name=remote_store.NAME)
        front = AuthFront(f"http://127.0.0.1:{rw}/api/v1/receive", USER, HOSTILE_PASSWORD)
        assert wait_until(lambda: remote_store.check(point)[0] == "up", 60, 0.5), \
            (remote_store.check(point), (root / "query.log").read_text()[-2000:])
        yield point, front
    finally:
        if front is not None:
            front.close()
        for proc in reversed(started):
            stop_group(proc.pid, proc=proc)


def remote_settings(point, front, **changes) -> dict[str, str]:
    return {"SPARKSCOPE_METRICS_STORE": "remote", "SPARKSCOPE_REMOTE_WRITE_URL": front.url,
            "SPARKSCOPE_REMOTE_QUERY_URL": point.url, "SPARKSCOPE_REMOTE_USER": USER,
            "SPARKSCOPE_REMOTE_PASSWORD": HOSTILE_PASSWORD, "SPARKSCOPE_REMOTE_CA_FILE": point.ca_file, **changes}


@pytest.mark.slow
def test_a_spark_run_lands_per_executor_in_the_users_store_and_status_reads_it(users_store, tmp_path):
    point, front = users_store
    with throwaway_stack(tmp_path / "state", only=("influxdb", "telegraf"),
                         **remote_settings(point, front, SPARKSCOPE_REMOTE_TENANT=TENANT,
                                           SPARKSCOPE_REMOTE_TENANT_HEADER=TENANT_HEADER)) as settings:
        # The front lets no write in without the password (what makes the count below mean something).
        with pytest.raises(urllib.error.HTTPError, match="401"):
            http.urlopen(urllib.request.Request(front.url, data=b"x", method="POST"), timeout=5)
        refused_before = front.refused
        props = sparkscope_properties(settings, period_s=SINK_PERIOD_S)
        started_ms = int(time.time() * 1000)
        log = tmp_path / "steady.log"
        done = run_submit(submit_argv(JOBS / "steady_job.py", "local-cluster[2,1,1024]", props, ["8"]), log, 240)
        app = re.search(r"^APP_ID (\S+)$", done.stdout, re.M)
        assert done.returncode == 0 and app, log.read_text()[-2000:]
        name, app_label, executor = series_name(JVM_HEAP_MEMORY, "value"), label_name(APPLICATION), label_name(EXECUTOR)
        promql = (f'sum by ({executor}) (count_over_time({name}{{{app_label}="{app.group(1)}", '
                  f'tenant_id="{TENANT}"}}[1h]))')

        def per_executor() -> dict[str, float]:
            result = point.instant(promql, int(time.time() * 1000))
            return {r["metric"][executor]: float(r["value"][1]) for r in result}

        # Read through the user's Query, over its TLS, with its Basic auth.
        assert wait_until(lambda: set(per_executor()) >= {"driver", "0", "1"}, 60, 2), per_executor()
        assert front.accepted > 0 and front.refused == refused_before  # the quoted password arrived whole
        assert front.tenants == {TENANT}  # every write named the tenant (and the series carry it: above)

        # The read layer reads it as top and report do: PromReads at the user's PromQL API, with the
        # password and CA of .env. No annotator ran, so the run is found by its metrics alone.
        reads = metrics_reads(settings, timeout_s=30)
        assert isinstance(reads, PromReads)
        found = reads.run(app.group(1))
        assert found is not None and started_ms - 60_000 <= found.started_ms <= int(time.time() * 1000), found
        span = (found.started_ms, int(time.time() * 1000))
        heap = reads.highest(JVM_HEAP_MEMORY, app.group(1), span)
        in_influx = InfluxReads(settings.influx_reader, settings.database).highest(
            JVM_HEAP_MEMORY, app.group(1), (span[0] - 60_000, span[1]), 10**12, 0)
        # Telegraf's serializer keeps one sample per series and write (docs/scale.md): with this run's
        # 1 s period Thanos holds about every other sample, so its peak is at most InfluxDB's.
        assert set(heap) == set(in_influx) >= {"driver", "0", "1"}
        assert all(heap[e] <= in_influx[e] for e in heap) and heap["0"] > 0 and heap["1"] > 0, (heap, in_influx)

        rows = {row.name: row for row in NativeBackend(settings).status()}
        assert rows[remote_store.ROW].state == "up", rows[remote_store.ROW]
        assert rows[remote_store.ROW].url.startswith(point.url)
        assert "to the remote store: buffer" in rows["telegraf"].data or \
            "to the remote store: no report" in rows["telegraf"].data, rows["telegraf"].data

    # A wrong password: status names the store's answer and the settings to check.
    wrong = load_settings(environ=remote_settings(point, front, SPARKSCOPE_REMOTE_PASSWORD="wrong-password"),
                          dotenv=False)
    state, detail = remote_store.check(remote_store.endpoint(wrong))
    assert state == "unhealthy" and "401" in detail and "SPARKSCOPE_REMOTE_PASSWORD" in detail, detail
    # No CA: the store's certificate is refused, and said.
    state, detail = remote_store.check(PromQuery(point.url, point.user, point.password, name=remote_store.NAME))
    assert state == "down" and "CERTIFICATE_VERIFY_FAILED" in detail, detail


def test_the_remote_store_is_refused_without_its_urls_or_with_credentials_in_them():
    base = {"SPARKSCOPE_METRICS_STORE": "remote"}
    with pytest.raises(SettingsError, match="SPARKSCOPE_REMOTE_WRITE_URL=''.*remote-write endpoint"):
        load_settings(environ=base, dotenv=False)
    urls = {"SPARKSCOPE_REMOTE_WRITE_URL": "https://mimir.example.com/api/v1/push",
            "SPARKSCOPE_REMOTE_QUERY_URL": "https://mimir.example.com/prometheus/"}
    settings = load_settings(environ={**base, **urls}, dotenv=False)
    assert settings.remote_query_url == "https://mimir.example.com/prometheus"  # /api/v1/... is appended
    with pytest.raises(SettingsError, match="not in the URL"):
        load_settings(environ={**base, **urls, "SPARKSCOPE_REMOTE_WRITE_URL": "https://u:pw@mimir.example.com/push"},
                      dotenv=False)
    with pytest.raises(SettingsError, match="go together"):
        load_settings(environ={**base, **urls, "SPARKSCOPE_REMOTE_USER": "u"}, dotenv=False)
    with pytest.raises(SettingsError, match="no quote"):
        load_settings(environ={**base, **urls, "SPARKSCOPE_REMOTE_WRITE_URL": 'https://m.example.com/"x'},
                      dotenv=False)
    with pytest.raises(SettingsError, match="no such file"):
        load_settings(environ={**base, **urls, "SPARKSCOPE_REMOTE_CA_FILE": "/nonexistent/ca.pem"}, dotenv=False)
    # The influxdb store never looks at them.
    assert load_settings(environ={"SPARKSCOPE_REMOTE_WRITE_URL": "nonsense"}, dotenv=False).metrics_store == "influxdb"


def test_the_password_reaches_telegraf_in_its_environment_never_its_argv(tmp_path):

    settings = isolated_settings(tmp_path / "state", **{
        "SPARKSCOPE_METRICS_STORE": "remote", "SPARKSCOPE_REMOTE_WRITE_URL": "https://m.example.com/api/v1/push",
        "SPARKSCOPE_REMOTE_QUERY_URL": "https://m.example.com/prometheus", "SPARKSCOPE_REMOTE_USER": USER,
        "SPARKSCOPE_REMOTE_PASSWORD": HOSTILE_PASSWORD})
    service = telegraf_service(settings, lambda _: None)
    assert str(settings.root / "telegraf" / "remote.conf") in service.argv
    assert not any(HOSTILE_PASSWORD in arg for arg in service.argv)
    # Telegraf 1.37 pastes ${...} values into its config's text unescaped (a quote ended the
    # string: "invalid TOML syntax", found by the test above): the password goes base64-encoded.
    assert service.env["SPARKSCOPE_REMOTE_AUTHORIZATION"] == http.basic_auth(USER, HOSTILE_PASSWORD)
    assert not any(HOSTILE_PASSWORD in value for value in service.env.values())
    assert HOSTILE_PASSWORD not in repr(settings)  # field(repr=False)


REMOTE = {"SPARKSCOPE_METRICS_STORE": "remote", "SPARKSCOPE_REMOTE_WRITE_URL": "https://m.example.com/api/v1/push",
          "SPARKSCOPE_REMOTE_QUERY_URL": "https://m.example.com/prometheus"}


def test_a_tenant_or_header_that_could_rewrite_telegrafs_config_is_refused():
    # Telegraf pastes the tenant's line into its config's text: a quote, '=' or a line
    # break would end the string and write configuration of the user's choosing.
    for tenant in ('a"b', "a\nb", "a=b", "a b", "x" * 151):
        with pytest.raises(SettingsError, match="SPARKSCOPE_REMOTE_TENANT=.*letters, digits"):
            load_settings(environ={**REMOTE, "SPARKSCOPE_REMOTE_TENANT": tenant}, dotenv=False)
    for header in ("X Scope", "X-Scope-OrgID = \"x\"", 'X"', "Authorization"):
        with pytest.raises(SettingsError, match="SPARKSCOPE_REMOTE_TENANT_HEADER=.*one of X-Scope-OrgID, THANOS-TENANT"):
            load_settings(environ={**REMOTE, "SPARKSCOPE_REMOTE_TENANT": "t",
                                   "SPARKSCOPE_REMOTE_TENANT_HEADER": header}, dotenv=False)
    settings = load_settings(environ={**REMOTE, "SPARKSCOPE_REMOTE_TENANT": TENANT,
                                      "SPARKSCOPE_REMOTE_TENANT_HEADER": "thanos-tenant"}, dotenv=False)
    assert settings.remote_tenant_header == "THANOS-TENANT"  # header names are case-blind
    env = remote_store.telegraf_env(settings)
    assert (env["SPARKSCOPE_REMOTE_THANOS_TENANT"], env["SPARKSCOPE_REMOTE_SCOPE_ORGID"]) == (TENANT, "")
    env = remote_store.telegraf_env(load_settings(environ=REMOTE, dotenv=False))
    assert (env["SPARKSCOPE_REMOTE_THANOS_TENANT"], env["SPARKSCOPE_REMOTE_SCOPE_ORGID"]) == ("", "")


def test_telegraf_reads_remote_conf_with_and_without_a_tenant_in_strict_and_lax_variable_handling(tmp_path):
    """Telegraf 1.38 makes strict handling of ${...} the default: values substituted
    in strings only. remote.conf must load both ways, a tenant or none."""
    telegraf = ensure_telegraf(load_settings(dotenv=False).cache_dir, quiet)
    inputs = tmp_path / "in.conf"
    inputs.write_text("[[inputs.mem]]\n")
    for tenant in (TENANT, ""):
        settings = load_settings(environ={**REMOTE, "SPARKSCOPE_REMOTE_TENANT": tenant}, dotenv=False)
        for mode in ("--strict-env-handling", "--non-strict-env-handling"):
            done = subprocess.run([str(telegraf), mode, "--config", str(inputs), "--config",
                                   str(ROOT / "telegraf" / "remote.conf"), "--test"],
                                  env={"PATH": "/usr/bin:/bin", **remote_store.telegraf_env(settings)},
                                  capture_output=True, text=True, timeout=60)
            assert done.returncode == 0 and "mem," in done.stdout, (tenant, mode, done.stderr[-2000:])


def test_the_tenant_goes_with_every_read_and_to_grafanas_datasource(tmp_path):
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seen.append(dict(self.headers))
            body = b'{"status":"success","data":{"resultType":"vector","result":[]}}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        for tenant, expected in ((TENANT, TENANT), ("", None)):
            settings = isolated_settings(tmp_path / f"state{len(seen)}", **{
                **REMOTE, "SPARKSCOPE_REMOTE_QUERY_URL": url, "SPARKSCOPE_REMOTE_TENANT": tenant,
                "SPARKSCOPE_REMOTE_TENANT_HEADER": TENANT_HEADER})
            assert remote_store.check(remote_store.endpoint(settings)) == ("up", "")
            assert {k.upper(): v for k, v in seen[-1].items()}.get(TENANT_HEADER) == expected
            # Grafana's datasource: its first custom header (none when the name is empty).
            env = thanos_datasource_env(settings)
            assert (env["THANOS_TENANT_HEADER"], env["THANOS_TENANT"]) == \
                ((TENANT_HEADER, TENANT) if tenant else ("", ""))
    finally:
        server.shutdown()
        server.server_close()


def test_telegraf_is_started_with_the_variable_handling_its_configs_need(tmp_path):
    """telegraf.conf substitutes a number outside any string, which Telegraf's strict
    handling of ${...} (its default from 1.38) refuses: every way sparkscope starts
    Telegraf says --non-strict-env-handling, and the configs load so."""
    import yaml

    settings = isolated_settings(tmp_path / "state", **REMOTE)
    service = telegraf_service(settings, lambda _: None)
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["telegraf"]["command"]
    assert "--non-strict-env-handling" in service.argv and "--non-strict-env-handling" in compose
    env = {**service.env, "PATH": "/usr/bin:/bin"}
    done = subprocess.run([*service.argv, "--test", "--test-wait", "1"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    strict = [a if a != "--non-strict-env-handling" else "--strict-env-handling" for a in service.argv]
    done = subprocess.run([*strict, "--test", "--test-wait", "1"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0 and "telegraf.conf" in done.stderr, done.stderr[-2000:]
