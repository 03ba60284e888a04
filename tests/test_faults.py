"""The stack survives its own parts failing while Spark runs: nothing is lost
through an InfluxDB restart, the sink reconnects after a Telegraf restart,
Grafana's provisioning comes back identical, and garbage on the Graphite
port changes nothing. Each test uses its own stack, bounded in time."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from sparkscope import native
from sparkscope.grafana_api import Grafana, GrafanaError
from sparkscope.spark import spark_env, sparkscope_properties, submit_argv

from conftest import JOBS, SINK_PERIOD_S, Stack
from sparkscope.sandbox import throwaway_stack
from graphite_tap import GraphiteTap

OUTAGE_S = 20.0


@pytest.fixture(scope="module")
def fault_stack(tmp_path_factory):
    with throwaway_stack(tmp_path_factory.mktemp("fault-state")) as settings:
        yield Stack(settings, Grafana(settings.grafana_url, settings.grafana_user, settings.grafana_password))


class SparkProcess:
    """spark-submit of a job in local-cluster mode, in its own process group."""

    def __init__(self, stack: Stack, graphite_port: int, seconds: float, log: Path):
        props = sparkscope_properties(stack.settings, period_s=SINK_PERIOD_S)
        props["spark.metrics.conf.*.sink.graphite.port"] = str(graphite_port)
        argv = submit_argv(JOBS / "steady_job.py", "local-cluster[2,1,1024]", props, [str(seconds)])
        self.log = log
        self.proc = subprocess.Popen(argv, env=spark_env(), stdout=subprocess.PIPE, stderr=open(log, "w"),
                                     text=True, start_new_session=True)
        first = self.proc.stdout.readline()
        assert first.startswith("APP_ID "), f"no app id from spark-submit; log {log}"
        self.app_id = first.split()[1]

    def wait(self, timeout_s: float) -> int:
        try:
            out, _ = self.proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            raise
        assert self.proc.returncode == 0, f"Spark job failed ({self.proc.returncode}); log {self.log}"
        return self.proc.returncode


def stored_count(stack: Stack, app_id: str) -> int:
    series = stack.influx(f'SELECT count("value") FROM /.*/ WHERE "applicationid" = \'{app_id}\'')
    return sum(s["values"][0][1] for s in series)


def report_times(stack: Stack, app_id: str, executor: str) -> list[int]:
    rows = stack.influx(f'SELECT "value" FROM "heap.used" WHERE "applicationid" = \'{app_id}\' '
                        f'AND "executorid" = \'{executor}\' AND "namespace" = \'jvm\'')
    return [r[0] for r in rows[0]["values"]] if rows else []


def wait_for_reports(stack: Stack, app_id: str, count: int, deadline_s: float = 60.0) -> None:
    stack.wait_for(f'SELECT count("value") FROM "heap.used" WHERE "applicationid" = \'{app_id}\' '
                   f'GROUP BY "executorid"',
                   lambda s: len(s) == 3 and all(x["values"][0][1] >= count for x in s), deadline_s)


def test_influxdb_restart_mid_run_loses_no_point(fault_stack, tmp_path):
    stack = fault_stack
    tap = GraphiteTap((stack.settings.graphite_host, stack.settings.graphite_port))
    try:
        job = SparkProcess(stack, tap.port, seconds=OUTAGE_S + 25, log=tmp_path / "spark.log")
        wait_for_reports(stack, job.app_id, 3)
        native.down(stack.settings, only=("influxdb",), progress=lambda _: None)
        down_at = int(time.time() * 1000)
        time.sleep(OUTAGE_S)  # the fault itself: InfluxDB stays away this long
        up_at = int(time.time() * 1000)
        native.up(stack.settings, only=("influxdb",), progress=lambda _: None)
        job.wait(timeout_s=180)
        sent = tap.points(job.app_id)
        stack.wait_for(f'SELECT count("value") FROM /.*/ WHERE "applicationid" = \'{job.app_id}\'',
                       lambda s: sum(x["values"][0][1] for x in s) >= len(sent), deadline_s=60)
    finally:
        tap.close()
    assert len(sent) > 1000, f"the tap saw only {len(sent)} points: did Spark report through it?"
    assert stored_count(stack, job.app_id) == len(sent)
    print(f"\n{len(sent)} distinct points sent, all stored; InfluxDB was down {(up_at - down_at) / 1000:.1f} s")
    during = [t for t in report_times(stack, job.app_id, "1") if down_at + 1000 < t < up_at - 1000]
    assert len(during) >= OUTAGE_S / SINK_PERIOD_S / 2, "points sent during the outage must be kept"


def test_telegraf_restart_mid_run_leaves_a_bounded_gap(fault_stack, tmp_path):
    stack = fault_stack
    job = SparkProcess(stack, stack.settings.graphite_port, seconds=30, log=tmp_path / "spark.log")
    wait_for_reports(stack, job.app_id, 3)
    started = time.monotonic()
    native.down(stack.settings, only=("telegraf",), progress=lambda _: None)
    native.up(stack.settings, only=("telegraf",), progress=lambda _: None)
    restart_s = time.monotonic() - started
    job.wait(timeout_s=180)
    # The sink drops reports while nothing listens and reconnects at its next
    # report: a gap of at most the restart time plus three periods.
    bound_ms = (restart_s + 3 * SINK_PERIOD_S) * 1000
    for executor in ("driver", "0", "1"):
        times = report_times(stack, job.app_id, executor)
        assert times and times[-1] > int(time.time() * 1000) - 60_000
        gap = max(b - a for a, b in zip(times, times[1:]))
        assert gap <= bound_ms, f"executor {executor}: gap {gap} ms > bound {bound_ms:.0f} ms"


def grafana_state(grafana: Grafana) -> tuple:
    dashboards = sorted((d["uid"], d["title"], d.get("folderTitle")) for d in grafana.request("/api/search"))
    datasources = sorted((d["uid"], d["name"], d["url"]) for d in grafana.request("/api/datasources"))
    return dashboards, datasources


def test_grafana_restart_brings_back_identical_provisioning(fault_stack):
    grafana = fault_stack.grafana
    before = grafana_state(grafana)
    assert before[0] and before[1]
    native.down(fault_stack.settings, only=("grafana",), progress=lambda _: None)
    native.up(fault_stack.settings, only=("grafana",), progress=lambda _: None)
    assert grafana_state(grafana) == before


def test_fuzz_on_graphite_port_keeps_stack_up_and_good_lines_flowing(fault_stack):
    stack = fault_stack
    address = (stack.settings.graphite_host, stack.settings.graphite_port)
    pid = native.PidFile(stack.settings.state_dir, "telegraf").running_pid()
    rng = random.Random(20261122)
    now = int(time.time())
    payloads = [
        bytes(rng.getrandbits(8) for _ in range(20000)),
        b"spark.app-20991231235959-0777.1.executor.x " + b"9" * 200000 + b" 1\n",
        b"y" * 1_000_000 + b"\n",
        f"spark.app-20991231235959-0777.1.executor.nan NaN {now}\n".encode(),
        f"spark.app-20991231235959-0777.1.executor.inf +Inf {now}\n".encode(),
        f"spark.app-20991231235959-0777.1.executor.ninf -Inf {now}\n".encode(),
        "spark.app-20991231235959-0777.1.executor.\udcff\udcfe 1 1\n".encode("utf-8", "surrogateescape"),
    ]
    for payload in payloads:
        with socket.create_connection(address, 5) as s:
            s.sendall(payload)
    for _ in range(2000):  # connections opened and dropped, some mid-line
        with socket.create_connection(address, 5) as s:
            if rng.random() < 0.5:
                s.sendall(b"spark.app-20991231235959-0777.1.exec")
    good = "".join(f"spark.app-20991231235959-0777.{i}.executor.threadpool.activeTasks {i} {now}\n"
                   for i in range(10))
    stack.send_graphite(good)
    series = stack.wait_for("SELECT \"value\" FROM \"threadpool.activeTasks\" WHERE \"applicationid\" = "
                            "'app-20991231235959-0777' GROUP BY \"executorid\"", lambda s: len(s) == 10)
    assert sorted(x["values"][0][1] for x in series) == list(range(10))
    assert native.PidFile(stack.settings.state_dir, "telegraf").running_pid() == pid
    for name in ("nan", "inf", "ninf"):
        assert not stack.influx(f'SELECT * FROM "{name}"'), f"non-finite {name} was stored"
    assert all(state == "up" for _, state, _ in native.status(stack.settings))


def listening_addresses(port: int) -> set[str]:
    """Local addresses of LISTEN sockets on port, from /proc/net/tcp{,6}."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, port_hex = local.split(":")
            if state == "0A" and int(port_hex, 16) == port:
                found.add(address)
    return found


def test_http_apis_listen_on_loopback_only(fault_stack):
    loopback = {"0100007F", "00000000000000000000000001000000"}
    for port in (fault_stack.settings.influxdb_port, fault_stack.settings.grafana_port):
        addresses = listening_addresses(port)
        assert addresses and addresses <= loopback, f"port {port} listens on {addresses}"


def test_grafana_refuses_anonymous_and_wrong_passwords(fault_stack):
    settings = fault_stack.settings
    with pytest.raises(urllib.error.HTTPError) as anonymous:
        urllib.request.urlopen(f"{settings.grafana_url}/api/dashboards/uid/sparkscope-executors", timeout=5)
    assert anonymous.value.code == 401
    for user, password in (("", ""), ("admin", "admin"), ("admin", "change-me")):
        with pytest.raises(GrafanaError, match="401"):
            Grafana(settings.grafana_url, user, password).request("/api/datasources")
    assert Grafana(settings.grafana_url, settings.grafana_user, settings.grafana_password) \
        .request("/api/datasources")
