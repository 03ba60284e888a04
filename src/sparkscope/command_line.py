"""What every command shares, so that scripts can rely on it: the exit codes,
the RUN argument of report, top and profile, and where pages are written."""

from __future__ import annotations

import argparse
from typing import Callable

OK = 0
RUNTIME_ERROR = 1  # the command could not do its work: the stack is down, a build failed, no such run
REGRESSED = 1  # compare: the run is worse than its baseline (a script stops on it as on a failure)
USAGE_ERROR = 2  # a bad option or value (argparse's own code)
NOT_ALL_UP = 3  # status: a service is down, unhealthy or degraded
INTERRUPTED = 130  # Ctrl-C (128 + SIGINT, as shells report it)

EXIT_CODES = ((OK, "ok"),
              (RUNTIME_ERROR, "runtime error: the stack is down, no such run, a build, install, profile "
                              "or demo failed; compare: the run is worse than usual"),
              (USAGE_ERROR, "usage error: a bad option or value"),
              (NOT_ALL_UP, "status: not every service is up"),
              (INTERRUPTED, "interrupted"))

# The HTML pages of report, profile and demo go here, relative to the working
# directory (as any file a command is asked to write); --out moves them.
REPORTS_DIR = "reports"


def add_run_argument(parser: argparse.ArgumentParser, default: str) -> None:
    """RUN, the application id (Spark's spark.app.id), positional and optional in
    report, top, profile and compare alike; args.app_id is None when it is left out."""
    parser.add_argument("app_id", nargs="?", metavar="RUN",
                        help=f"the run's application id, e.g. app-20261127101500-0003 (default: {default})")


def positive_int(what: str) -> Callable[[str], int]:
    """An argparse type: a whole number >= 1, else a usage error naming the option
    (checked before anything is read: `compare --last 0` with the stack down is
    still a usage error)."""
    def parse(text: str) -> int:
        if not text.strip().isdigit() or int(text) < 1:
            raise argparse.ArgumentTypeError(f"{what} must be a whole number >= 1 (got {text!r})")
        return int(text)
    return parse


def exit_code_epilog() -> str:
    return "exit codes:\n" + "\n".join(f"  {code:<4} {meaning}" for code, meaning in EXIT_CODES)
