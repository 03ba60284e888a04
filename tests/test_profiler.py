"""The profiler plugin end to end: a real Spark application with the plugin,
`./sparkscope profile` as a user runs it, async-profiler in the executors,
the profile in InfluxDB and in a standalone HTML page."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from conftest import JOBS, SINK_PERIOD_S, java_job_jar, users_jit
from sparkscope.profiles import control
from sparkscope.store import profiles as store
from sparkscope.store.nested_set import widest_leaves
from sparkscope.spark.conf import CLASS_PATH_KEYS, sparkscope_properties
from sparkscope.spark.submit import spark_env, submit_argv
from sparkscope_testkit.annotator_helpers import annotator_conf
from sparkscope_testkit.sandbox import settings_environ


@pytest.fixture(scope="module")
def udf_jar(tmp_path_factory) -> Path:
    return java_job_jar(tmp_path_factory, "ProfiledUdfs")


class ProfiledApp:
    """tests/jobs/profiled_job.py under spark-submit with the plugin, steered by its phase file."""

    def __init__(self, stack, jars: list[Path], tmp: Path, extra: dict[str, str] | None = None):
        self.stack = stack
        self.control_dir = tmp / "control"
        self.phase = tmp / "phase"
        self.set_phase("burn")
        props = sparkscope_properties(stack.settings, period_s=SINK_PERIOD_S)
        # The jars given are shipped (spark.jars), the annotator's among them: not the checkout's on the class path.
        props.update({k: v for k, v in annotator_conf(stack).items() if k not in CLASS_PATH_KEYS})
        props["spark.jars"] = ",".join(str(j) for j in jars)
        props["spark.sparkscope.profiler.control.dir"] = str(self.control_dir)
        # The JIT may inline a UDF's hot loop into Spark's generated code, and
        # the JVM then charges some samples of the loop to the generated
        # method (the loop has no debug info of its own); keeping the UDFs
        # out of line makes "the hot method is the widest frame" a fixed fact
        # of this workload, not a coin toss of the compiler.
        props["spark.executor.extraJavaOptions"] = "-XX:CompileCommand=quiet -XX:CompileCommand=dontinline,ProfiledUdfs*::*"
        props.update(extra or {})
        self.log = tmp / "spark.log"
        argv = submit_argv(JOBS / "profiled_job.py", "local-cluster[2,1,1024]", props, [str(self.phase)])
        # Compiled as users' JVMs compile: with C1 alone the loop's long remainder is a call to
        # the runtime (SharedRuntime::lrem), which then holds most of the loop's self time.
        self.proc = subprocess.Popen(argv, env=users_jit(spark_env(self.log)), stdout=subprocess.PIPE,
                                     stderr=open(self.log, "w"),
                                     text=True, start_new_session=True)
        first = self.proc.stdout.readline()
        assert first.startswith("APP_ID "), f"no app id from spark-submit; log {self.log}"
        self.app_id = first.split()[1]

    def set_phase(self, phase: str) -> None:
        """Replaces the phase file whole: written in place, the job between rounds could read
        it truncated, as empty, and stop (a clean-clone run lost its nap round so)."""
        part = self.phase.with_suffix(".part")
        part.write_text(phase)
        os.replace(part, self.phase)

    def wait_until_executors_check_in(self, deadline_s: float = 90) -> list[str]:
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            try:
                ctl = control.find_control(self.app_id, self.control_dir)
                live = control.live_executors(ctl)
                if {"0", "1"} <= set(live):
                    return live
            except control.ProfileError:
                pass
            time.sleep(1)
        raise AssertionError(f"executors never checked in with the driver's profiler; log {self.log}")

    def wait_for_round(self, phase: str, deadline_s: float = 120) -> None:
        end = time.monotonic() + deadline_s
        for line in self.proc.stdout:
            if line.strip() == f"ROUND {phase}":
                return
            assert time.monotonic() < end, f"no {phase} round in {deadline_s} s; log {self.log}"
        raise AssertionError(f"the job ended before a {phase} round; log {self.log}")

    def profile(self, *args: str) -> subprocess.CompletedProcess:
        env = {**os.environ, **settings_environ(self.stack.settings)}
        return subprocess.run([sys.executable, "-m", "sparkscope", "profile", self.app_id,
                               "--control-dir", str(self.control_dir), *args], env=env, capture_output=True,
                              text=True, timeout=240)

    def stop(self) -> int:
        self.set_phase("stop")
        try:
            self.proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            raise
        return self.proc.returncode


def stage_profiles(stack, app_id: str, kind: str) -> list[dict]:
    series = stack.influx(f"SELECT profile, executorid, stage, samples, top FROM {store.PROFILES} "
                          f"WHERE applicationid = '{app_id}' AND kind = '{kind}'")
    if not series:
        return []
    cols = series[0]["columns"]
    return [dict(zip(cols, v)) for v in series[0]["values"]]


@pytest.fixture(scope="module")
def profiled(stack, udf_jar, tmp_path_factory):
    """One application profiled twice, as a user would: in cpu mode while a
    stage burns CPU in a Java UDF, in wall mode while a stage sleeps in one."""
    from sparkscope.provision.annotator_jar import ensure_annotator_jar
    from sparkscope.settings import ROOT

    tmp = tmp_path_factory.mktemp("profiled")
    app = ProfiledApp(stack, [ensure_annotator_jar(ROOT, progress=lambda _: None), udf_jar], tmp)
    try:
        app.wait_until_executors_check_in()
        app.wait_for_round("burn")
        cpu = app.profile("--executor", "0", "--seconds", "6", "--mode", "cpu", "--out", str(tmp / "html"))
        app.set_phase("nap")
        app.wait_for_round("nap")
        wall = app.profile("--executor", "all", "--seconds", "6", "--mode", "wall", "--out", str(tmp / "html"))
        unknown = app.profile("--executor", "7", "--seconds", "1")
    finally:
        code = app.stop()
    return {"app": app, "cpu": cpu, "wall": wall, "unknown": unknown, "exit": code, "html": tmp / "html"}


def test_cpu_profile_names_the_hot_method_under_the_stage_that_ran_it(stack, profiled):
    cpu, app = profiled["cpu"], profiled["app"]
    assert cpu.returncode == 0, cpu.stdout + cpu.stderr
    # The terminal summary puts the burning method first.
    top = re.search(r"most self time:\n\s+([\d.]+) %\s+(\S+)", cpu.stdout)
    assert top and "burnCpuForProfilerTest" in top.group(2), cpu.stdout
    # Each stage cut is named, with its share and the job the annotator saw it run for.
    assert re.search(r"^  stage \d+\.\d+ \(.+\): \d+ % of the samples, most self time in ProfiledUdfs\.burnCpu",
                     cpu.stdout, re.M), cpu.stdout
    profiles = stage_profiles(stack, app.app_id, "cpu")
    whole = [p for p in profiles if p["stage"] == ""]
    per_stage = [p for p in profiles if p["stage"].startswith("stage ")]
    assert len(whole) == 1 and whole[0]["executorid"] == "0", profiles
    assert per_stage and "burnCpuForProfilerTest" in per_stage[0]["top"], profiles
    rows = store.read_rows(stack.settings.influx_reader, stack.settings.database, app.app_id, per_stage[0]["profile"])
    # A well-formed nested set: the root holds everything, each level's
    # frames sum to no more than their parent, and the stage is the root.
    assert rows[0].level == 0 and rows[0].label.startswith(per_stage[0]["stage"])
    assert rows[0].value == sum(r.value for r in rows if r.level == 1) + rows[0].self_value
    label, value = widest_leaves(rows, 1)[0]
    assert "burnCpuForProfilerTest" in label and value / rows[0].value > 0.5, widest_leaves(rows, 5)


def test_wall_profile_shows_the_sleeping_stage_as_waiting_in_thread_sleep(stack, profiled):
    wall, app = profiled["wall"], profiled["app"]
    assert wall.returncode == 0, wall.stdout + wall.stderr
    profiles = stage_profiles(stack, app.app_id, "wall")
    assert {p["executorid"] for p in profiles if p["stage"] == ""} == {"0", "1"}, profiles
    napping = [p for p in profiles if p["stage"].startswith("stage ")]
    assert napping, profiles
    rows = store.read_rows(stack.settings.influx_reader, stack.settings.database, app.app_id, napping[0]["profile"])
    waiting = [r for r in rows if r.level == 1 and r.label == "waiting"]
    running = sum(r.value for r in rows if r.level == 1 and r.label == "running")
    assert waiting and waiting[0].value > running, [(r.label, r.value) for r in rows if r.level == 1]
    path = []
    sleep_under_waiting = False
    for r in rows:
        del path[r.level:]
        path.append(r.label)
        if "sleepOffCpuForProfilerTest" in r.label and "waiting" in path:
            sleep_under_waiting = True
    assert sleep_under_waiting


def test_profile_command_writes_a_standalone_flame_graph_page(profiled):
    pages = sorted(profiled["html"].glob("sparkscope-profile-*.html"))
    assert len(pages) == 3, pages  # cpu on executor 0; wall on 0 and 1
    text = next(p for p in pages if "cpu" in p.name).read_text()
    assert "burnCpuForProfilerTest" in text and "<script src" not in text and "http" not in text.split("<script>")[1]


def test_unknown_executor_is_refused_with_the_live_ones_named_and_the_job_unaffected(profiled):
    unknown = profiled["unknown"]
    assert unknown.returncode == 1  # a runtime error: the run has no such live executor (not a bad flag)
    assert "executor 7 is not running the profiler plugin" in unknown.stderr and "live: " in unknown.stderr, \
        unknown.stderr
    assert profiled["exit"] == 0


def test_without_async_profiler_a_profile_fails_with_the_reason_and_the_job_finishes(stack, udf_jar, tmp_path):
    from sparkscope.provision.annotator_jar import ensure_annotator_jar
    from sparkscope.settings import ROOT

    # The annotator jar without the bundled async-profiler: what a platform
    # with no native library, or a JVM that refuses it, looks like to the plugin.
    bare = tmp_path / "annotator-without-profiler.jar"
    with zipfile.ZipFile(ensure_annotator_jar(ROOT, progress=lambda _: None)) as src, \
            zipfile.ZipFile(bare, "w") as dst:
        for item in src.infolist():
            if not item.filename.startswith(("one/", "linux-", "macos/")):
                dst.writestr(item, src.read(item))
    app = ProfiledApp(stack, [bare, udf_jar], tmp_path)
    try:
        app.wait_until_executors_check_in()
        result = app.profile("--executor", "1", "--seconds", "2")
    finally:
        code = app.stop()
    assert result.returncode == 1, result.stdout + result.stderr
    assert "executor 1: no profile: async-profiler is not on the executor's classpath" in result.stdout
    assert code == 0


def test_no_running_application_with_the_plugin_is_a_clear_error(tmp_path, stack):
    env = {**os.environ, **settings_environ(stack.settings)}
    result = subprocess.run([sys.executable, "-m", "sparkscope", "profile", "--app", "app-none",
                             "--control-dir", str(tmp_path)], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1  # a runtime error: no such run
    assert "--app is deprecated: give the run as the first argument" in result.stderr  # still accepted
    assert "no running application app-none with the profiler plugin" in result.stderr
    assert "spark.plugins=dev.sparkscope.annotator.ProfilerPlugin" in result.stderr


def test_continuous_profiles_arrive_every_window_with_no_new_series_and_yield_to_a_request(stack, udf_jar,
                                                                                          tmp_path):
    from sparkscope.provision.annotator_jar import ensure_annotator_jar
    from sparkscope.settings import ROOT

    app = ProfiledApp(stack, [ensure_annotator_jar(ROOT, progress=lambda _: None), udf_jar], tmp_path, {
        "spark.sparkscope.profiler.continuous": "cpu", "spark.sparkscope.profiler.continuous.windowSeconds": "5"})

    def whole_profiles() -> list[dict]:
        return [p for p in stage_profiles(stack, app.app_id, "cpu") if p["stage"] == ""]

    def series() -> int:
        # The plugin's kinds only: the stack's thread sampler adds offcpu profiles of its own.
        found = stack.influx(f"SHOW SERIES EXACT CARDINALITY FROM {store.ROWS} WHERE applicationid = '{app.app_id}' "
                             "AND kind =~ /^(cpu|wall)$/")
        return sum(v[0] for s in found for v in s["values"])

    try:
        app.wait_until_executors_check_in()
        stack.wait_for(f"SELECT count(samples) FROM {store.PROFILES} WHERE applicationid = '{app.app_id}' "
                       "AND stage = ''", lambda s: bool(s) and s[0]["values"][0][1] >= 4, 120)
        early = series()
        before = len(whole_profiles())
        asked = app.profile("--executor", "1", "--seconds", "3", "--mode", "wall", "--out", str(tmp_path))
        stack.wait_for(f"SELECT count(samples) FROM {store.PROFILES} WHERE applicationid = '{app.app_id}' "
                       "AND stage = '' AND kind = 'cpu'",
                       lambda s: bool(s) and s[0]["values"][0][1] >= before + 2, 60)
        late = series()
    finally:
        code = app.stop()
    assert asked.returncode == 0, asked.stdout + asked.stderr
    assert {p["executorid"] for p in whole_profiles()} == {"0", "1"}
    # One series per executor and kind, however many windows: cpu for both, wall for the one asked.
    assert early == 2 and late == 3, (early, late)
    assert code == 0


# ------------------------------------------------------------------ Grafana

PROFILES_BOARD = "spark-profiles.json"


def cpu_stage_profile(stack, app_id: str) -> str:
    return next(p["profile"] for p in stage_profiles(stack, app_id, "cpu") if p["stage"].startswith("stage "))


def test_every_panel_and_picker_of_the_profiles_dashboard_returns_the_profile(stack, profiled):
    """The profiles dashboard opened on the run's CPU stage profile as Grafana
    12 opens it: the pickers offer the run, its kind, executor and profile;
    the flame graph's rows are the profile's, the burning method by name,
    and its unit comes with it."""
    from sparkscope.dashboards import build

    board = build()[PROFILES_BOARD]
    app = profiled["app"]
    profile = cpu_stage_profile(stack, app.app_id)
    start, end = int(time.time() * 1000) - 3_600_000, int(time.time() * 1000)
    dash = stack.open_dashboard(board, start, end, url_vars={"applicationid": app.app_id, "kind": "cpu",
                                                              "profile": profile})
    wanted = {"applicationid": app.app_id, "kind": "cpu", "executorid": "0", "profile": profile}
    for name, value in wanted.items():
        assert value in {v for _, v in dash.variables[name].options}, (name, dash.variables[name].options[:10])
    assert dash.variables["profile"].current == [profile]
    for panel in [p for top in board["panels"] for p in [top, *top.get("panels", [])] if p["type"] != "row"]:
        results = dash.run_panel(panel)
        rows = [dict(zip(one["columns"], row)) for one in results["A"] for row in one["values"]]
        assert rows, f"{panel['title']}: no rows"
        if panel["type"] == "flamegraph":
            assert any("burnCpuForProfilerTest" in (row.get("label") or "") for row in rows), rows[:5]
            assert [dict(zip(one["columns"], row)) for one in results["B"] for row in one["values"]][0]["unit"] == "ns"
