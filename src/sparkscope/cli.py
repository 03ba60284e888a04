"""The sparkscope command line: up, down, status, conf, install, test."""

from __future__ import annotations

import argparse
import subprocess
import sys

from sparkscope import annotator, install, native, sparkconf
from sparkscope.influx import InfluxError
from sparkscope.install import InstallError
from sparkscope.settings import Settings, SettingsError, load_settings


def cmd_up(args: argparse.Namespace) -> int:
    settings = load_settings()
    if native.ensure_env_file(settings):
        settings = load_settings()
    native.up(settings, only=tuple(args.services) or native.SERVICE_NAMES)
    if args.services:
        return 0
    print(f"\nGrafana  {settings.grafana_url}  (user {settings.grafana_user}, password in .env)")
    print("         Natively only Grafana's HTTP API runs (no web UI is built here); for the web UI")
    print("         use docker compose up -d, or point any Grafana at InfluxDB below.")
    print(f"InfluxDB {settings.influx_url}  database {settings.database}")
    print(f"Graphite {settings.graphite_host}:{settings.graphite_port}  <- Spark sends here")
    print("\nAttach Spark:  spark-submit --properties-file spark-conf/spark-defaults.conf ...")
    print("          or:  ./sparkscope conf --host <this host>   (prints --conf flags)")
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    native.down(load_settings(), only=tuple(args.services) or native.SERVICE_NAMES)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    rows = native.status(load_settings())
    for name, state, detail in rows:
        print(f"{name:9} {state:9} " + detail.replace("\n", "\n" + " " * 20))
    return 0 if all(state == "up" for _, state, _ in rows) else 3


def cmd_conf(args: argparse.Namespace) -> int:
    settings = load_settings()
    host = args.host or settings.graphite_host
    flags = sparkconf.conf_flags(
        settings.root / "spark-conf" / "spark-defaults.conf",
        graphite_host=host,
        graphite_port=args.port or settings.graphite_port,
        prefix=args.prefix,
        period_s=args.period,
    )
    if not args.no_annotator:
        jar = annotator.jar_path(settings.root)
        if not jar.is_file():
            print(f"# the annotator jar is not built yet ({jar}): run ./sparkscope install", file=sys.stderr)
        flags += [f"--jars {jar}", f"--conf spark.extraListeners={annotator.LISTENER_CLASS}",
                  f"--conf spark.sparkscope.influx.url=http://{host}:{settings.events_port}"]
    print(" \\\n".join(flags))
    return 0


def install_all(settings: Settings) -> list[str]:
    """Build or find every native component; returns what could not be had."""
    missing = []
    for name, ensure in (("influxd", install.ensure_influxd), ("telegraf", install.ensure_telegraf),
                         ("grafana", install.ensure_grafana)):
        try:
            print(f"{name}: {ensure(settings.cache_dir)}")
        except InstallError as err:
            print(f"{name}: NOT AVAILABLE: {err}", file=sys.stderr)
            missing.append(name)
    return missing


def cmd_install(args: argparse.Namespace) -> int:
    settings = load_settings()
    missing = install_all(settings)
    print(f"annotator: {annotator.ensure_annotator_jar(settings.root)}")
    return 2 if missing else 0


def cmd_test(args: argparse.Namespace) -> int:
    settings = load_settings()
    # Builds happen here, with progress on the terminal, rather than silently
    # inside a test fixture. A missing Grafana is reported by the suite itself.
    install_all(settings)
    print(f"annotator: {annotator.ensure_annotator_jar(settings.root)}")
    return subprocess.call([sys.executable, "-m", "pytest", *args.pytest_args], cwd=settings.root)


def service_name(text: str) -> str:
    if text not in native.SERVICE_NAMES:
        raise argparse.ArgumentTypeError(f"no service {text!r}: choose from {', '.join(native.SERVICE_NAMES)}")
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sparkscope", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")

    up = sub.add_parser("up", help="install (first run) and start InfluxDB, Telegraf and Grafana natively")
    down = sub.add_parser("down", help="stop the native stack started by up (by pid)")
    for command, func in ((up, cmd_up), (down, cmd_down)):
        # One service alone, e.g. restarting InfluxDB while Telegraf keeps its buffer.
        command.add_argument("services", nargs="*", type=service_name, metavar="service",
                             help=f"only these ({', '.join(native.SERVICE_NAMES)}; default: all)")
        command.set_defaults(func=func)
    sub.add_parser("status", help="is each service running and answering?").set_defaults(func=cmd_status)
    sub.add_parser("install", help="build InfluxDB, Telegraf, Grafana (cached; up does it too) and the annotator jar") \
        .set_defaults(func=cmd_install)

    conf = sub.add_parser("conf", help="print spark-submit --conf flags for your sparkscope host")
    conf.add_argument("--host", help="host running Telegraf, as executors reach it (default: this stack)")
    conf.add_argument("--port", type=int, help="Graphite port (default: GRAPHITE_PORT)")
    conf.add_argument("--prefix", help="metric name prefix (default: spark)")
    conf.add_argument("--period", type=int, help="report period in seconds (default: 5)")
    conf.add_argument("--no-annotator", action="store_true",
                      help="metrics only: leave out the query/job/stage annotator listener")
    conf.set_defaults(func=cmd_conf)

    test = sub.add_parser("test", help="run the test suite (pytest; extra args are passed on)")
    test.add_argument("pytest_args", nargs=argparse.REMAINDER)
    test.set_defaults(func=cmd_test)
    from sparkscope import demo; demo.register(sub)  # noqa: E702 (one line, owned by demo.py)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown and args.command != "test":
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command == "test":  # everything after `test` belongs to pytest
        args.pytest_args = unknown + args.pytest_args
    try:
        return args.func(args)
    except (SettingsError, InstallError, native.StackError, InfluxError, sparkconf.ConfError) as err:
        print(f"sparkscope {args.command}: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\nsparkscope {args.command}: interrupted", file=sys.stderr)
        return 130
