"""The annotator against what Spark's scheduler really does: executors lost
mid-stage, straggler stages of each cause and a big stage that is not one,
jobs from Scala/Java and spark-sql, and awkward text through Telegraf's own
line-protocol parser."""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.error
import urllib.request
import uuid

import pytest

from sparkscope.spark.conf import sparkscope_properties
from sparkscope.spark.submit import run_submit, spark_env, spark_home

from sparkscope_testkit.annotator_helpers import JOBS_DIR, annotator_conf, app_finished, marks, printed, rows
from conftest import SINK_PERIOD_S, run_spark_job


def final(rows_: list[dict]) -> list[dict]:
    return [r for r in rows_ if r["status"] != "RUNNING"]


def test_lost_executor_resubmits_map_tasks_without_counting_them_twice(stack, tmp_path):
    run = run_spark_job(stack, "executor_lost_job.py", tmp_path, conf=annotator_conf(stack))
    mark = marks(run.stdout)["mark"]
    assert mark.get("pid") and mark["counts"] == [[0, 200], [1, 200], [2, 200], [3, 200]], mark
    app_finished(stack, run.app_id)
    attempts = final(r for r in rows(stack, "sparkscope_stage", run.app_id) if r["stage_id"] == mark["stage"])
    first = next(r for r in attempts if r["attempt"] == 0)
    # Executor 1's finished map outputs were lost with it: Spark re-ran them and re-posted
    # their old (successful) task ends with reason Resubmitted.
    assert first["task_resubmitted_count"] >= 1, first
    assert first["task_count_seen"] == first["num_tasks"] + first["task_resubmitted_count"], first
    removed = [r for r in rows(stack, "sparkscope_executor", run.app_id) if r["event"] == "removed"]
    assert any(r["executor_id"] == "1" for r in removed), removed


@pytest.fixture(scope="module")
def straggler_run(stack, tmp_path_factory):
    run = run_spark_job(stack, "straggler_rules_job.py", tmp_path_factory.mktemp("stragglers"),
                        conf=annotator_conf(stack))
    app_finished(stack, run.app_id)
    return run, marks(run.stdout), final(rows(stack, "sparkscope_stage", run.app_id))


def stages_of(part: dict, stages: list[dict]) -> list[dict]:
    return [s for s in stages if s["stage_id"] in part["stages"]]


def test_stage_with_one_skewed_partition_is_flagged_with_that_partitions_own_details(straggler_run):
    _, parts, stages = straggler_run
    flagged = [s for s in stages_of(parts["skewed"], stages) if s["straggler"] == "true"]
    assert len(flagged) == 1, stages_of(parts["skewed"], stages)
    s = flagged[0]
    assert s["slowest_partition"] == 0
    assert s["slowest_shuffle_read_bytes"] >= 3 * s["task_mean_shuffle_read_bytes"] > 0, s  # data skew
    assert s["job_description"] == "nightly skewed join"
    assert "nightly skewed join" in s["text"] and "partition 0 on executor" in s["text"], s["text"]


def test_stage_slowed_on_one_executor_is_flagged_naming_that_executor(straggler_run):
    run, parts, stages = straggler_run
    flagged = [s for s in stages_of(parts["slow_host"], stages) if s["straggler"] == "true"]
    assert len(flagged) == 1, stages_of(parts["slow_host"], stages)
    assert "1" in printed(run.stdout, "EXECUTORS"), "executor 1 ran a task"
    assert flagged[0]["slowest_executor"] == "1" and flagged[0]["slowest_host"], flagged[0]
    assert "on executor 1 (host " in flagged[0]["text"], flagged[0]["text"]


def test_large_multi_wave_stage_with_an_early_slow_task_is_not_flagged(straggler_run):
    _, parts, stages = straggler_run
    (s,) = stages_of(parts["multi_wave"], stages)
    assert s["num_tasks"] == 120 and s["task_count_seen"] == 120
    assert s["task_max_ms"] >= 2400 and s["task_max_ms"] >= 3 * s["task_p50_ms"], s  # the old rule's straggler
    assert s["straggler"] == "false", s


def test_awkward_text_reads_back_through_telegraf_as_written(straggler_run, stack):
    run, parts, _ = straggler_run
    awkward = printed(run.stdout, "AWKWARD")
    jobs = [j for j in final(rows(stack, "sparkscope_job", run.app_id)) if j.get("job_group") == "awkward"]
    assert len(jobs) == 1, "the line reached InfluxDB through Telegraf's parser"
    # Stored exactly (the one line-protocol rule: a string field keeps every character).
    assert jobs[0]["description"] == awkward
    assert "\f" not in jobs[0]["text"] and "\n" not in jobs[0]["text"]


def test_telegraf_keeps_the_good_lines_of_a_batch_with_a_bad_one(stack):
    """What the annotator's writer relies on (InfluxWriter.rejectedLines): Telegraf's
    listener answers 400 "metric parse error ... (and N other parse errors)" and
    stores the lines it could parse, so only the refused ones are lost."""
    marker, now = uuid.uuid4().hex, time.time_ns()
    body = (f'sparkscope_executor_peaks,applicationid={marker} JVMHeapMemory=1i {now}\n'
            f'sparkscope_executor_peaks,applicationid={marker} JVMHeapMemory=bad {now}\n'
            f'sparkscope_executor_peaks,applicationid={marker} JVMHeapMemory=alsobad {now}\n'
            f'sparkscope_executor_peaks,applicationid={marker} JVMHeapMemory=2i {now + 1}\n').encode()
    request = urllib.request.Request(f"{stack.settings.events_url}/write?db=spark&precision=ns", data=body)
    with pytest.raises(urllib.error.HTTPError) as answer:
        urllib.request.urlopen(request, timeout=10)
    text = answer.value.read().decode()
    assert answer.value.code == 400 and "metric parse error" in text and "(and 1 other parse error)" in text, text
    stack.wait_for(f'SELECT count("JVMHeapMemory") FROM "sparkscope_executor_peaks" WHERE "applicationid" = \'{marker}\'',
                   lambda s: bool(s) and s[0]["values"][0][1] == 2)


@pytest.fixture(scope="module")
def names_jar(tmp_path_factory):
    if shutil.which("javac") is None or shutil.which("jar") is None:
        pytest.skip("a JDK (javac, jar) is needed to build the Java test job")
    out = tmp_path_factory.mktemp("java-job")
    classpath = str(spark_home() / "jars" / "*")
    subprocess.run(["javac", "-cp", classpath, "-d", str(out), str(JOBS_DIR / "java" / "NamesJob.java")],
                   check=True, capture_output=True)
    subprocess.run(["jar", "cf", str(out / "names-job.jar"), "-C", str(out), "."], check=True, capture_output=True)
    return out / "names-job.jar"


def test_java_job_without_description_gets_readable_job_and_stage_names(stack, names_jar, tmp_path):
    props = sparkscope_properties(stack.settings, period_s=SINK_PERIOD_S)
    props.update(annotator_conf(stack))
    argv = [str(spark_home() / "bin" / "spark-submit"), "--master", "local-cluster[2,1,1024]", "--class", "NamesJob"]
    for key, value in props.items():
        argv += ["--conf", f"{key}={value}"]
    result = run_submit(argv + [str(names_jar)], tmp_path / "names.log", 300)
    assert result.returncode == 0, (tmp_path / "names.log").read_text()[-3000:]
    app_id = result.stdout.split("APP_ID ", 1)[1].split()[0]
    app_finished(stack, app_id)
    jobs = final(rows(stack, "sparkscope_job", app_id))
    names = [j["description"] for j in jobs]
    assert all(n and "(no description)" not in j["text"] for n, j in zip(names, jobs)), names
    assert any(n.startswith("count at NamesJob.java") for n in names), names  # the last stage's name
    sql_jobs = [j for j in jobs if j.get("execution_id") is not None]
    queries = {q["execution_id"]: q["description"] for q in final(rows(stack, "sparkscope_query", app_id))}
    assert sql_jobs and all(j["description"] == queries[j["execution_id"]] for j in sql_jobs), (sql_jobs, queries)


def test_spark_sql_statement_names_its_jobs(stack, tmp_path):
    props = sparkscope_properties(stack.settings, period_s=SINK_PERIOD_S)
    props.update(annotator_conf(stack))
    name = f"sparkscope-sql-{uuid.uuid4().hex[:8]}"
    statement = "SELECT id % 5 AS k, count(*) FROM range(1000) GROUP BY id % 5"
    argv = [str(spark_home() / "bin" / "spark-sql"), "--master", "local[2]", "--name", name,
            "--conf", f"spark.sql.warehouse.dir={tmp_path / 'warehouse'}",
            "--conf", f"spark.driver.extraJavaOptions=-Dderby.system.home={tmp_path}"]
    for key, value in props.items():
        argv += ["--conf", f"{key}={value}"]
    log = tmp_path / "spark-sql.log"
    with open(log, "w") as err:
        result = subprocess.run(argv + ["-e", statement], env=spark_env(log), cwd=tmp_path, stdout=subprocess.PIPE,
                                stderr=err, text=True, timeout=300)
    assert result.returncode == 0, log.read_text()[-3000:]
    apps = stack.wait_for(f'SELECT "app_name", "duration_ms" FROM "sparkscope_application" WHERE "status" = '
                          f'\'FINISHED\' AND "app_name" = \'{name}\'', bool)
    app_id = stack.influx(f'SELECT "app_name" FROM "sparkscope_application" WHERE "app_name" = \'{name}\' '
                          'GROUP BY "applicationid"')[0]["tags"]["applicationid"]
    jobs = final(rows(stack, "sparkscope_job", app_id))
    assert apps and jobs and all(statement in j["description"] for j in jobs), jobs


@pytest.fixture(scope="module")
def two_host_cluster(tmp_path_factory):
    """A standalone master and two workers on two loopback addresses (127.0.0.1, 127.0.0.2):
    Spark never runs a speculative copy on the host of the original, and every executor of
    local-cluster mode is on one host."""
    import socket

    try:
        with socket.socket() as probe:
            probe.bind(("127.0.0.2", 0))
    except OSError:
        pytest.skip("127.0.0.2 is not usable here: the two-host cluster needs it")
    home = spark_home()
    work = tmp_path_factory.mktemp("standalone")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    master_url = f"spark://127.0.0.1:{port}"
    procs = []

    def start(args, ip, name):
        env = spark_env(work / f"{name}.log")
        env["SPARK_LOCAL_IP"] = ip
        env["SPARK_WORKER_DIR"] = str(work / f"{name}-work")
        log = open(work / f"{name}.log", "w")
        procs.append(subprocess.Popen([str(home / "bin" / "spark-class"), *args], env=env, stdout=log,
                                      stderr=subprocess.STDOUT))
        return work / f"{name}.log"

    master_log = start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                        "--webui-port", "0"], "127.0.0.1", "master")
    # Two cores each: a free slot on the other host for the speculative copy while the slow
    # partitions still run.
    logs = [start(["org.apache.spark.deploy.worker.Worker", "--host", ip, "--cores", "2", "--memory", "1g",
                   "--webui-port", "0", master_url], ip, f"worker-{i}")
            for i, ip in enumerate(("127.0.0.1", "127.0.0.2"))]
    try:
        deadline = time.monotonic() + 90
        while sum("Successfully registered with master" in p.read_text() for p in logs) < 2:
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                pytest.fail("standalone cluster did not come up:\n" + master_log.read_text()[-2000:]
                            + "".join(p.read_text()[-1000:] for p in logs))
            time.sleep(0.5)
        yield master_url
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


def test_killed_speculative_copies_are_not_counted_as_failures(stack, two_host_cluster, tmp_path):
    conf = dict(annotator_conf(stack), **{"spark.speculation": "true", "spark.speculation.interval": "200ms",
                                         "spark.speculation.quantile": "0.5",
                                         "spark.executor.memory": "512m"})
    run = run_spark_job(stack, "speculation_job.py", tmp_path, master=two_host_cluster, conf=conf)
    mark = marks(run.stdout)["mark"]
    assert [7, 1] in mark["attempts"] or [7, 2] in mark["attempts"], mark  # a later attempt of 7 won
    app_finished(stack, run.app_id)
    (stage,) = [s for s in final(rows(stack, "sparkscope_stage", run.app_id)) if s["stage_id"] in mark["stages"]]
    assert stage["task_killed_count"] >= 1, stage
    assert stage["task_failed_count"] == 0, stage
    assert stage["task_count_seen"] == 8, stage
