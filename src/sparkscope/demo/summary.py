"""After the run: what arrived in InfluxDB (peak memory per executor, straggler
stages and the queries they ran for), and the summary that says where to look."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Callable, Optional

from sparkscope.command_line import REPORTS_DIR
from sparkscope.stack.grafana_local import is_installed
from sparkscope.dashboards import LIVE_UID, SUMMARY_UID
from sparkscope.demo.options import DemoOptions, DemoResult, QueryResult, executor_key, expected_executors
from sparkscope.settings import Settings
from sparkscope.store import influx
from sparkscope.stack import metrics_reads
from sparkscope.store.schema import (
    APPLICATION_MEASUREMENT, JOB_MEASUREMENT, JVM_HEAP_MEMORY, PROCESS_TREE_JVM_RSS_MEMORY, QUERY_MEASUREMENT,
    STAGE_MEASUREMENT,
)

Out = Callable[[str], None]

METRICS_WAIT_S = 20.0  # the sink's last report at stop, plus Telegraf's flush


def shell_double_quoted(text: str) -> str:
    """text in double quotes for a POSIX shell: the four characters special
    there (backslash, quote, dollar, backquote) escaped, so a pasted line
    runs nothing a run id holds, and reads plainly when it holds none."""
    return '"' + "".join("\\" + c if c in '\\"$`' else c for c in text) + '"'



def executor_peaks(settings: Settings, app_id: str) -> dict[str, dict[str, float]]:
    """Each executor's highest sampled heap and RSS of the run, by metric name."""
    reads = metrics_reads(settings)
    peaks: dict[str, dict[str, float]] = {}
    for measurement in (JVM_HEAP_MEMORY, PROCESS_TREE_JVM_RSS_MEMORY):
        for executor_id, value in reads.executor_maxima(measurement, app_id).items():
            peaks.setdefault(executor_id, {})[measurement] = value
    return peaks


def annotations(settings: Settings, app_id: str, measurement: str) -> list[dict[str, Any]]:
    """The end points of the run's application, queries, jobs or stages."""
    return metrics_reads(settings).ended(measurement, app_id)


def collect_from_influx(settings: Settings, result: DemoResult, master: str, wait: bool = True) -> None:
    """Peak memory per executor and straggler stages of the run, once they arrived.

    The last metric reports leave each JVM as it stops, then wait for
    Telegraf's flush; the annotator writes the application's end last.
    """
    expected = expected_executors(master)
    deadline = time.monotonic() + (METRICS_WAIT_S if wait else 0)
    seen: set[str] = set()
    stable_since = time.monotonic()
    while True:
        result.peaks = executor_peaks(settings, result.app_id)
        finished = annotations(settings, result.app_id, APPLICATION_MEASUREMENT)
        have_all = set(result.peaks) >= expected if expected is not None else (
            set(result.peaks) == seen and time.monotonic() - stable_since > 6)
        if set(result.peaks) != seen:
            seen, stable_since = set(result.peaks), time.monotonic()
        if (have_all and finished) or time.monotonic() >= deadline:
            break
        time.sleep(1)
    stages = [s for s in annotations(settings, result.app_id, STAGE_MEASUREMENT) if s.get("straggler") == "true"]
    if stages:
        jobs = annotations(settings, result.app_id, JOB_MEASUREMENT)
        queries = annotations(settings, result.app_id, QUERY_MEASUREMENT)
        result.stragglers = attribute_stages(stages, jobs, queries, result.results)


def _query_name(description: Optional[str]) -> Optional[str]:
    if description and description.startswith("TPC-DS "):
        return description[len("TPC-DS "):].split()[0]
    return None


def attribute_stages(stages: list[dict[str, Any]], jobs: list[dict[str, Any]],
                     queries: list[dict[str, Any]], results: list[QueryResult] = ()) -> list[dict[str, Any]]:
    """Each stage with the TPC-DS query it ran for, worst excess first.

    Stage points carry no job id, so a stage belongs to the job whose
    region (time .. end_time_ms) holds the stage's submission time; the job
    names its query by description (TPC-DS qN), or by execution_id through
    the query's own point. The demo runs one query at a time, so its own
    per-query windows settle what the annotations cannot.
    """
    by_execution = {str(q.get("execution_id")): q.get("description") for q in queries}
    out = []
    for stage in stages:
        start = stage["time"]
        holders = [j for j in jobs if j["time"] <= start <= (j.get("end_time_ms") or math.inf)]
        name = None
        for job in sorted(holders, key=lambda j: -j["time"]):
            name = _query_name(job.get("description")) or _query_name(
                by_execution.get(str(job.get("execution_id"))))
            if name:
                break
        if name is None:
            name = next((r.name for r in results if r.start_ms <= start <= r.end_ms), "?")
        excess = (stage.get("task_max_ms") or 0) - (stage.get("task_p50_ms") or 0)
        out.append({**stage, "query": name, "excess_ms": excess})
    return sorted(out, key=lambda s: -s["excess_ms"])

# --- the summary ------------------------------------------------------------------------

def _size(value: Optional[float]) -> str:
    if value is None:
        return "-"
    return f"{value / 2**30:.2f} GB" if value >= 2**30 else f"{value / 2**20:.0f} MB"


def _seconds(ms: Optional[float]) -> str:
    return "-" if ms is None else f"{ms / 1000:.1f} s" if ms >= 1000 else f"{ms:.0f} ms"


def _phases(result: DemoResult, query_time: float) -> str:
    app, ready, done = (result.phases.get(k) for k in ("app", "ready", "done"))
    parts = []
    if app is not None:
        parts.append(f"Spark start {app:.1f} s")
    if app is not None and ready is not None:
        parts.append(f"tables {ready - app:.1f} s")
    parts.append(f"queries {query_time:.1f} s")
    if done is not None:
        parts.append(f"stop {max(0.0, result.wall_s - done):.1f} s")
    return ", ".join(parts)


def print_summary(settings: Settings, options: DemoOptions, result: DemoResult, stack_kind: str, say: Out) -> None:
    ok = [r for r in result.results if r.status == "ok"]
    failed = result.failed
    query_time = sum(r.seconds for r in result.results)
    say("\nSummary")
    state = " (interrupted)" if result.interrupted else " (stopped at the time limit)" if result.timed_out else ""
    say(f"  queries   {len(result.results)} of {result.planned} run{state}: {len(ok)} ok, {len(failed)} failed")
    for r in failed:
        say(f"            FAILED {r.name}: {r.error}")
    if (result.interrupted or result.timed_out) and len(result.results) < result.planned:
        done = ", ".join(r.name for r in result.results) or "none"
        running = (f"; stopped while {result.order[len(result.results)]} ran"
                   if "ready" in result.phases and len(result.results) < len(result.order) else "")
        say(f"            ran: {done}{running}")
    say(f"  time      {result.wall_s:.1f} s in all: {_phases(result, query_time)}")
    say(f"  app       {result.app_id}  (tag applicationid in InfluxDB)")
    if result.spark_exit not in (0, None) and not (result.interrupted or result.timed_out):
        say(f"  spark-submit exited {result.spark_exit}: see {result.log}")
        if result.executor_logs is not None and result.app_id and options.spark_master.startswith("local-cluster"):
            say(f"  executors' own logs: {result.executor_logs / result.app_id}/<executor id>/stderr")

    say(f"  peak memory per executor ({JVM_HEAP_MEMORY}, {PROCESS_TREE_JVM_RSS_MEMORY}):")
    if result.influx_error:
        say(f"    not read: {result.influx_error}")
    elif result.peaks:
        for executor in sorted(result.peaks, key=executor_key):
            p = result.peaks[executor]
            say(f"    {executor:<8} heap {_size(p.get(JVM_HEAP_MEMORY)):>9}   RSS "
                f"{_size(p.get(PROCESS_TREE_JVM_RSS_MEMORY)):>9}")
        if options.spark_master.startswith("local-cluster") and "driver" in result.peaks:
            say("    (the driver's RSS counts its process tree: in local-cluster mode that holds the "
                "executor JVMs and Python too)")
    else:
        say("    none arrived: is Telegraf up (./sparkscope status) and GRAPHITE_PORT reachable?")
    expected = expected_executors(options.spark_master)
    if expected and result.peaks and not set(result.peaks) >= expected and not result.interrupted:
        say(f"    missing: {', '.join(sorted(expected - set(result.peaks), key=executor_key))}")

    if result.stragglers:
        say("  straggler stages (slowest task >= 3x the typical one, >= 2 s over it, and it held the stage up), "
            "worst first:")
        for s in result.stragglers[:5]:
            say(f"    stage {s.get('stage_id')}.{s.get('attempt')}  {s['query']:<6} "
                f"{_seconds(s.get('duration_ms'))}, {s.get('num_tasks')} tasks, median task "
                f"{_seconds(s.get('task_p50_ms'))}, slowest {_seconds(s.get('task_max_ms'))} on executor "
                f"{s.get('slowest_executor')}")
        if len(result.stragglers) > 5:
            say(f"    ... {len(result.stragglers) - 5} more")
    else:
        say("  straggler stages: none (a stage is one when its slowest task took >= 3x the typical task, "
            ">= 2 s longer, and held the stage up)")

    if result.app_id and not result.influx_error:
        _memory_verdict(settings, result.app_id, say)

    say("\nWhere to look")
    app = result.app_id or ""
    start_ms = min((r.start_ms for r in result.results), default=int(time.time() * 1000)) - 60_000
    end_ms = max((r.end_ms for r in result.results), default=int(time.time() * 1000)) + 60_000
    link = f"{settings.grafana_url}/d/{LIVE_UID}?var-applicationid={app}&from={start_ms}&to={end_ms}"
    say(f"  Grafana   {link}")
    say(f"            (user {settings.grafana_user}, password in .env; the summary: /d/{SUMMARY_UID})")
    if stack_kind != "compose" and not is_installed(settings.grafana_home):
        say("            Grafana is not installed here, so nothing answers there: install Grafana (its own "
            "packages) and ./sparkscope up, or use ./sparkscope up --backend compose, or add this stack to "
            "a Grafana you run (docs/stack.md, \"Your own Grafana\"). The numbers above are from InfluxDB.")
    say(f"  InfluxDB  {settings.influx_url}  database {settings.database}, as the read-only user, e.g.:")
    for statement in (f"SELECT max(value) FROM {JVM_HEAP_MEMORY} WHERE applicationid={influx.string_literal(app)} "
                      f"GROUP BY executorid",
                      f"SELECT text FROM {QUERY_MEASUREMENT} WHERE applicationid={influx.string_literal(app)} "
                      f"AND status <> 'RUNNING'"):
        # The run id is data: quoted for InfluxQL, then for the shell the line is pasted into.
        say(f"            curl -sG -u {settings.influx_read_user}:\"$INFLUXDB_READ_PASSWORD\" "
            f"{settings.influx_url}/query --data-urlencode db={settings.database} "
            f"--data-urlencode {shell_double_quoted('q=' + statement)}")
    say("            (INFLUXDB_READ_PASSWORD is in .env: set -a; . ./.env; set +a)")
    if result.interrupted:
        say("  The stack keeps running; ./sparkscope down stops it.")


def _memory_verdict(settings: Settings, app_id: str, say: Out) -> None:
    """The report's verdict and --conf lines, and where its page is."""
    from sparkscope.report.command import make_report
    from sparkscope.report.run_facts import READ_TIMEOUT_S, REPORT_ROLLUP, RunReader

    try:
        # Where ./sparkscope report puts it: reports/ in the working directory.
        reader = RunReader(settings.influx_reader, settings.database,
                           metrics_reads(settings, READ_TIMEOUT_S, REPORT_ROLLUP))
        path, advice, _, _ = make_report(reader, app_id, Path(REPORTS_DIR))
    except Exception as err:  # the summary must not fail over its last section
        say(f"  memory    no report: {err}")
        return
    say(f"  memory    {advice.summary}")
    for line in advice.containers:
        say(f"            container: {line}")
    if advice.recommendations:
        say(f"            {' '.join(advice.conf_lines())}")
    say(f"            report: {path}  (./sparkscope report {app_id} writes it again)")
