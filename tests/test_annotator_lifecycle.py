"""The annotator on applications that run long or end abruptly: a streaming
query's annotations add no series however many batches it runs, and work in
flight when the application stops gets a CANCELLED final point."""

from __future__ import annotations

import json
import re
import subprocess
import time

from sparkscope.spark.conf import sparkscope_properties
from sparkscope.spark.submit import spark_env, submit_argv
from sparkscope.settings import ROOT

from sparkscope_testkit.annotator_helpers import JOBS_DIR, annotator_conf, app_finished, marks, rows, series_count
from conftest import SINK_PERIOD_S, run_spark_job

DASHBOARD = ROOT / "dashboards" / "spark-executors.json"


class StreamingRun:
    """streaming_job.py under spark-submit, read line by line while it runs."""

    def __init__(self, stack, tmp_path):
        self.stop_file = tmp_path / "stop"
        props = sparkscope_properties(stack.settings, period_s=SINK_PERIOD_S)
        props.update(annotator_conf(stack))
        argv = submit_argv(JOBS_DIR / "streaming_job.py", "local-cluster[2,1,1024]", props,
                           [str(self.stop_file)])
        self.log = tmp_path / "streaming_job.log"
        self.proc = subprocess.Popen(argv, env=spark_env(self.log), stdout=subprocess.PIPE,
                                     stderr=open(self.log, "w"), text=True)
        self.app_id = None
        self.batch = -1
        self.tail: list[str] = []

    def until_batch(self, n: int, deadline_s: float = 240.0) -> None:
        end = time.monotonic() + deadline_s
        while self.batch < n:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError(f"streaming job ended before batch {n}; log {self.log}:\n"
                                     + self.log.read_text()[-3000:])
            self.tail.append(line)
            if line.startswith("APP_ID "):
                self.app_id = line.split()[1]
            elif line.startswith("BATCH "):
                self.batch = int(line.split()[1])
            if time.monotonic() > end:
                raise AssertionError(f"no batch {n} after {deadline_s:.0f} s (at {self.batch})")

    def stop(self) -> str:
        self.stop_file.touch()
        out, _ = self.proc.communicate(timeout=120)
        assert self.proc.returncode == 0, self.log.read_text()[-3000:]
        return "".join(self.tail) + out


def wait_for_jobs(stack, app_id: str, at_least: int) -> None:
    stack.wait_for(f'SELECT count("job_id") FROM "sparkscope_job" WHERE "applicationid" = \'{app_id}\' '
                   "AND \"status\" <> 'RUNNING'",
                   lambda s: bool(s) and s[0]["values"][0][1] >= at_least)


def test_streaming_query_adds_no_series_per_batch_and_every_job_is_annotated(stack, tmp_path):
    run = StreamingRun(stack, tmp_path)
    try:
        run.until_batch(5)
        wait_for_jobs(stack, run.app_id, 5)
        early = series_count(stack, run.app_id)
        run.until_batch(35)
        wait_for_jobs(stack, run.app_id, 35)
        late = series_count(stack, run.app_id)
    finally:
        stdout = run.stop()
    app_finished(stack, run.app_id)
    final = series_count(stack, run.app_id)
    assert late == early, f"series grew from {early} to {late} over 30 batches"
    # The stop may add CANCELLED series for the batch in flight: a constant, not per batch.
    assert final <= early + 4, (early, final)
    job_ids = json.loads(next(l for l in stdout.splitlines() if l.startswith("JOBS ")).split(" ", 1)[1])
    assert len(job_ids) >= 35
    # The query's own progress: a point per batch, all in one series (tags: application, query name).
    progress = stack.influx(f'SELECT count("batch_id") FROM "sparkscope_streaming" WHERE "applicationid" = '
                            f"'{run.app_id}' GROUP BY *")
    assert len(progress) == 1 and progress[0]["tags"]["query_name"] == "counts", progress
    assert progress[0]["values"][0][1] >= 35, progress
    # The dashboards' own "Jobs" annotation query, straight to InfluxDB: one region per job.
    dashboard = json.loads(DASHBOARD.read_text())
    annotation = next(a for a in dashboard["annotations"]["list"] if a["name"] == "Jobs")
    now = int(time.time() * 1000)
    dash = stack.open_dashboard(dashboard, now - 3_600_000, now, url_vars={"applicationid": run.app_id})
    points = stack.influx(dash.interpolate(annotation["target"]["query"], where="annotation"))[0]
    status = points["columns"].index("status")
    # Finished jobs are regions; a RUNNING point is the line of a job still running.
    regions = [r for r in points["values"] if r[status] != "RUNNING"]
    annotated = [int(re.match(r"job (\d+)", r[1]).group(1)) for r in regions]
    assert len(annotated) == len(set(annotated)), "one region per job"
    assert set(job_ids) <= set(annotated), sorted(set(job_ids) - set(annotated))


def test_work_in_flight_when_the_application_stops_gets_cancelled_points(stack, tmp_path):
    run = run_spark_job(stack, "killed_job.py", tmp_path, conf=annotator_conf(stack))
    mark = marks(run.stdout)["mark"]
    app = app_finished(stack, run.app_id)
    app_end = next(r for r in rows(stack, "sparkscope_application", run.app_id) if r["status"] == "FINISHED")
    stage = [r for r in rows(stack, "sparkscope_stage", run.app_id) if r["stage_id"] == mark["stage"]
             and r["status"] != "RUNNING"]
    assert len(stage) == 1 and stage[0]["status"] == "CANCELLED", stage
    assert stage[0]["task_count_seen"] == 7, stage[0]  # statistics so far: 7 of 8 tasks had finished
    assert stage[0]["end_time_ms"] == app_end["end_time_ms"]
    assert stage[0]["job_description"] == "killed mid-stage"
    jobs = [r for r in rows(stack, "sparkscope_job", run.app_id) if r["status"] != "RUNNING"]
    assert [j["status"] for j in jobs] == ["CANCELLED"], jobs
    assert jobs[0]["description"] == "killed mid-stage"
    queries = [r for r in rows(stack, "sparkscope_query", run.app_id) if r["status"] != "RUNNING"]
    assert [q["status"] for q in queries] == ["CANCELLED"], queries
    assert app and mark["completed"] >= 7
