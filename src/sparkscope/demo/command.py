"""`sparkscope demo`: a TPC-DS run you can watch, in one command.

Brings the stack up (either backend, as `up` would), generates TPC-DS data
offline (cached per scale), runs the queries on Spark in local-cluster mode
(real executor JVMs) with the Graphite sink and the annotator attached,
prints each query as it finishes (at a terminal, under `sparkscope top`
for the run), then a summary read back from InfluxDB:
peak heap and RSS per executor, straggler stages with their queries, and
where to look.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional

from sparkscope.command_line import positive_int
from sparkscope.demo import tpcds
from sparkscope.demo.options import DemoOptions, parse_memory_mb
from sparkscope.demo.run import plan_queries, run_demo
from sparkscope.demo.tpcds import TpcdsError
from sparkscope.errors import UsageError
from sparkscope.process import Progress
from sparkscope.stack import Backend, open_stack
from sparkscope.settings import Settings, ensure_env_file, load_settings


# --- arguments ----------------------------------------------------------------------

def _scale_arg(text: str) -> float:
    try:
        return tpcds.parse_scale(text)
    except TpcdsError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


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
    demo.add_argument("--executors", type=positive_int("--executors"), default=2,
                      help="executor JVMs in local-cluster mode (default %(default)s)")
    demo.add_argument("--executor-memory", type=_memory_arg, default=1024, metavar="SIZE",
                      help="memory per executor, e.g. 1g, 1536m (default 1g)")
    demo.add_argument("--repetitions", type=positive_int("--repetitions"), default=1,
                      help="run the query list this many times (default %(default)s)")
    demo.add_argument("--master", help="Spark master URL instead of local-cluster, e.g. "
                                       "spark://host:7077 (executors must see the data directory "
                                       "at the same path)")
    demo.add_argument("--query-dir", type=Path, metavar="DIR",
                      help="run your own .sql files from DIR instead of the TPC-DS set "
                           "(a file name is a query name)")
    demo.add_argument("--no-top", dest="view", action="store_false",
                      help="print plain progress lines at a terminal too (what happens when the output "
                           "is a pipe or a file); by default a terminal shows `sparkscope top` for the "
                           "run while it runs, q leaves it")
    demo.add_argument("--backend", choices=("native", "compose"),
                      help="run the stack natively or with docker compose (default: the one running, "
                           "else compose when a Docker engine answers)")
    demo.set_defaults(func=cmd_demo)
    return demo


def options_from_args(args: argparse.Namespace) -> DemoOptions:
    return DemoOptions(scale=args.scale, queries=args.queries, executors=args.executors,
                       executor_memory_mb=args.executor_memory, repetitions=args.repetitions,
                       master=args.master, query_dir=args.query_dir, view=args.view)


def cmd_demo(args: argparse.Namespace) -> int:
    options = options_from_args(args)
    # A bad --queries or --query-dir is a usage error, found before minutes of stack start-up.
    if options.query_dir is not None and not options.query_dir.is_dir():
        raise UsageError(f"--query-dir {options.query_dir} is not a directory")
    available = tpcds.available_queries(options.query_dir)  # not installed: a runtime error
    try:
        tpcds.select_queries(options.queries, available)
    except TpcdsError as err:
        raise UsageError(str(err)) from err
    plan_queries(options)
    settings = load_settings()
    if ensure_env_file(settings):
        settings = load_settings()
    stack = bring_up(settings, getattr(args, "backend", None))
    return run_demo(settings, options, stack.name).exit_code


def bring_up(settings: Settings, backend: Optional[str] = None, out: Progress = print) -> Backend:
    """Start the stack (idempotent) with the backend `up` would choose."""
    stack = open_stack(settings, backend)
    out(f"stack: {stack.name} backend" + (" (a Docker engine answers)" if stack.name == "compose" else ""))
    stack.up(progress=out)
    return stack
