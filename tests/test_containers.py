"""Container memory against its limit, for real: executors 0 and 1 of a
local-cluster run each start inside a cgroup v1 memory cgroup with a limit
(a java wrapper joins it before exec, as YARN's and Kubernetes' runtimes
place a container), then a Python worker and cached data each go past the
limit and the kernel kills what the OOM killer picks. Checked: what
ContainerMemoryPlugin stored per executor (limit, working set, OOM kills),
the executor's loss as Spark told the driver (exit 137), and what the
report says filled the container and what to change.

cgroup v2 with the memory controller cannot run on these machines (memory
is in v1); its reading is tested on file trees laid out as the kernel does
(annotator CgroupMemoryTest)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import time
import uuid
from pathlib import Path

import pytest

from sparkscope.provision.annotator_jar import ensure_annotator_jar
from sparkscope.report.advice import advise
from sparkscope.report.run_facts import RunReader
from sparkscope.spark.conf import annotator_properties
from sparkscope.store import influx
from sparkscope.settings import ROOT

from conftest import run_spark_job

MEMORY = Path("/sys/fs/cgroup/memory")
LIMITS_MIB = {"0": 640, "1": 400}
PYTHON_MIB = 700  # one Python worker's hold: past either limit, and larger than the JVM
CACHE_MIB = 350  # cached rows per executor: the heap grows past the limit

WRAPPER = """#!/bin/sh
# java that first joins a memory cgroup when it is one of the listed executors
for arg in "$@"; do
  if [ "$next" = 1 ]; then id=$arg; next=; fi
  [ "$arg" = "--executor-id" ] && next=1
done
if [ -n "$id" ]; then
  for pair in $(echo "$SPARKSCOPE_TEST_CGROUP_LIMITS" | tr ',' ' '); do
    if [ "${pair%%:*}" = "$id" ]; then
      dir="$SPARKSCOPE_TEST_CGROUP/executor-$id"
      mkdir -p "$dir" && echo "${pair#*:}M" > "$dir/memory.limit_in_bytes" && echo $$ > "$dir/cgroup.procs" || exit 97
    fi
  done
fi
exec %(java)s "$@"
"""


def own_memory_limit() -> int | None:
    """The memory limit over this process (and the driver it starts), as the kernel applies it."""
    path = next(line.split(":", 2)[2] for line in Path("/proc/self/cgroup").read_text().splitlines()
                if "memory" in line.split(":")[1].split(","))
    stat = dict(line.split() for line in (MEMORY / path.lstrip("/") / "memory.stat").read_text().splitlines())
    limit = int(stat["hierarchical_memory_limit"])
    return None if limit >= 1 << 60 else limit


def remove_cgroup(parent: Path) -> None:
    """Kill what is left inside (by the pids the cgroup lists), then the directories."""
    for child in sorted(parent.glob("executor-*")):
        for pid in (child / "cgroup.procs").read_text().split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
    for child in sorted(parent.glob("executor-*")):
        for _ in range(50):
            try:
                child.rmdir()
                break
            except OSError:
                time.sleep(0.1)
    parent.rmdir()


@pytest.fixture(scope="module")
def oom_run(stack, tmp_path_factory):
    if os.geteuid() != 0 or not os.access(MEMORY, os.W_OK):
        pytest.fail("needs root and cgroup v1's memory controller at /sys/fs/cgroup/memory "
                    "(the test machines have both)")
    java = shutil.which("java")
    assert java, "java is needed for Spark"
    home = tmp_path_factory.mktemp("java_home")
    (home / "bin").mkdir()
    wrapper = home / "bin" / "java"
    wrapper.write_text(WRAPPER % {"java": os.path.realpath(java)})
    wrapper.chmod(0o755)
    parent = MEMORY / f"sparkscope-test-{uuid.uuid4().hex[:8]}"
    parent.mkdir()
    try:
        jar = ensure_annotator_jar(ROOT, progress=lambda _: None)
        conf = {**annotator_properties(stack.settings, jar), "spark.sparkscope.container.periodSeconds": "1"}
        env = {"JAVA_HOME": str(home), "SPARKSCOPE_TEST_CGROUP": str(parent),
               "SPARKSCOPE_TEST_CGROUP_LIMITS": ",".join(f"{k}:{v}" for k, v in LIMITS_MIB.items())}
        run = run_spark_job(stack, "container_oom_job.py", tmp_path_factory.mktemp("spark"), conf=conf, env=env,
                            args=[str(PYTHON_MIB), str(CACHE_MIB)], timeout_s=240)
        kills = {d.name.split("-", 1)[1]: int(re.search(r"oom_kill (\d+)", (d / "memory.oom_control").read_text())
                                              .group(1)) for d in parent.glob("executor-*")}
    finally:
        remove_cgroup(parent)
    app = influx.string_literal(run.app_id)
    stack.wait_for(f"SELECT \"duration_ms\" FROM \"sparkscope_application\" WHERE \"applicationid\" = {app} "
                   "AND \"status\" = 'FINISHED'", bool)
    return run, kills


def marks(run) -> dict[str, dict]:
    return {m.group(1): json.loads(m.group(2)) for m in re.finditer(r"^MARK (\w+) (.*)$", run.stdout, re.M)}


def container_rows(stack, app_id: str) -> dict[str, dict]:
    series = stack.influx('SELECT max("working_set_bytes") AS ws, max("usage_bytes") AS usage, '
                          'min("limit_bytes") AS lim_lo, max("limit_bytes") AS lim_hi, max("oom_kills") AS kills, '
                          'min("oom_kills") AS kills_lo, count("usage_bytes") AS n, last("cgroup_version") AS v '
                          f'FROM "sparkscope_container" WHERE "applicationid" = {influx.string_literal(app_id)} '
                          'GROUP BY "executorid"')
    return {s["tags"]["executorid"]: dict(zip(s["columns"], s["values"][0])) for s in series}


def test_each_executor_stores_its_containers_limit_and_working_set_within_it(stack, oom_run):
    run, _ = oom_run
    rows = container_rows(stack, run.app_id)
    for executor, mib in LIMITS_MIB.items():
        row = rows[executor]
        assert row["lim_lo"] == row["lim_hi"] == mib << 20, row
        assert row["v"] == 1, row
        assert 0 < row["ws"] <= row["usage"] <= mib << 20, row
        assert row["n"] >= 5, row  # sampled every second while it lived
    # The executors Spark started in their place, and the driver, sit in this
    # test's own cgroup: its limit, or none (then no limit field at all).
    replacements = set(rows) - set(LIMITS_MIB) - {"driver"}
    assert replacements, f"no replacement executor stored: {sorted(rows)}"
    for executor in replacements | {"driver"}:
        assert rows[executor]["lim_lo"] == own_memory_limit(), (executor, rows[executor])


def test_oom_kills_inside_a_container_are_counted_as_the_kernel_counts_them(stack, oom_run):
    run, kills = oom_run
    assert marks(run)["python"]["failed"], run.stdout  # the kernel killed the Python workers: tasks failed
    rows = container_rows(stack, run.app_id)
    killed_python = [e for e in LIMITS_MIB if (rows[e]["kills"] or 0) - (rows[e]["kills_lo"] or 0) >= 1]
    assert killed_python, rows
    for executor in killed_python:
        # Stored no more than the kernel's own count at the end (the JVM's own kill comes after its last sample).
        assert rows[executor]["kills"] <= kills[executor], (executor, rows[executor], kills)
    assert rows["driver"]["kills"] == rows["driver"]["kills_lo"], rows["driver"]


def test_the_executor_the_kernel_killed_is_removed_with_exit_137_and_the_job_goes_on(stack, oom_run):
    run, _ = oom_run
    assert marks(run)["heap"]["count"] > 0, run.stdout
    series = stack.influx('SELECT "executor_id", "cause", "exit_code", "reason" FROM "sparkscope_executor" WHERE '
                          f'"applicationid" = {influx.string_literal(run.app_id)} AND "event" = \'removed\'')
    removed = {row[1]: row for row in series[0]["values"]} if series else {}
    killed = {e for e, row in removed.items() if row[3] == 137}
    assert killed and killed <= set(LIMITS_MIB), removed
    for executor in killed:
        assert removed[executor][2] == "killed", removed[executor]
        # Spark's own words, as the standalone worker reported the exit to the driver.
        assert removed[executor][4] == "Command exited with code 137", removed[executor]


def test_series_stay_one_per_jvm(stack, oom_run):
    run, _ = oom_run
    series = stack.influx(f'SHOW SERIES FROM "sparkscope_container" WHERE "applicationid" = '
                          f'{influx.string_literal(run.app_id)}')
    keys = [v[0] for v in series[0]["values"]]
    executors = {re.search(r"executorid=([^,]+)", k).group(1) for k in keys}
    assert len(keys) == len(executors), keys
    # Telegraf adds the host it runs on; nothing that grows with time (no pid, no cgroup path).
    assert all(set(re.findall(r",(\w+)=", k)) <= {"applicationid", "executorid", "host"} for k in keys), keys


def test_the_report_says_what_filled_the_container_and_what_to_change(stack, oom_run):
    run, _ = oom_run
    facts = RunReader(stack.settings.influx_reader, stack.settings.database).read(run.app_id)
    advice = advise(facts)
    assert advice.verdict == "SHORT", advice.summary
    # The kill leads the verdict, whether or not the heap was short as well (GC share, spill).
    assert re.search(r"SHORT for \S+, in the container (rather than|and in) the heap: executor [01] was killed",
                     advice.summary), advice.summary
    text = "\n".join(advice.containers)
    killed = [line for line in advice.containers if re.match(r"executor [01] was killed \(exit 137\)", line)]
    assert killed, text
    for line in killed:
        executor = line.split()[1]
        assert f"its container's limit is {LIMITS_MIB[executor]} MiB" in line, line
        # Spark gave this executor 1 GiB of heap: no Spark setting fits that under the limit.
        assert "the limit is below what Spark was given for it (heap 1.00 GiB" in line, line
    # What to change for such a limit is in the line above (the limit, or spark.executor.memory); a
    # kill by what sits beyond the heap (Python, native memory) raises memoryOverhead instead:
    # tests/test_report.py, with the numbers set, since which one fills a container first varies by run.


def test_the_live_dashboards_container_row_draws_each_limit_and_working_set(stack, oom_run):
    """The row's queries as Grafana 12 sends them (src/sparkscope_testkit/grafana12.py), on this run."""
    run, _ = oom_run
    board = json.loads((ROOT / "dashboards" / "spark-executors.json").read_text())
    dash = stack.open_dashboard(board, run.started_ms - 60_000, run.ended_ms + 60_000,
                                url_vars={"applicationid": run.app_id})
    panels = [p for top in board["panels"] for p in [top, *top.get("panels", [])] if p["type"] != "row"]
    panel = next(p for p in panels if p["title"] == "Container memory against its limit")
    results = dash.run_panel(panel)
    by_alias = {t.get("alias"): results.get(t["refId"], []) for t in panel["targets"]}
    limits = {s["tags"]["executorid"]: {v[1] for v in s["values"] if v[1] is not None}
              for s in by_alias["$tag_executorid limit"]}
    for executor, mib in LIMITS_MIB.items():
        assert limits.get(executor) == {mib << 20}, limits
    working = {s["tags"]["executorid"]: max(v[1] for v in s["values"] if v[1] is not None)
               for s in by_alias["$tag_executorid working set"]}
    for executor, mib in LIMITS_MIB.items():
        assert 0 < working[executor] <= mib << 20, working
    kills = next(p for p in panels if p["title"] == "OOM kills and limit hits in the container")
    got = dash.run_panel(kills)
    killed = {s["tags"]["executorid"] for t in kills["targets"] if t["alias"].endswith("OOM kills")
              for s in got.get(t["refId"], []) if any((v[1] or 0) > 0 for v in s["values"])}
    assert killed & set(LIMITS_MIB), got


def test_the_live_dashboard_stacks_what_filled_a_killed_container_under_its_limit(stack, oom_run):
    """One executor picked: its limit and working set as lines, and its JVM,
    Python and other RSS stacked under them, from this run's samples."""
    run, _ = oom_run
    board = json.loads((ROOT / "dashboards" / "spark-executors.json").read_text())
    panels = [p for top in board["panels"] for p in [top, *top.get("panels", [])] if p["type"] != "row"]
    panel = next(p for p in panels if p["title"] == "What fills the container: JVM, Python, other")
    aliases = [t["alias"] for t in panel["targets"]]
    assert aliases == ["limit", "working set", "JVM RSS", "Python RSS", "other RSS"]
    # Stacked: the three RSS series (the panel's default); the limit and working set are drawn over them.
    assert panel["fieldConfig"]["defaults"]["custom"]["stacking"]["mode"] == "normal"
    unstacked = {o["matcher"]["options"] for o in panel["fieldConfig"]["overrides"]
                 for p in o["properties"] if p["id"] == "custom.stacking" and p["value"]["mode"] == "none"}
    assert unstacked == {"limit", "working set"}
    for executor, mib in LIMITS_MIB.items():
        dash = stack.open_dashboard(board, run.started_ms - 60_000, run.ended_ms + 60_000,
                                    url_vars={"applicationid": run.app_id, "executorid": [executor]})
        results = dash.run_panel(panel)
        drawn = {t["alias"]: [v[1] for s in results.get(t["refId"], []) for v in s["values"] if v[1] is not None]
                 for t in panel["targets"]}
        assert set(drawn["limit"]) == {mib << 20}, (executor, drawn["limit"])
        assert 0 < max(drawn["working set"]) <= mib << 20, executor
        assert max(drawn["JVM RSS"]) > 100 << 20, executor  # a JVM with a heap in use
        assert drawn["Python RSS"] and drawn["other RSS"], executor  # every layer drawn, zeros included
        assert max(drawn["Python RSS"]) > 0, executor  # the job's Python workers ran in each container
