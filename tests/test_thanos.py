"""The Thanos metrics store (SPARKSCOPE_METRICS_STORE=thanos, docs/scale.md).

Fast: the layout (every process its own ports, the hashring naming the
ingesters, what is refused), the command lines and files the native backend
runs with, which services `up` starts in which order.

Slow, real: Thanos built here (provision/go.py) as a Receive router, three
ingesters with a replication factor of 2 and Query, behind its Basic auth and
client certificates; Telegraf writing remote write to the router; real Spark
runs read back through Query per executor; one ingester stopped by its pid
while a second run lands, the first still whole; the ingester started again
taking new series.
"""

from __future__ import annotations

import json
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from sparkscope.process import quiet, wait_until
from sparkscope.settings import SettingsError
from sparkscope.stack import StackError, service_names, thanos, thanos_layout, wanted_services
from sparkscope.store import http
from sparkscope.store.prometheus import label_name, series_name
from sparkscope.store.schema import APPLICATION, EXECUTOR, JVM_HEAP_MEMORY
from sparkscope_testkit.sandbox import free_base_port, isolated_settings


# --- fast: the layout and the command lines ---------------------------------------------

def test_every_process_gets_ports_of_its_own_and_the_hashring_names_the_ingesters():
    plan = thanos.layout(20000, ingesters=3, replication_factor=2)
    assert plan.names == ("thanos-receive-1", "thanos-receive-2", "thanos-receive-3", "thanos-router",
                          "thanos-store", "thanos-compact", "thanos-query")
    ports = [port for process in plan.processes for port in process.ports()]
    # grpc, http, remote write, capnproto; Query's and the store gateway's grpc, http; the compactor's http
    assert len(ports) == len(set(ports)) == 4 * 4 + 2 + 2 + 1
    assert all(20000 < port < 20000 + 10 * 7 for port in ports)
    ring = plan.hashring()
    assert [entry["endpoints"] for entry in ring] == [[f"127.0.0.1:{p.grpc}" for p in plan.ingesters]]
    assert plan.router.grpc_address not in ring[0]["endpoints"]  # the router stores nothing
    assert plan.router.remote_write_url == f"https://127.0.0.1:{plan.router.remote_write}/api/v1/receive"


@pytest.mark.parametrize("base, ingesters, factor, says", [
    (20000, 2, 3, "THANOS_REPLICATION_FACTOR=3"),
    (20000, 3, 0, "THANOS_REPLICATION_FACTOR=0"),
    (20000, 0, 1, "THANOS_INGESTERS=0"),
    (65500, 3, 2, "THANOS_PORT=65500"),
    (80, 3, 2, "THANOS_PORT=80"),
])
def test_a_layout_that_cannot_run_is_refused_naming_the_setting(base, ingesters, factor, says):
    with pytest.raises(thanos.ThanosConfigError, match=says):
        thanos.layout(base, ingesters, factor)


def test_the_router_replicates_to_the_ingesters_over_mtls_and_each_ingester_keeps_its_own_tsdb(tmp_path):
    plan = thanos.layout(20000, ingesters=3, replication_factor=2)
    files = thanos.Files(tmp_path)
    router = thanos.receive_argv(Path("/bin/thanos"), plan, plan.router, files, "30d")
    assert "--receive.replication-factor=2" in router
    assert f"--receive.hashrings-file={files.hashring}" in router
    assert "--remote-write.client-tls-secure" in router and f"--remote-write.client-tls-key={files.key}" in router
    ingesters = [thanos.receive_argv(Path("/bin/thanos"), plan, p, files, "INF") for p in plan.ingesters]
    for n, argv in enumerate(ingesters, start=1):
        assert not any(arg.startswith("--receive.hashrings-file") for arg in argv)  # ingester only
        assert f'--label={thanos.REPLICA_LABEL}="{n}"' in argv
        assert f"--tsdb.path={files.data(f'thanos-receive-{n}')}" in argv
        assert "--tsdb.retention=0d" in argv  # INF: keep everything
    for argv in [router, *ingesters]:
        # every listener on loopback, and every port that can ask for credentials asks
        addresses = [arg.split("=", 1)[1] for arg in argv if arg.split("=")[0].endswith("address")]
        assert len(addresses) == 4 and all(a.startswith("127.0.0.1:") for a in addresses), addresses
        assert f"--http.config={files.web_config}" in argv
        assert f"--grpc-server-tls-client-ca={files.ca}" in argv
        assert f"--remote-write.server-tls-client-ca={files.ca}" in argv
    query = thanos.query_argv(Path("/bin/thanos"), plan, files)
    assert [arg for arg in query if arg.startswith("--endpoint=")] == [
        f"--endpoint={p.grpc_address}" for p in (*plan.ingesters, plan.store)]
    assert f"--query.replica-label={thanos.REPLICA_LABEL}" in query and "--grpc-client-tls-secure" in query


def test_the_web_config_holds_a_hash_never_the_password():
    assert thanos.web_config_text("$2a$10$abc") == f'basic_auth_users:\n  {thanos.USER}: "$2a$10$abc"\n'
    with pytest.raises(thanos.ThanosConfigError):
        thanos.web_config_text("the-password-itself")


def test_the_stack_certificate_is_signed_by_its_own_ca_and_only_its_user_reads_the_keys(tmp_path):
    files = thanos.Files(tmp_path / "thanos")
    thanos.ensure_tls(files, "127.0.0.1")
    assert (files.tls.stat().st_mode & 0o777) == 0o700
    assert (files.key.stat().st_mode & 0o077) == 0 and ((files.tls / "ca.key").stat().st_mode & 0o077) == 0
    # Python's own TLS checks the chain and the IP: serve with the certificate, connect trusting the CA.
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(files.cert, files.key)
    server.verify_mode = ssl.CERT_REQUIRED
    server.load_verify_locations(files.ca)
    client = ssl.create_default_context(cafile=str(files.ca))
    client.load_cert_chain(files.cert, files.key)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        import threading
        accepted = {}

        def accept():
            conn, _ = listener.accept()
            with server.wrap_socket(conn, server_side=True) as tls:
                accepted["peer"] = tls.getpeercert()["subject"]

        thread = threading.Thread(target=accept)
        thread.start()
        with socket.create_connection(listener.getsockname()) as raw, \
                client.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            assert tls.version() is not None
        thread.join(10)
    assert (("commonName", "sparkscope thanos"),) in accepted["peer"]
    before = files.cert.read_bytes()
    thanos.ensure_tls(files, "127.0.0.1")  # kept: Telegraf and running processes hold it
    assert files.cert.read_bytes() == before


def test_up_starts_the_store_between_influxdb_and_telegraf_and_only_when_asked(tmp_path):
    influx_only = isolated_settings(tmp_path / "a")
    assert service_names(influx_only) == ("influxdb", "telegraf", "grafana")
    settings = isolated_settings(tmp_path / "b", SPARKSCOPE_METRICS_STORE="thanos", THANOS_PORT="20000")
    assert service_names(settings) == ("influxdb", "thanos-receive-1", "thanos-receive-2", "thanos-receive-3",
                                       "thanos-router", "thanos-store", "thanos-compact", "thanos-query",
                                       "telegraf", "grafana")
    assert wanted_services(settings, ("influxdb", "telegraf", "grafana")) == service_names(settings)
    assert wanted_services(settings, ("telegraf",)) == ("telegraf",)
    assert wanted_services(settings, ("thanos-receive-2",)) == ("thanos-receive-2",)
    with pytest.raises(StackError, match="no thanos-receive-4 in this stack"):
        wanted_services(settings, ("thanos-receive-4",))
    with pytest.raises(StackError, match="no thanos-query in this stack.*METRICS_STORE=influxdb"):
        wanted_services(influx_only, ("thanos-query",))
    with pytest.raises(SettingsError, match="SPARKSCOPE_METRICS_STORE"):
        isolated_settings(tmp_path / "c", SPARKSCOPE_METRICS_STORE="victoria")
    with pytest.raises(StackError, match="THANOS_REPLICATION_FACTOR=4.*in .env"):
        thanos_layout(isolated_settings(tmp_path / "d", SPARKSCOPE_METRICS_STORE="thanos",
                                        THANOS_REPLICATION_FACTOR="4"))


def test_the_compose_backend_refuses_the_thanos_store_instead_of_starting_without_it(tmp_path):
    from sparkscope.stack.compose import ComposeBackend
    settings = isolated_settings(tmp_path, SPARKSCOPE_METRICS_STORE="thanos")
    with pytest.raises(StackError, match="native backend only"):
        ComposeBackend(settings).up(progress=quiet)


@pytest.mark.parametrize("measurement, field, name", [
    ("JVMHeapMemory", "value", "JVMHeapMemory_value"),
    ("heap.used", "value", "heap_used_value"),
    ("threadpool.activeTasks", "value", "threadpool_activeTasks_value"),
    ("executor.filesystem.file.read_bytes", "count", "executor_filesystem_file_read_bytes_count"),
    ("cpu", "usage_active", "cpu_usage_active"),
    ("9lives", "value", "lives_value"),
    ("_private.x", "value", "private_x_value"),
])
def test_series_names_are_the_ones_telegrafs_serializer_writes(measurement, field, name):
    assert series_name(measurement, field) == name


# --- slow: the real store -----------------------------------------------------------------

class Query:
    """Thanos Query's HTTP API, as Grafana's Prometheus datasource asks it (Basic auth)."""

    def __init__(self, settings):
        self.url = thanos_layout(settings).query.http_url
        self.password = thanos.Files(settings.state_dir / "thanos").password()

    def get(self, path: str, password: str | None = None, **params) -> dict:
        request = urllib.request.Request(f"{self.url}{path}?{urllib.parse.urlencode(params)}")
        request.add_header("Authorization", http.basic_auth(thanos.USER, password or self.password))
        with http.urlopen(request, timeout=30) as resp:
            return json.loads(resp.read())

    def vector(self, promql: str, **params) -> dict[tuple, float]:
        """An instant query: {labels as sorted tuples: value}."""
        body = self.get("/api/v1/query", query=promql, **params)
        assert body["status"] == "success", body
        return {tuple(sorted(r["metric"].items())): float(r["value"][1]) for r in body["data"]["result"]}

    def newest_sample(self, range_selector: str) -> float:
        """The time of the newest raw sample a range selector gives, replicas apart (0 if none)."""
        body = self.get("/api/v1/query", query=range_selector, dedup="false")
        assert body["status"] == "success", body
        return max((float(t) for series in body["data"]["result"] for t, _ in series["values"]), default=0.0)

    def per_executor(self, app_id: str) -> dict[str, float]:
        """How many heap samples Query holds per executor of a run (replicas merged)."""
        name, app, executor = series_name(JVM_HEAP_MEMORY, "value"), label_name(APPLICATION), label_name(EXECUTOR)
        got = self.vector(f'sum by ({executor}) (count_over_time({name}{{{app}="{app_id}"}}[1h]))')
        return {dict(labels)[executor]: value for labels, value in got.items()}


@contextmanager
def started_thanos_stack(tmp_path_factory) -> Iterator:
    """InfluxDB, the Thanos store (3 ingesters) and Telegraf, on free ports; stopped by their pids."""
    from sparkscope_testkit.sandbox import throwaway_stack
    base = free_base_port(3)
    services = ("influxdb", *thanos.layout(base).names, "telegraf")  # no Grafana runs in the tests
    with throwaway_stack(tmp_path_factory.mktemp("thanos-state"), only=services, unread_metrics="pass",
                         SPARKSCOPE_METRICS_STORE="thanos", THANOS_PORT=str(base)) as settings:
        yield settings


@pytest.fixture(scope="module")
def thanos_stack(tmp_path_factory):
    with started_thanos_stack(tmp_path_factory) as settings:
        yield settings


@pytest.mark.slow
def test_a_spark_run_lands_per_executor_in_thanos_and_survives_an_ingester_stopped(thanos_stack, tmp_path):
    from conftest import Stack, run_spark_job
    from sparkscope.provision.annotator_jar import ensure_annotator_jar
    from sparkscope.settings import ROOT
    from sparkscope.spark.conf import annotator_properties
    from sparkscope.stack.native import NativeBackend, PidFile

    settings = thanos_stack
    query = Query(settings)
    backend = NativeBackend(settings)

    # Nobody reads or writes without credentials.
    with pytest.raises(urllib.error.HTTPError) as refused:
        query.get("/api/v1/query", password="not-the-password", query="up")
    assert refused.value.code == 401
    remote_write = thanos_layout(settings).router.remote_write_url
    # No client certificate: the router refuses the TLS session, and no HTTP answer comes back (TLS 1.3
    # says so with an alert at the handshake or at the first read: URLError, SSLError or a reset).
    with pytest.raises(OSError) as no_certificate:
        context = ssl.create_default_context(cafile=str(thanos.Files(settings.state_dir / "thanos").ca))
        urllib.request.urlopen(urllib.request.Request(remote_write, data=b"x", method="POST"), timeout=10,
                               context=context)
    assert not isinstance(no_certificate.value, (urllib.error.HTTPError, ConnectionRefusedError)), no_certificate
    router_log = backend.log_path(thanos.ROUTER)
    assert wait_until(lambda: "client didn't provide a certificate" in router_log.read_text(), 10)

    jar = ensure_annotator_jar(ROOT, progress=quiet)  # its events go to InfluxDB only
    first = run_spark_job(Stack(settings), "metrics_job.py", tmp_path, conf=annotator_properties(settings, jar))
    assert wait_until(lambda: set(query.per_executor(first.app_id)) >= {"driver", "0", "1"}, 60), \
        query.per_executor(first.app_id)
    time.sleep(5)  # the last reports of the JVMs' stop, flushed every 2 s
    whole = query.per_executor(first.app_id)
    assert all(count >= 2 for count in whole.values()), whole

    # Every measurement of the run InfluxDB holds is in Thanos under the name store/prometheus.py gives
    # it, and nothing else is (the events, sparkscope_* and block_*, stay in InfluxDB alone).
    stored = Stack(settings).influx(f'SHOW MEASUREMENTS WHERE "{APPLICATION}" = \'{first.app_id}\'')
    measurements = {row[0] for row in stored[0]["values"]} if stored else set()
    metrics = {m for m in measurements if not m.startswith(("sparkscope_", "block_"))}
    assert JVM_HEAP_MEMORY in metrics and metrics != measurements, measurements
    in_thanos = set(query.get("/api/v1/label/__name__/values",
                              **{"match[]": f'{{{label_name(APPLICATION)}="{first.app_id}"}}'})["data"])
    assert in_thanos == {series_name(m, "value") for m in metrics}

    # One ingester stopped by its pid: with a replication factor of 2 every series has a copy elsewhere.
    stopped = "thanos-receive-2"
    pid = PidFile(settings.state_dir, stopped).running_pid()
    assert pid is not None
    backend.down(only=(stopped,), progress=quiet)
    assert PidFile(settings.state_dir, stopped).running_pid() is None
    assert query.per_executor(first.app_id) == whole

    second = run_spark_job(Stack(settings), "metrics_job.py", tmp_path)
    assert wait_until(lambda: set(query.per_executor(second.app_id)) >= {"driver", "0", "1"}, 60), \
        query.per_executor(second.app_id)
    assert query.per_executor(first.app_id) == whole

    # Started again, it rejoins: Query reaches it, and the router sends it new series.
    restarted = time.time()
    backend.up(only=(stopped,), progress=quiet)
    # Raw samples (a range selector, no function: names kept), copies not merged: what ingester 2 holds.
    on_it = f'{{__name__=~".+", {thanos.REPLICA_LABEL}="2"}}[30s]'
    assert wait_until(lambda: query.newest_sample(on_it) > restarted, 60), \
        "no sample written after its restart reached the restarted ingester"
    stores = query.get("/api/v1/stores")["data"]["receive"]
    assert {s["name"] for s in stores if s["lastError"] is None} == {
        p.grpc_address for p in thanos_layout(settings).ingesters}, stores
    assert query.per_executor(first.app_id) == whole
    assert time.time() - restarted < 120


@pytest.mark.slow
def test_status_lists_every_thanos_process_with_its_pid_and_url(thanos_stack):
    import subprocess
    import sys
    from sparkscope.settings import ROOT

    def status() -> dict:
        done = subprocess.run([sys.executable, "-m", "sparkscope", "status", "--json", "--backend", "native"],
                              capture_output=True, text=True, cwd=ROOT, timeout=120,
                              env={**__import__("os").environ, **thanos_stack.as_env(),
                                   "PYTHONPATH": str(ROOT / "src")})
        return {s["name"]: s for s in json.loads(done.stdout)["services"]}

    # Telegraf reports its outputs every 10 s (inputs.internal): the first report may be still to come.
    assert wait_until(lambda: "to Thanos" in (status()["telegraf"]["data"] or ""), 40)
    services = status()
    plan = thanos_layout(thanos_stack)
    for process in plan.processes:
        row = services[process.name]
        assert row["state"] == "up" and isinstance(row["pid"], int), row
        assert str(process.http if process in (plan.query, plan.compact) else
                   process.remote_write if process is plan.router else process.grpc) in row["url"], row
    assert services["influxdb"]["state"] == services["telegraf"]["state"] == "up"
    assert "to Thanos: buffer" in services["telegraf"]["data"], services["telegraf"]  # its remote write, counted
    assert services[thanos.QUERY]["data"] == "reaches 3 of 3 ingesters and the store gateway"
    assert services[thanos.COMPACT]["data"].startswith("bucket: "), services[thanos.COMPACT]


def test_a_plain_up_without_grafana_still_starts_the_whole_thanos_store(tmp_path, monkeypatch):
    """`./sparkscope up` asks for the whole stack; natively without a Grafana it leaves
    Grafana out, and must not leave the Thanos processes out with it."""
    from sparkscope.stack import Backend, SERVICE_NAMES
    from sparkscope.stack import native
    asked = []
    monkeypatch.setattr(Backend, "up", lambda self, only, progress: asked.append(only))
    monkeypatch.setattr(native, "local_grafana", lambda settings: None)
    monkeypatch.setattr(native.NativeBackend, "start_blockprobe", lambda self, progress: False)
    monkeypatch.setattr(native.NativeBackend, "start_threadprobe", lambda self, progress: False)
    settings = isolated_settings(tmp_path, SPARKSCOPE_METRICS_STORE="thanos", THANOS_PORT="20000")
    native.NativeBackend(settings).up(SERVICE_NAMES, progress=quiet)
    assert asked == [("influxdb", "thanos-receive-1", "thanos-receive-2", "thanos-receive-3", "thanos-router",
                      "thanos-store", "thanos-compact", "thanos-query", "telegraf")]


def test_the_password_is_private_reaches_the_hasher_on_stdin_and_a_new_one_remakes_the_web_config(tmp_path):
    hasher = tmp_path / "bcrypt-hash"
    calls = tmp_path / "calls"
    # Stands in for the Go helper: records its argv, answers a hash-like line made from stdin.
    hasher.write_text(f'#!/bin/sh\necho "$@" >> {calls}\nread pw\necho "\\$2a\\$10\\$$(printf %s "$pw" | wc -c)x"\n')
    hasher.chmod(0o755)
    files = thanos.Files(tmp_path / "thanos")
    thanos.ensure_password(files, hasher)
    password = files.password()
    assert len(password) >= 24 and (files.password_file.stat().st_mode & 0o777) == 0o600
    assert (files.web_config.stat().st_mode & 0o777) == 0o600
    assert files.web_config.read_text() == f'basic_auth_users:\n  {thanos.USER}: "$2a$10${len(password)}x"\n'
    assert password not in calls.read_text() and password not in files.web_config.read_text()
    thanos.ensure_password(files, hasher)  # unchanged: not hashed again, the same password kept
    assert calls.read_text().count("\n") == 1 and files.password() == password
    files.password_file.write_text("a-password-set-by-hand\n")
    thanos.ensure_password(files, hasher)
    assert files.web_config.read_text().endswith('"$2a$10$22x"\n')
