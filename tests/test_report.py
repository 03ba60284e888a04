"""./sparkscope report: the advice follows from the peaks by its rules, the
page opens offline in a real browser, and the advice holds: the same workload
rerun with the recommended memory succeeds as well, and with clearly less it
is reported short."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkscope.provision.annotator_jar import ensure_annotator_jar
from sparkscope.report.advice import MIB, SHORT_GC_SHARE, advise, parse_size, spark_size
from sparkscope.report.command import make_report
from sparkscope.report.run_facts import ContainerFacts, ExecutorFacts, RunFacts, RunReader
from sparkscope.spark.conf import annotator_properties
from sparkscope.settings import ROOT

from conftest import USERS_JIT, run_spark_job
from sparkscope_testkit.browser_checks import open_offline
from sparkscope_testkit.sandbox import throwaway_stack

GIB = 1024 * MIB


def facts(heap=GIB, unified=100 * MIB, live=150 * MIB, rss=1200 * MIB, python=0, spilled=0, gc_ms=100,
          master="local-cluster[2,1,1024]", settings=None) -> RunFacts:
    executors = {}
    for executor_id in ("0", "1"):
        e = ExecutorFacts(executor_id, heap_max=heap, live_set=live, cores=1)
        e.peaks = {"JVMHeapMemory": heap * 0.8, "OnHeapUnifiedMemory": unified, "OnHeapExecutionMemory": unified / 2,
                   "OnHeapStorageMemory": unified / 2, "ProcessTreeJVMRSSMemory": rss,
                   "ProcessTreePythonRSSMemory": python, "ProcessTreeOtherRSSMemory": 0,
                   "JVMOffHeapMemory": 80 * MIB, "DirectPoolMemory": 20 * MIB}
        e.totals = {"run_ms": 10_000, "gc_ms": gc_ms, "spilled_disk": spilled}
        executors[executor_id] = e
    conf = {"spark.master": master, "spark.executor.memory": f"{heap // MIB}m", **(settings or {})}
    return RunFacts("app-1", "etl", 0, 60_000, conf, executors, [], [], [], [])


def test_memory_strings_read_and_written_as_spark_does():
    assert parse_size("2g") == 2 * GIB and parse_size("512") == 512 * MIB and parse_size("1536m") == 1536 * MIB
    assert spark_size(1000 * MIB) == "1g" and spark_size(1025 * MIB) == "1152m" and spark_size(1) == "128m"


def test_a_roomy_run_is_told_how_much_heap_to_give_back():
    advice = advise(facts(heap=4 * GIB, unified=200 * MIB, live=300 * MIB))
    assert advice.verdict == "GENEROUS", advice.summary
    heap = next(r for r in advice.recommendations if r.key == "spark.executor.memory")
    # 200 MiB x 1.2 / 0.6 + 300 MiB = 700 MiB; live set 300 x 1.5 = 450 MiB
    assert parse_size(heap.value) == 768 * MIB, heap
    assert "--conf spark.executor.memory=768m" in advice.conf_lines()


def test_one_task_s_own_execution_peak_times_the_task_slots_sizes_the_pool_when_the_polls_saw_less():
    # The polls saw 100 MiB of execution memory; one task held 250 MiB between two polls,
    # and each executor runs 2 tasks at once, each capped at half the pool.
    run = facts(heap=4 * GIB, unified=100 * MIB, live=100 * MIB)
    for e in run.executors.values():
        e.peaks["TaskPeakExecutionMemory"] = 250 * MIB
        e.cores = 2
    advice = advise(run)
    heap = next(r for r in advice.recommendations if r.key == "spark.executor.memory")
    # (2 x 250 MiB + 50 MiB storage) x 1.2 / 0.6 + 300 MiB = 1400 MiB, rounded up to 1408m
    assert parse_size(heap.value) == 1408 * MIB, heap
    assert "one task's own peak x 2 task slots" in heap.reason, heap.reason
    # An executor with more slots whose tasks held little does not set the figure the reason names.
    run.executors["0"].cores, run.executors["0"].peaks["TaskPeakExecutionMemory"] = 8, 10 * MIB
    reason = next(r for r in advise(run).recommendations if r.key == "spark.executor.memory").reason
    assert "one task's own peak x 2 task slots" in reason, reason
    run.executors["0"].cores, run.executors["0"].peaks["TaskPeakExecutionMemory"] = 2, 250 * MIB
    run.settings["spark.task.cpus"] = "2"  # one task at a time: 250 + 50 x 1.2 / 0.6 + 300 = 900 MiB
    assert next(r for r in advise(run).recommendations if r.key == "spark.executor.memory").value == "1g"


def test_spill_or_gc_makes_the_run_short_and_never_advises_less():
    for run in (facts(spilled=50 * MIB), facts(gc_ms=int(10_000 * SHORT_GC_SHARE) + 1)):
        advice = advise(run)
        assert advice.verdict == "SHORT", advice.summary
        heap = next(r for r in advice.recommendations if r.key == "spark.executor.memory")
        assert parse_size(heap.value) >= 1.5 * GIB, heap


def test_a_run_without_spill_that_needs_more_than_it_had_is_not_called_simply_right():
    # Live set 800 MiB x 1.5 = 1.17 GiB against a 1 GiB heap: it ran, with little headroom.
    advice = advise(facts(heap=GIB, unified=300 * MIB, live=800 * MIB))
    heap = next(r for r in advice.recommendations if r.key == "spark.executor.memory")
    assert parse_size(heap.value) > GIB, heap
    assert advice.verdict == "RIGHT" and "little headroom" in advice.summary, advice.summary


def test_user_objects_outgrowing_the_user_region_lower_the_fraction_but_not_on_a_short_run():
    crowded = {r.key: r.value for r in advise(facts(heap=2 * GIB, unified=300 * MIB, live=1200 * MIB)).recommendations}
    assert float(crowded["spark.memory.fraction"]) < 0.6, crowded
    short = {r.key: r.value for r in advise(facts(heap=2 * GIB, unified=300 * MIB, live=1200 * MIB,
                                                  spilled=MIB)).recommendations}
    assert short["spark.memory.fraction"] == "0.6", short


def test_an_executor_lost_to_memory_is_named_in_the_verdict():
    run = facts()
    run.removals = [{"reason": "Container killed by YARN for exceeding memory limits", "event": "removed"}]
    advice = advise(run)
    assert advice.verdict == "SHORT" and "exceeding memory limits" in advice.summary


@pytest.mark.parametrize("gc_ms, heap_too, reason", [
    (100, False, "Command exited with code 137"),
    (100, False, "Container killed by YARN for exceeding memory limits. 1.5 GB of 1.5 GB physical memory used"),
    (6_000, True, "Command exited with code 137")])
def test_a_container_kill_leads_the_verdict_whether_or_not_the_heap_was_short(gc_ms, heap_too, reason):
    run = facts(gc_ms=gc_ms)
    run.executors["1"].container = ContainerFacts(limit=1200 * MIB, working_set=1190 * MIB, usage=1190 * MIB,
                                                  anon=1100 * MIB, oom_kills=0, cgroup_version=1)
    run.removals = [{"executor_id": "1", "cause": "killed", "exit_code": 137, "event": "removed",
                     "reason": reason}]
    advice = advise(run)
    assert advice.verdict == "SHORT"
    lead = "in the container and in the heap" if heap_too else "in the container rather than the heap"
    assert f"SHORT for etl, {lead}: executor 1 was killed (exit 137)" in advice.summary, advice.summary
    assert ("GC took" in advice.summary) == heap_too, advice.summary
    heap = next(r for r in advice.recommendations if r.key == "spark.executor.memory")
    assert (parse_size(heap.value) >= 1.5 * GIB) == heap_too, heap  # 1.5 x the 1 GiB heap when it was short


def test_a_container_filled_beyond_the_heap_raises_the_overhead_and_caps_python():
    run = facts(heap=GIB, rss=900 * MIB, python=700 * MIB)
    run.executors["1"].container = ContainerFacts(limit=2 * GIB, working_set=2 * GIB - MIB, usage=2 * GIB,
                                                  anon=2 * GIB, oom_kills=0, cgroup_version=2)
    run.removals = [{"executor_id": "1", "cause": "container_oom", "exit_code": 137, "event": "removed",
                     "reason": "OOMKilled"}]
    recs = {r.key: r for r in advise(run).recommendations}
    overhead = recs["spark.executor.memoryOverhead"]
    assert "a container was killed" in overhead.reason, overhead
    # what it held beyond the 1 GiB heap (its working set, about 1 GiB more) x 1.5
    assert parse_size(overhead.value) >= 1.5 * (GIB - MIB), overhead
    assert "Python workers filled the container" in recs["spark.executor.pyspark.memory"].reason


def test_overhead_covers_rss_beyond_the_heap_with_spark_floor():
    overhead = {r.key: r.value for r in advise(facts(heap=GIB, rss=2 * GIB)).recommendations}
    assert parse_size(overhead["spark.executor.memoryOverhead"]) == 1280 * MIB  # 1 GiB x 1.25
    small = {r.key: r.value for r in advise(facts(heap=GIB, rss=900 * MIB)).recommendations}
    assert small["spark.executor.memoryOverhead"] == "384m"


def test_python_workers_get_pyspark_memory_advice_only_when_they_ran():
    with_python = {r.key: r.value for r in advise(facts(python=400 * MIB)).recommendations}
    assert parse_size(with_python["spark.executor.pyspark.memory"]) == 512 * MIB
    assert "spark.executor.pyspark.memory" not in {r.key for r in advise(facts()).recommendations}


def test_local_mode_advises_the_driver_which_is_the_executor():
    run = facts(master="local[2]", settings={"spark.driver.memory": "2g"})
    run.executors = {"driver": run.executors["0"]}
    run.executors["driver"].executor_id = "driver"
    keys = {r.key for r in advise(run).recommendations}
    assert "spark.driver.memory" in keys and "spark.executor.memory" not in keys


def test_query_labels_over_the_memory_plot_never_print_over_one_another():
    from sparkscope.report import page

    # A 60 s run: twelve 1 s queries back to back, then one long query.
    run = facts()
    run.queries = [{"execution_id": n, "time": 10_000 + n * 1_000, "end_time_ms": 10_900 + n * 1_000}
                   for n in range(12)] + [{"execution_id": 12, "time": 30_000, "end_time_ms": 55_000}]
    labels = page.memory_over_time(run, None).layout.annotations
    ms_per_px = 60_000 / page.PLOT_PX
    placed = sorted((a.y, a.x.timestamp() * 1000, len(a.text) * page.LABEL_CHAR_PX * ms_per_px) for a in labels)
    for (y1, x1, width), (y2, x2, _) in zip(placed, placed[1:]):
        assert y1 != y2 or x1 + width <= x2, f"labels at {x1} and {x2} overlap in row {y1}"
    assert len({a.y for a in labels}) > 1  # short queries back to back share the top edge in rows
    texts = {a.text for a in labels}
    assert "query 0" in texts and "query 12" in texts  # the first, and one with room, always labelled
    assert all(0.8 <= a.y <= 1 for a in labels)


def test_a_run_without_peaks_says_the_annotator_is_missing():
    run = facts()
    for e in run.executors.values():
        e.peaks = {}
    advice = advise(run)
    assert advice.verdict == "UNKNOWN" and "annotator" in advice.summary and not advice.recommendations


@pytest.fixture(scope="module")
def influx_only(tmp_path_factory):
    """InfluxDB alone for generated runs: a stopped driver's RUNNING point in the
    shared stack would be taken for the newest run by other tests (top's default)."""
    from conftest import Stack
    with throwaway_stack(tmp_path_factory.mktemp("report-generated"), only=("influxdb",)) as settings:
        yield Stack(settings)


def test_a_run_whose_driver_stopped_reporting_without_an_end_is_told_as_such(influx_only, tmp_path):
    """A driver killed without its shutdown hooks (SIGKILL, the OOM killer)
    leaves the annotator's RUNNING point and samples that stop: past the
    grace period the report says "no end seen" when the driver went quiet,
    not that the annotator was missing; a driver still reporting is running."""
    import time
    from sparkscope.store import influx
    now = int(time.time())
    for app, quiet_s in (("app-killed-no-end", 600), ("app-still-running", 5)):
        started = now - quiet_s - 300
        lines = [f'sparkscope_application,applicationid={app} status="RUNNING",app_name="etl",'
                 f'text="started" {started}']
        lines += [f"JVMHeapMemory,applicationid={app},executorid=driver,namespace=executor value={1e8 + t} "
                  f"{started + t}" for t in range(0, 300, 5)]
        influx.write(influx_only.settings.influx_writer, influx_only.settings.database, "\n".join(lines))
    reader = RunReader(influx_only.settings.influx_reader, influx_only.settings.database)
    killed = reader.read("app-killed-no-end")
    assert killed.ending == "NO_END_SEEN" and killed.ended_ms == (now - 600 - 5) * 1000
    path, advice, _, _ = make_report(reader, "app-killed-no-end", tmp_path)
    assert "no end seen" in advice.summary and "was the annotator attached" not in advice.summary
    assert "no end seen" in path.read_text()
    assert reader.read("app-still-running").ending == "RUNNING"


def test_a_week_long_run_is_read_from_the_rollup_with_its_peaks_and_a_bounded_plot(influx_only):
    """Six days of three JVMs (the test stack keeps 7): the 10-minute rollup (as its continuous query
    writes it) holds a heap spike four days back, raw samples only the last
    hour. The report finds the spike and the counters' final totals, and its
    plots keep one point per bucket, not one per sample."""
    import time
    from sparkscope.report.run_facts import PLOT_POINTS
    from sparkscope.store import influx
    from sparkscope.stack import rollups
    app, now = "app-week-long-0001", int(time.time()) // 600 * 600
    start, end = now - 6 * 86_400, now - 120
    spike_at = now - 4 * 86_400
    lines, raw = [], []
    for e in ("driver", "0", "1"):
        heap = f"JVMHeapMemory,applicationid={app},executorid={e},namespace=executor"
        runs = f"runTime.count,applicationid={app},executorid={e},namespace=executor"
        for at in range(start, end - 3600, 600):
            value = 9e8 if at == spike_at and e == "1" else 2e8
            lines.append(f"{heap} value={value},mean=1.5e8 {at}")
            lines.append(f"{runs} value={at - start},mean={at - start} {at}")
        for t in range(end - 3600, end, 10):
            raw.append(f"{heap} value=2.5e8 {t}")
            raw.append(f"{runs} value={t - start} {t}")
    writer, db = influx_only.settings.influx_writer, influx_only.settings.database
    for chunk in range(0, len(lines), 5000):
        influx.write(writer, db, "\n".join(lines[chunk:chunk + 5000]), policy=rollups.LEVELS[2].policy)
    for chunk in range(0, len(raw), 5000):
        influx.write(writer, db, "\n".join(raw[chunk:chunk + 5000]))
    influx.write(writer, db, f'sparkscope_application,applicationid={app} status="FINISHED",app_name="weekly",'
                             f'end_time_ms={end * 1000}i,duration_ms={(end - start) * 1000}i {start}')
    run = RunReader(influx_only.settings.influx_reader, db).read(app)
    assert run.ending == "FINISHED" and run.duration_ms == (end - start) * 1000
    heap = dict(run.executors["1"].series["heap"])
    assert max(heap.values()) == 9e8 and len(heap) <= PLOT_POINTS + 10
    assert run.executors["0"].totals["run_ms"] == end - 10 - start


# ---- on a real run ----

CACHE_MIB = "400"
WORKER_MIB = 2048  # executors get at most the worker's memory; 450 MiB is Spark's least


def memory_run(stack, tmp_path: Path, executor_memory: str, extra: dict[str, str] | None = None):
    jar = ensure_annotator_jar(ROOT, progress=lambda _: None)
    conf = {**annotator_properties(stack.settings, jar), "spark.executor.memory": executor_memory,
            **(extra or {})}
    run = run_spark_job(stack, "memory_job.py", tmp_path, master=f"local-cluster[2,1,{WORKER_MIB}]",
                        conf=conf, args=[CACHE_MIB], env=USERS_JIT)
    stack.wait_for(f'SELECT count("JVMHeapMemory") FROM "sparkscope_executor_peaks" '
                   f"WHERE \"applicationid\" = '{run.app_id}'", lambda s: bool(s) and s[0]["values"][0][1] >= 3)
    stack.wait_for(f'SELECT count("value") FROM "runTime.count" WHERE "applicationid" = \'{run.app_id}\'',
                   lambda s: bool(s))
    return run


@pytest.fixture(scope="module")
def generous(stack, tmp_path_factory):
    run = memory_run(stack, tmp_path_factory.mktemp("generous"), f"{WORKER_MIB}m")
    reader = RunReader(stack.settings.influx_reader, stack.settings.database)
    path, advice, facts_, runs = make_report(reader, run.app_id, tmp_path_factory.mktemp("report"))
    return run, path, advice


def test_the_report_page_opens_offline_with_its_plots(generous, tmp_path):
    from sparkscope_dev.browser import chromium, find_chromium
    if find_chromium() is None:
        pytest.fail("no Chromium: ./sparkscope install installs Debian's chromium")
    _, path, advice = generous
    with chromium() as context:
        page = context.new_page()
        errors, remote = open_offline(page, path)
        page.wait_for_selector(".plotly-graph-div .main-svg", timeout=30_000)
        drawn = page.locator(".plotly-graph-div .main-svg").count()
        # Saved for a person to look at (pytest's basetemp); the suite never writes into the checkout.
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
    assert not errors, errors
    assert not remote, f"the page fetched from the network: {remote[:3]}"
    assert drawn >= 4, f"only {drawn} plots drawn"
    text = path.read_text()
    assert advice.summary.split(":")[0] in text and "--conf spark.executor.memory=" in text


def test_the_recommended_memory_runs_the_same_workload_as_well(stack, generous, tmp_path_factory):
    run, _, advice = generous
    assert advice.verdict != "SHORT", f"the generous run was short: {advice.summary}"
    rec = {r.key: r.value for r in advice.recommendations}
    heap = parse_size(rec["spark.executor.memory"])
    assert 512 * MIB <= heap <= WORKER_MIB * MIB, rec  # the workload must need a real amount
    reader = RunReader(stack.settings.influx_reader, stack.settings.database)
    again = memory_run(stack, tmp_path_factory.mktemp("recommended"), rec["spark.executor.memory"],
                       {"spark.memory.fraction": rec["spark.memory.fraction"]})
    _, advice_again, facts_again, runs = make_report(reader, again.app_id, tmp_path_factory.mktemp("report2"))
    assert advice_again.spilled <= advice.spilled + 16 * MIB, (advice.spilled, advice_again.spilled)
    assert (advice_again.gc_share or 0) <= (advice.gc_share or 0) + 0.05, (advice.gc_share, advice_again.gc_share)
    assert advice_again.verdict != "SHORT", advice_again.summary
    assert [r["app_id"] for r in runs][:2] == [again.app_id, run.app_id], "earlier run not compared"

    less = spark_size(max(heap / 2, 512 * MIB))
    assert parse_size(less) < heap
    short = memory_run(stack, tmp_path_factory.mktemp("less"), less)
    _, advice_short, _, _ = make_report(reader, short.app_id, tmp_path_factory.mktemp("report3"))
    assert advice_short.verdict == "SHORT", (less, advice_short.summary)
    for name, a in (("generous", advice), ("recommended", advice_again), (f"less ({less})", advice_short)):
        print(f"\n{name}: {a.summary} spilled {a.spilled / MIB:.0f} MiB; {' '.join(a.conf_lines())}")


def test_report_json_on_a_stored_run_is_one_object_naming_the_run(influx_only, tmp_path, monkeypatch, capsys):
    """./sparkscope report RUN --json against InfluxDB: valid JSON with the run's id and times."""
    import json
    import time
    from sparkscope import cli
    from sparkscope.report import command
    from sparkscope.store import influx
    app, now = "app-json-0001", int(time.time())
    start, end = now - 400, now - 100
    lines = [f'sparkscope_application,applicationid={app} status="RUNNING",app_name="etl-json",'
             f'text="started" {start}',
             f'sparkscope_application,applicationid={app} status="FINISHED",app_name="etl-json",'
             f'end_time_ms={end * 1000}i,duration_ms={(end - start) * 1000}i {start}']
    lines += [f"JVMHeapMemory,applicationid={app},executorid={e},namespace=executor value={1e8 + t} {start + t}"
              for e in ("driver", "0") for t in range(0, 300, 10)]
    influx.write(influx_only.settings.influx_writer, influx_only.settings.database, "\n".join(lines))
    monkeypatch.setattr(command, "load_settings", lambda: influx_only.settings)
    assert cli.main(["report", app, "--json", "--out", str(tmp_path)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["run"] == app and document["app_name"] == "etl-json" and document["ending"] == "FINISHED"
    assert (document["started_ms"], document["duration_ms"]) == (start * 1000, (end - start) * 1000)
    assert document["report"] == str(tmp_path / f"sparkscope-report-{app}.html")
