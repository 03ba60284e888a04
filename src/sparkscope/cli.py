"""sparkscope: live per-executor monitoring of Apache Spark.

The stack: up, down, status, install. Attaching Spark: conf. Reading runs:
report, compare, top, profile. Trying it all: demo. (./sparkscope test runs the
project's test suite: the developers' command, python -m sparkscope_dev.)"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from pathlib import Path

from sparkscope.provision import BuildError
from sparkscope.provision.annotator_jar import ensure_annotator_jar, jar_path
from sparkscope.provision.prebuild import native_steps
from sparkscope.demo import command as demo_command
import sparkscope
from sparkscope import versions
from sparkscope.command_line import INTERRUPTED, NOT_ALL_UP, OK, RUNTIME_ERROR, USAGE_ERROR, exit_code_epilog
from sparkscope.errors import SparkscopeError, UsageError
from sparkscope.report import command as report_command
from sparkscope.compare import command as compare_command
from sparkscope.profiles import command as profile_command
try:  # draws with rich, a declared dependency; every other command runs without it
    from sparkscope.top import command as top_command
except ImportError as _no_rich:
    top_command = None
    TOP_MISSING = str(_no_rich)
from sparkscope.spark.chart_release import Release, chart_values, submit_flags
from sparkscope.store.http import EVENTS_PASSWORD_ENV
from sparkscope.spark.conf import annotator_properties, as_flags, conf_flags
from sparkscope.stack import BACKENDS, SERVICE_NAMES, open_stack, thanos_layout
from sparkscope.stack.grafana_local import GrafanaNotFound, find_grafana, is_installed
from sparkscope.settings import ROOT, Settings, ensure_env_file, is_loopback, load_settings


def cmd_up(args: argparse.Namespace) -> int:
    settings = load_settings()
    if ensure_env_file(settings):
        settings = load_settings()
    stack = open_stack(settings, args.backend)
    stack.up(only=tuple(args.services) or SERVICE_NAMES)
    if args.services:
        return 0
    # Natively, no Grafana found means none was started (a wrong GRAFANA_HOME made up fail already).
    if stack.name == "native" and not is_installed(settings.grafana_home):
        print("\nGrafana  not installed here: install Grafana (its own packages), then ./sparkscope up again;")
        print("         or ./sparkscope up --backend compose; or add this stack to a Grafana you run (docs/stack.md)")
    else:
        print(f"\nGrafana  {settings.grafana_url}  (user {settings.grafana_user}, password in .env)")
    print(f"InfluxDB {settings.influx_url}  database {settings.database}")
    if settings.metrics_store == "thanos":
        query = thanos_layout(settings).query
        print(f"Thanos   {query.http_url}  PromQL (Thanos Query; user sparkscope, password in "
              f"{settings.state_dir / 'thanos' / 'password'}); events stay in InfluxDB (docs/scale.md)")
    elif settings.metrics_store == "remote":
        print(f"Metrics  {settings.remote_write_url} (remote write); PromQL at {settings.remote_query_url}; "
              f"events stay in InfluxDB (docs/scale.md)")
    print(f"Graphite {settings.graphite_host}:{settings.graphite_port}  <- Spark sends here")
    print(f"\nStack    {stack.name} backend; ./sparkscope status, ./sparkscope down")
    if stack.name == "compose":
        print("Disks    block I/O latency probe (eBPF, privileged) is optional: "
              "docker compose --profile blockprobe up -d")
        print("Threads  thread states of Spark JVMs (pid: host, privileged) are optional: "
              "docker compose --profile threadprobe up -d")
    print("\nAttach Spark:  spark-submit --properties-file spark-conf/spark-defaults.conf ...")
    print("          or:  ./sparkscope conf --host <this host>   (prints --conf flags)")
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    open_stack(load_settings(), args.backend).down(only=tuple(args.services) or SERVICE_NAMES)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    stack = open_stack(load_settings(), args.backend)
    rows = stack.status()
    # A native stack without a Grafana installed works (Grafana elsewhere reads it): not a failure.
    all_up = all(row.state in ("up", "not installed") for row in rows)
    if args.json:
        print(json.dumps(status_document(stack.name, rows, all_up), indent=2))
        return OK if all_up else NOT_ALL_UP
    for row in rows:
        line = f"{row.name:9} {row.backend:8} {row.state:13} {row.process:24} {row.url:24} {row.version}"
        if row.name.startswith("thanos"):  # longer names, longer URLs
            line = f"{row.name:16} {row.state:9} {row.process:12} {row.url} {row.version}"
        print(line.rstrip() + (f"  {row.data}" if row.data else ""))
        for detail in filter(None, row.detail.split("\n")):
            print(" " * 10 + detail)
    return OK if all_up else NOT_ALL_UP


def status_document(backend: str, rows, all_up: bool) -> dict:
    """status --json: every service with its state, pid (natively) or container,
    URL and version where known, and whether all are up."""
    services = []
    for row in rows:
        kind, _, ident = row.process.partition(" ")
        services.append({"name": row.name, "backend": row.backend, "state": row.state,
                         "pid": int(ident) if kind == "pid" and ident.isdigit() else None,
                         "container": ident if kind == "container" else None,
                         "url": row.url, "version": None if row.version in ("", "-") else row.version,
                         "data": row.data or None, "detail": row.detail or None})
    return {"backend": backend, "all_up": all_up, "services": services}


def cmd_conf(args: argparse.Namespace) -> int:
    if args.k8s:
        return cmd_conf_k8s(args)
    settings = load_settings()
    host = args.host or settings.graphite_host
    port = args.port or settings.graphite_port
    if is_loopback(settings.graphite_bind) and not is_loopback(host):
        print(f"# Telegraf takes metrics and events on {settings.graphite_bind} only (GRAPHITE_BIND): Spark on "
              f"other machines cannot reach {host}:{port}. For a cluster, set GRAPHITE_BIND=0.0.0.0 "
              f"(or this machine's address) in .env, restart the stack (./sparkscope down; ./sparkscope up), and "
              f"let only the cluster reach ports {port} and {settings.events_port}.",
              file=sys.stderr)
    flags = conf_flags(
        settings.root / "spark-conf" / "spark-defaults.conf",
        settings.unread_metrics,
        graphite_host=host,
        graphite_port=port,
        prefix=args.prefix,
        period_s=args.period,
    )
    if not args.no_annotator:
        jar = jar_path(settings.root)
        if not jar.is_file():
            print(f"# the annotator jar is not built yet ({jar}): run ./sparkscope install", file=sys.stderr)
        # What the demo and the tests attach, pointed at --host; with EVENTS_AUTH its user and
        # password too: the password is what the listener asks for (Spark redacts it in its UI).
        # Executors can be elsewhere only once Telegraf listens beyond this host: then the jar travels.
        ship = args.ship_jar or not is_loopback(settings.graphite_bind)
        props = annotator_properties(settings, jar, ship=ship)
        props["spark.sparkscope.influx.url"] = f"http://{host}:{settings.events_port}"
        flags += as_flags(props)
        if "spark.sparkscope.influx.passwordEnv" in props:
            # The value stays out of argv (ps shows it) and of what is printed here.
            print(f"# the annotator reads the events password from ${EVENTS_PASSWORD_ENV} in spark-submit's "
                  f"environment: export {EVENTS_PASSWORD_ENV}=\"$(sed -n 's/^EVENTS_PASSWORD=//p' "
                  f"{shlex.quote(str(settings.root / '.env'))})\"", file=sys.stderr)
    print(" \\\n".join(flags))
    return 0


def cmd_conf_k8s(args: argparse.Namespace) -> int:
    """The flags for a release of the Helm chart: its Services, its values."""
    given = [flag for flag, value in (("--host", args.host), ("--port", args.port), ("--prefix", args.prefix),
                                      ("--period", args.period)) if value is not None]
    if given:
        raise UsageError(f"{', '.join(given)} cannot go with --k8s: the host is the release's Telegraf "
                              "Service and the rest are the chart's values (telegraf.ports.graphite, spark.prefix, "
                              "spark.periodSeconds): give the values file you installed with, --values FILE")
    values = chart_values(ROOT, tuple(args.values))
    if args.no_annotator:
        values["spark"] = dict(values["spark"], annotator=dict(values["spark"]["annotator"], enabled=False))
    print(" \\\n".join(submit_flags(ROOT, Release(args.release, args.namespace, values))))
    return 0


def ensure_each(steps) -> list[str]:
    """Run each (name, ensure) step, printing what it got; returns the names that could not be had."""
    missing = []
    for name, ensure in steps:
        try:
            print(f"{name}: {ensure()}", flush=True)
        except BuildError as err:
            print(f"{name}: NOT AVAILABLE: {err}", file=sys.stderr, flush=True)
            missing.append(name)
    return missing


def install_all(settings: Settings) -> list[str]:
    """Build or find every native component; returns what could not be had.
    Grafana is never built: natively the user's own is used (stack/grafana_local.py)."""
    missing = ensure_each(native_steps(settings.cache_dir, settings.metrics_store))
    try:
        grafana = find_grafana(settings.grafana_home)
        print(f"grafana: {grafana.binary} (home {grafana.home})" if grafana else
              "grafana: not installed (the native stack runs without it; docs/stack.md, \"Grafana natively\")",
              flush=True)
    except GrafanaNotFound as err:
        print(f"grafana: {err}", file=sys.stderr, flush=True)
    return missing


def cmd_install(args: argparse.Namespace) -> int:
    settings = load_settings()
    missing = install_all(settings)
    print(f"annotator: {ensure_annotator_jar(settings.root)}")
    return RUNTIME_ERROR if missing else OK


# The Thanos store's processes (SPARKSCOPE_METRICS_STORE=thanos, docs/scale.md).
THANOS_SERVICE = re.compile(r"thanos-(router|query|receive-[1-9][0-9]?)")


def service_name(text: str) -> str:
    if text not in SERVICE_NAMES and not THANOS_SERVICE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"no service {text!r}: choose from {', '.join(SERVICE_NAMES)}, or with "
                                         f"the Thanos store thanos-router, thanos-receive-<n>, thanos-query")
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sparkscope", description=__doc__, epilog=exit_code_epilog(),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=version_text(),
                        help="sparkscope's version and the versions of what it runs")
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")

    up = sub.add_parser("up", help="start InfluxDB, Telegraf and Grafana (docker compose, or natively: "
                                   "InfluxDB and Telegraf built on first run, your own Grafana)")
    down = sub.add_parser("down", help="stop the stack that up started (either backend)")
    status = sub.add_parser("status", help="each service: backend, process, health, URL, version; "
                                           "InfluxDB's size and series (exit 3 unless all are up); "
                                           "reads only, writes nothing")
    status.add_argument("--json", action="store_true",
                        help="one JSON object: backend, all_up, and per service its name, state, pid or "
                             "container, url, version, data, detail")
    for command, func in ((up, cmd_up), (down, cmd_down), (status, cmd_status)):
        command.add_argument("--backend", choices=BACKENDS,
                             help="native (local processes) or compose (docker compose); default: the one "
                                  "running, else compose when a Docker engine answers")
        command.set_defaults(func=func)
    for command in (up, down):
        # One service alone, e.g. restarting InfluxDB while Telegraf keeps its buffer.
        command.add_argument("services", nargs="*", type=service_name, metavar="service",
                             help=f"only these ({', '.join(SERVICE_NAMES)}; with SPARKSCOPE_METRICS_STORE=thanos also "
                                  f"thanos-router, thanos-receive-<n>, thanos-query; default: all)")
    sub.add_parser("install", help="build InfluxDB and Telegraf (cached; up does it too) and the annotator jar; "
                                        "find your Grafana") \
        .set_defaults(func=cmd_install)

    conf = sub.add_parser("conf", help="print spark-submit --conf flags for your sparkscope host, or with --k8s "
                                           "for a release of the Helm chart")
    conf.add_argument("--host", help="host running Telegraf, as executors reach it (default: this stack)")
    conf.add_argument("--port", type=int, help="Graphite port (default: GRAPHITE_PORT)")
    conf.add_argument("--prefix", help="metric name prefix (default: spark)")
    conf.add_argument("--period", type=int, help="report period in seconds (default: 5)")
    conf.add_argument("--no-annotator", action="store_true",
                      help="metrics only: leave out the query/job/stage annotator listener")
    conf.add_argument("--ship-jar", action="store_true",
                      help="send the annotator jar with the job (--jars) instead of putting this host's file on "
                           "the class path: for executors on other machines (the default once GRAPHITE_BIND "
                           "is not loopback)")
    k8s = conf.add_argument_group("Spark on Kubernetes, sending to a release of charts/sparkscope")
    k8s.add_argument("--k8s", action="store_true",
                     help="print the settings for the release's Services (spark-submit --master k8s://...), "
                          "the events password read from its Secret when you submit")
    k8s.add_argument("--release", default="sparkscope", help="helm release name (default: sparkscope)")
    k8s.add_argument("--namespace", "-n", default="spark-mon",
                     help="namespace the release is in (default: spark-mon, as in docs/kubernetes.md)")
    k8s.add_argument("--values", "-f", type=Path, action="append", default=[], metavar="FILE",
                     help="a values file you installed the release with (repeatable, as helm -f)")
    conf.set_defaults(func=cmd_conf)

    demo_command.register(sub)
    report_command.register(sub)
    compare_command.register(sub)
    profile_command.register(sub)
    if top_command is not None:
        top_command.register(sub)
    else:
        top = sub.add_parser("top", help="a live terminal view of one Spark run (needs the Python package rich)")
        top.set_defaults(func=cmd_top_missing)
    return parser


def cmd_top_missing(args: argparse.Namespace) -> int:
    raise SparkscopeError(f"needs the Python package rich ({TOP_MISSING}): ./sparkscope installs it in .venv; "
                          "for another Python, pip install 'rich>=13,<16'")


# What --version names: the pins of versions.py that a user runs or attaches to.
COMPONENTS = (("InfluxDB", versions.INFLUXDB), ("Telegraf", versions.TELEGRAF),
              ("Grafana", f"{versions.GRAFANA} (dashboards also checked on {versions.GRAFANA_12})"),
              ("Spark", f"{versions.SPARK} (annotator also tried on {versions.SPARK_4})"))


def version_text() -> str:
    return "\n".join([f"sparkscope {sparkscope.__version__}", *(f"  {name:9} {pinned}" for name, pinned in COMPONENTS)])


def main(argv: list[str] | None = None) -> int:
    """Exit codes: command_line.EXIT_CODES (0 ok, 1 runtime error, 2 usage error, 3 status
    not all up, 130 interrupted); argparse exits 2 itself on a bad option."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except UsageError as err:
        print(f"sparkscope {args.command}: {err}", file=sys.stderr)
        return USAGE_ERROR
    except SparkscopeError as err:
        print(f"sparkscope {args.command}: {err}", file=sys.stderr)
        return RUNTIME_ERROR
    except KeyboardInterrupt:
        print(f"\nsparkscope {args.command}: interrupted", file=sys.stderr)
        return INTERRUPTED
