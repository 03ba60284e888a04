"""Shared fixtures: one native stack per test session (InfluxDB and Telegraf;
no Grafana runs here: dashboards are opened through sparkscope_testkit.grafana12 and
grafana13, models of Grafana 12.4 and 13), on free loopback ports, in a temporary state
directory, stopped by the pids it started. Helpers the tests and bench/ share
live in the package sparkscope_testkit (src/sparkscope_testkit/)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from sparkscope.provision.annotator_jar import ensure_annotator_jar
from sparkscope.spark.conf import annotator_properties, sparkscope_properties
from sparkscope.spark.submit import run_submit, spark_home, submit_argv
from sparkscope.store import influx
from sparkscope import versions
from sparkscope.process import wait_until
from sparkscope.stack.native import NativeBackend
from sparkscope.settings import ROOT, Settings
from sparkscope_testkit.grafana12 import Dashboard12
from sparkscope_testkit.sandbox import isolated_settings, reader_http
from sparkscope_testkit.tiers import refuse_in_fast_tier

JOBS = Path(__file__).parent / "jobs"
SPARK4_VERSION = versions.SPARK_4  # the Spark 4 the same jar is tried on (ensure_pyspark)

# The suite's JVMs (Spark's driver and executors, spark-submit's launcher) compile
# with C1 only. Its Spark runs last seconds, and C2 compiling code they never run
# long enough to profit from was half their CPU: with C1 alone a file of Spark runs
# (test_annotator_scheduler.py) took 44 % less CPU and 14 % less time, side by side.
# What the tests check (metrics, events, stacks, memory) does not depend on the JIT
# tier; bench/ never sets this, as it measures what users' JVMs cost. A value the
# caller set is kept; unrecognised by another JVM, the option is ignored. Tests of
# what compiled code looks like (the profiler's stacks) run with users_jit().
C1_ONLY = "-XX:+IgnoreUnrecognizedVMOptions -XX:TieredStopAtLevel=1"
os.environ.setdefault("JAVA_TOOL_OPTIONS", C1_ONLY)


# For JVMs that compile as users' do (C1 then C2): the suite's C1_ONLY taken out,
# as run_spark_job(env=USERS_JIT) takes it (None removes a variable), or users_jit(env)
# for a Popen. Also for jobs that compute for tens of seconds, where C2 pays for
# itself (tests/jobs/memory_job.py: 35 s instead of 50 s).
USERS_JIT = {"JAVA_TOOL_OPTIONS": None} if os.environ.get("JAVA_TOOL_OPTIONS") == C1_ONLY else {}


def users_jit(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in {**env, **USERS_JIT}.items() if v is not None}


def java_job_jar(tmp_path_factory, name: str) -> Path:
    """tests/jobs/java/<name>.java compiled against Spark's jars, in a jar of its own."""
    if shutil.which("javac") is None or shutil.which("jar") is None:
        pytest.fail(f"a JDK (javac, jar) is needed to build tests/jobs/java/{name}.java")
    out = tmp_path_factory.mktemp(name.lower())
    subprocess.run(["javac", "-cp", str(spark_home() / "jars" / "*"), "-d", str(out),
                    str(JOBS / "java" / f"{name}.java")], check=True, capture_output=True)
    subprocess.run(["jar", "cf", str(out / f"{name}.jar"), "-C", str(out), "."], check=True, capture_output=True)
    return out / f"{name}.jar"
SINK_PERIOD_S = 1


@dataclass
class Stack:
    settings: Settings

    def open_dashboard(self, board: dict, time_from_ms: int, time_to_ms: int, rules=Dashboard12,
                       **options) -> Dashboard12:
        """A dashboard opened as Grafana opens it (options: url_vars, timezone ...): 12.4's rules
        unless `rules` names another (grafana13.RULE_SETS)."""
        return rules(board, reader_http(self.settings), time_from_ms, time_to_ms, **options)

    def influx(self, statement: str) -> list[dict]:
        """The test's own look at what is stored (as the admin: any statement)."""
        return influx.query(self.settings.influx_admin, statement, self.settings.database)

    def send_graphite(self, text: str) -> None:
        with socket.create_connection((self.settings.graphite_host, self.settings.graphite_port), 5) as s:
            s.sendall(text.encode() if isinstance(text, str) else text)

    def wait_for(self, statement: str, predicate, deadline_s: float = 30.0):
        """Re-run an InfluxQL query until predicate(series) holds; return the series."""
        end = time.monotonic() + deadline_s
        while True:
            series = self.influx(statement)
            if predicate(series):
                return series
            if time.monotonic() > end:
                raise AssertionError(f"after {deadline_s:.0f} s, {statement!r} still gives {series!r}")
            time.sleep(0.5)

    def failed_writes(self) -> int:
        """How many writes to InfluxDB Telegraf has failed so far (the error lines of its log)."""
        log = NativeBackend(self.settings).log_path("telegraf")
        return log.read_text(errors="replace").count("Error writing to outputs.influxdb") if log.exists() else 0

    def wait_for_failed_writes(self, since: int, more: int = 2, deadline_s: float = 30.0) -> None:
        """Until Telegraf has failed `more` writes after `since` (a failed_writes() count taken
        before sending): with InfluxDB away it tries at each flush (2 s) while points wait in
        its buffer, so the second try after a send holds every line sent before the first."""
        assert wait_until(lambda: self.failed_writes() >= since + more, deadline_s), (
            f"Telegraf failed {self.failed_writes() - since} writes in {deadline_s:.0f} s, not {more}: "
            "is InfluxDB still up, or did the points not reach Telegraf?")

    def wait_for_telegraf_to_drain(self, deadline_s: float = 60.0) -> None:
        """Until every point Telegraf held has been written: its buffer is first in, first out, so
        a point sent now is written after them, and once it is stored none is left to come."""
        marker = f"app-drained-{time.time_ns()}"
        self.send_graphite(f"spark.{marker}.driver.jvm.heap.used 1 {int(time.time())}\n")
        self.wait_for(f'SELECT count("value") FROM "heap.used" WHERE "applicationid" = \'{marker}\'', bool,
                      deadline_s)


@pytest.fixture(scope="session")
def stack(tmp_path_factory) -> Stack:
    # Every metric Spark sends is kept (SPARKSCOPE_UNREAD_METRICS=pass): the
    # suite checks the path end to end, every line sent stored (test_faults) and
    # every name's schema (test_graphite_templates); what the shipped filter
    # keeps is proven apart, against every query (test_metric_filter.py).
    refuse_in_fast_tier("the session's stack")
    settings = isolated_settings(tmp_path_factory.mktemp("state"), unread_metrics="pass")
    backend = NativeBackend(settings)
    try:
        backend.up(only=("influxdb", "telegraf"))
        yield Stack(settings)
    finally:
        backend.down()


@dataclass
class SparkRun:
    app_id: str
    started_ms: int
    ended_ms: int
    log: Path
    stdout: str


def run_spark_job(stack: Stack, script: str, log_dir: Path, master: str = "local-cluster[2,1,1024]",
                  conf: dict[str, str] | None = None, timeout_s: float = 300,
                  spark_home: Path | None = None, args: list[str] = (),
                  env: dict[str, str | None] | None = None) -> SparkRun:
    refuse_in_fast_tier(f"Spark ({script})")
    props = sparkscope_properties(stack.settings, period_s=SINK_PERIOD_S)
    props.update(conf or {})
    started = int(time.time() * 1000)
    log = log_dir / f"{Path(script).stem}.log"
    result = run_submit(submit_argv(JOBS / script, master, props, args=list(args), home=spark_home), log, timeout_s,
                        home=spark_home, env=env)
    ended = int(time.time() * 1000)
    match = re.search(r"^APP_ID (\S+)$", result.stdout, re.M)
    assert result.returncode == 0 and match, (
        f"spark-submit {script} exited {result.returncode}; stdout {result.stdout[-500:]!r}; "
        f"Spark log: {log}\n" + log.read_text()[-3000:]
    )
    return SparkRun(match.group(1), started, ended, log, result.stdout)


@pytest.fixture(scope="session")
def metrics_run(stack: Stack, tmp_path_factory) -> SparkRun:
    """One real Spark application in local-cluster mode (driver + executors 0, 1),
    with the annotator, so that every dashboard panel has data."""
    jar = ensure_annotator_jar(ROOT, progress=lambda _: None)
    run = run_spark_job(stack, "metrics_job.py", tmp_path_factory.mktemp("spark"),
                        conf=annotator_properties(stack.settings, jar))
    # The last reports leave each JVM at stop; Telegraf flushes every 2 s.
    stack.wait_for(
        f'SHOW TAG VALUES FROM "JVMHeapMemory" WITH KEY = "executorid" WHERE "applicationid" = \'{run.app_id}\'',
        lambda s: s and {v[1] for v in s[0]["values"]} >= {"driver", "0", "1"},
    )
    # The annotator flushes the application's end as the driver stops.
    stack.wait_for(
        f"SELECT \"duration_ms\" FROM \"sparkscope_application\" WHERE \"applicationid\" = '{run.app_id}' "
        "AND \"status\" = 'FINISHED'",
        lambda s: bool(s),
    )
    return run
