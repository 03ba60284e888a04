"""The demo's workload: spark-submit of the TPC-DS driver script, its
progress as it goes, stopped in order on Ctrl-C or at a time limit."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Optional

from sparkscope.provision.annotator_jar import ensure_annotator_jar
from sparkscope.demo import tpcds
from sparkscope.demo.options import DemoError, DemoOptions, DemoResult, QueryResult
from sparkscope.demo.summary import collect_from_influx, print_summary
from sparkscope.process import log_tail, start_group, stop_group
from sparkscope.spark.conf import annotator_env, annotator_properties, sparkscope_properties
from sparkscope.spark.submit import spark_env, submit_argv
from sparkscope.dashboards.uids import LIVE_UID
from sparkscope.store import influx
from sparkscope.store.promql import PromError
from sparkscope.stack import grafana_health, metrics_reads
from sparkscope.settings import Settings

Out = Callable[[str], None]

DRIVER_SCRIPT = Path(__file__).parent / "tpcds_driver.py"
APP_NAME = "sparkscope-demo-tpcds"  # no dots: it may become spark.metrics.namespace
DRIVER_MEMORY = "2g"
DEFAULT_VIEW_INTERVAL_S = 5.0  # the sink period of spark-conf/metrics.properties
STOP_GRACE_S = 10.0  # SIGTERM lets Spark stop its executors and the annotator flush


def plan_queries(options: DemoOptions) -> list[tpcds.Query]:
    directory = options.query_dir
    if directory is not None and not directory.is_dir():
        raise DemoError(f"--query-dir {directory} is not a directory")
    names = tpcds.select_queries(options.queries, tpcds.available_queries(directory))
    return tpcds.load_queries(names, directory)


def spark_conf(settings: Settings, options: DemoOptions, jar: Path) -> dict[str, str]:
    conf = sparkscope_properties(settings, period_s=options.sink_period_s)
    conf.update(annotator_properties(settings, jar))
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


def _line(result: QueryResult, index: int, total: int, name_width: int, reps: int) -> str:
    label = result.name if reps == 1 else f"{result.name} #{result.repetition}"
    width = len(str(total))
    text = f"[{index:>{width}}/{total}] {label:<{name_width}} {result.status:>6} {result.seconds:5.1f} s"
    if result.error:
        text += f"  {result.error}"
    return text


class _Events:
    """Spark's progress lines (one JSON object each, from the driver script) into
    the result, each announced through say."""

    def __init__(self, settings: Settings, options: DemoOptions, result: DemoResult, say: Out,
                 started: float, on_app: Callable[[str], None] = lambda _: None):
        self.settings, self.options, self.result, self.say = settings, options, result, say
        self.started, self.on_app = started, on_app
        self.name_width = max(len(name) for name in result.order) + (3 if options.repetitions > 1 else 0)

    def follow(self, stream) -> None:
        for raw in stream:
            try:
                event = json.loads(raw)
            except json.JSONDecodeError:
                continue
            if isinstance(event, dict):
                self.take(event)

    def take(self, event: dict) -> None:
        result, say, elapsed = self.result, self.say, time.monotonic() - self.started
        if event.get("event") == "app":
            result.app_id = event.get("metrics_id") or event.get("app_id")
            result.phases["app"] = elapsed
            say(f"application {event.get('app_id')} (Spark {event.get('spark_version')}) started in {elapsed:.1f} s")
            if grafana_health(self.settings.grafana_url):
                say(f"watch it in Grafana: {self.settings.grafana_url}/d/{LIVE_UID}"
                    f"?var-applicationid={result.app_id}")
            self.on_app(result.app_id)
        elif event.get("event") == "ready":
            result.phases["ready"] = elapsed
            say(f"tables registered in {event.get('seconds', 0):.1f} s; the first queries also warm "
                "up the executor JVMs")
        elif event.get("event") == "query":
            qr = QueryResult(name=event["name"], repetition=event.get("repetition", 1),
                             status=event.get("status", "FAILED"), seconds=float(event.get("seconds", 0)),
                             rows=event.get("rows"), error=event.get("error"),
                             start_ms=event.get("start_ms", 0), end_ms=event.get("end_ms", 0))
            result.results.append(qr)
            say(_line(qr, len(result.results), result.planned, self.name_width, self.options.repetitions))
            result.phases["done"] = elapsed


def _terminal_view(settings: Settings, options: DemoOptions):
    """`sparkscope top` for the demo's run, or None when the output is not a
    terminal (CI, pipes), the user asked for plain lines, or rich is missing."""
    if not options.view or not (sys.stdout.isatty() and sys.stdin.isatty()):
        return None
    try:
        from sparkscope.top.command import Top
        from sparkscope.top.data import TopReader
    except ImportError:
        return None
    interval = float(options.sink_period_s or DEFAULT_VIEW_INTERVAL_S)
    timeout_s = max(2.0, min(10.0, interval))
    reader = TopReader(settings.influx_reader, settings.database, interval, timeout_s=timeout_s,
                       store=metrics_reads(settings, timeout_s))
    top = Top(reader, None, interval)
    top.follow = False  # the demo's own run, named when Spark says its id
    top.waiting = "starting Spark: the demo's application shows here once its first metrics arrive"
    return top


def _watch_while(top, reader: threading.Thread) -> bool:
    """Show the view until the workload's output ends; False when the user left it (q)."""
    from sparkscope.top.command import watch

    return watch(top, top.screen.interval_s, until=lambda: not reader.is_alive()) != "quit"


class _Voice:
    """Where the demo's lines go: the terminal, or, while the top view covers
    it, the view's foot, kept to be printed again when the view ends (it used
    the alternate screen, so the record comes back)."""

    def __init__(self, out: Out, view) -> None:
        self.out, self.view = out, view
        self.covered = threading.Event()
        self.hidden: list[str] = []

    def __call__(self, text: str) -> None:
        if self.view is not None and self.covered.is_set():
            self.hidden.append(text)
            self.view.screen.messages.append(text)
            return
        self.out(text)
        if self.out is print:
            sys.stdout.flush()

    def uncover(self) -> None:
        self.covered.clear()
        for text in self.hidden:
            self(text)
        self.hidden.clear()


def _plan_file(data: Path, queries: list, repetitions: int) -> str:
    """The driver script's plan (data, tables, queries), in a private temporary file."""
    plan = {"data_dir": str(data), "tables": list(tpcds.TABLES), "repetitions": repetitions,
            "schema_cache": str(tpcds.schema_cache(data)),
            "queries": [{"name": q.name, "sql": q.sql} for q in queries]}
    plan_file = tempfile.NamedTemporaryFile("w", suffix=".json", prefix="sparkscope-demo-", delete=False)
    with plan_file:
        json.dump(plan, plan_file)
    return plan_file.name


def _run_workload(argv: list[str], settings: Settings, options: DemoOptions, result: DemoResult,
                  events: "_Events", view, say: _Voice) -> None:
    """spark-submit in its own session, followed line by line (under the top
    view at a terminal), stopped in order on Ctrl-C or past the time limit.
    Sets the result's spark_exit, interrupted and timed_out."""
    proc: Optional[subprocess.Popen] = None
    timer: Optional[threading.Timer] = None
    timed_out = threading.Event()
    try:
        # Its own session: a Ctrl-C reaches the demo only, which then stops Spark
        # in order instead of every JVM dying mid-write.
        env = {**spark_env(result.log), **annotator_env(settings)}  # the password: never in argv
        result.executor_logs = Path(env["SPARK_HOME"]) / "work"
        proc = start_group(argv, result.log, env=env, cwd=settings.state_dir, stdout=subprocess.PIPE)
        if options.timeout_s:
            def on_timeout() -> None:
                timed_out.set()
                stop_group(proc.pid, STOP_GRACE_S, proc=proc, progress=say)
            timer = threading.Timer(options.timeout_s, on_timeout)
            timer.daemon = True
            timer.start()
        assert proc.stdout is not None
        if view is None:
            events.follow(proc.stdout)
        else:
            reader = threading.Thread(target=events.follow, args=(proc.stdout,), name="demo-progress", daemon=True)
            say.covered.set()
            reader.start()
            try:
                _watch_while(view, reader)
            finally:
                say.uncover()
            reader.join()
        result.spark_exit = proc.wait()
    except KeyboardInterrupt:
        result.interrupted = True
        say(f"\ninterrupted: stopping Spark (process group {proc.pid if proc else '-'}) ...")
        if proc is not None:
            stop_group(proc.pid, STOP_GRACE_S, proc=proc, progress=say)
            result.spark_exit = proc.poll()
    finally:
        if timer is not None:
            timer.cancel()
        if proc is not None and proc.poll() is None:
            stop_group(proc.pid, STOP_GRACE_S, proc=proc, progress=say)
    if timed_out.is_set():
        result.timed_out = True
        say(f"\nstopped: the workload ran past its {options.timeout_s:.0f} s limit")


def run_demo(settings: Settings, options: DemoOptions, stack_kind: str = "native", out: Out = print) -> DemoResult:
    """Generate data, run the queries, print progress and the summary.

    At a terminal (stdout and stdin), the workload runs under `sparkscope top`
    for its run, with the progress lines at its foot and printed again when it
    ends; q leaves the view and the lines go on as plain text. The stack must be
    up (bring_up); stack_kind only changes where-to-look hints.
    """
    view = _terminal_view(settings, options) if out is print else None
    say = _Voice(out, view)
    queries = plan_queries(options)
    if not influx.ping(settings.influx_url):
        raise DemoError(f"InfluxDB does not answer at {settings.influx_url}: is the stack up? "
                        "run ./sparkscope up")
    data = tpcds.ensure_data(settings.cache_dir, options.scale, progress=say)
    jar = ensure_annotator_jar(settings.root, progress=say)
    master = options.spark_master
    if not master.startswith("local"):
        say(f"note: executors of {master} read the data at {data}: it must be on a filesystem they share")

    logs = settings.state_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    result = DemoResult(exit_code=0, planned=len(queries) * options.repetitions,
                        order=[q.name for _ in range(options.repetitions) for q in queries],
                        log=logs / f"demo-{time.strftime('%Y%m%d-%H%M%S')}.log")
    plan = _plan_file(data, queries, options.repetitions)
    argv = submit_argv(DRIVER_SCRIPT, master, spark_conf(settings, options, jar), [plan])

    say(f"\nTPC-DS sf={tpcds.scale_label(options.scale)}: {len(queries)} quer{'y' if len(queries) == 1 else 'ies'}"
        f"{f' x {options.repetitions}' if options.repetitions > 1 else ''} on {master}; Spark's log: {result.log}")
    started = time.monotonic()

    def on_app(app_id: str) -> None:
        if view is not None:
            view.app_id = app_id
            view.waiting = (f"application {app_id} started: it shows here once its executors' first metrics "
                            "arrive (one sink period)")

    try:
        _run_workload(argv, settings, options, result, _Events(settings, options, result, say, started, on_app),
                      view, say)
    finally:
        Path(plan).unlink(missing_ok=True)
    result.wall_s = time.monotonic() - started

    if result.app_id is None:
        if result.interrupted:
            say("interrupted before the Spark application started: no query ran; the stack keeps running")
            result.exit_code = 130
            return result
        tail = log_tail(result.log, 20)
        raise DemoError(f"spark-submit exited {result.spark_exit} before the application started; "
                        f"last lines of {result.log}:\n{tail}")
    try:
        collect_from_influx(settings, result, master, wait=not (result.interrupted or result.timed_out))
    except KeyboardInterrupt:
        result.interrupted = True  # stop waiting for the last reports; summarize what arrived
    except (influx.InfluxError, PromError) as err:
        result.influx_error = str(err)
    print_summary(settings, options, result, stack_kind, say)
    if result.interrupted:
        result.exit_code = 130
    elif result.failed or result.spark_exit != 0 or len(result.results) < result.planned:
        result.exit_code = 1
    return result
