"""`./sparkscope profile`: asks a running application's executors for a JVM
profile (async-profiler, through the profiler plugin), waits for it to be
stored, prints where the time went and writes a standalone HTML flame graph;
the same profile is in Grafana's "Spark profiles" dashboard."""

from __future__ import annotations

import argparse
import calendar
import re
import sys
import time
import urllib.parse
from pathlib import Path

from sparkscope.command_line import REPORTS_DIR, RUNTIME_ERROR, add_run_argument
from sparkscope.dashboards.uids import PROFILES_UID
from sparkscope.errors import UsageError
from sparkscope.profiles import control, page
from sparkscope.store import profiles as store
from sparkscope.store.nested_set import Row, widest_leaves
from sparkscope.store.reads import InfluxReads
from sparkscope.settings import load_settings

MODES = store.KINDS[:4]  # what async-profiler records on request; the sampler writes the rest
STORED_DEADLINE_S = 60


def wait_for_rows(influx_url: str, database: str, app_id: str, profile: str,
                  deadline_s: float = STORED_DEADLINE_S) -> list[Row]:
    """The profile's rows once Telegraf has flushed them all: the row count
    must stop growing and the root's value equal the sum of its children's
    plus its self (a complete tree)."""
    deadline = time.monotonic() + deadline_s
    previous = -1
    while True:
        rows = store.read_rows(influx_url, database, app_id, profile)
        if rows and len(rows) == previous and _complete(rows):
            return rows
        if time.monotonic() > deadline:
            if rows:
                return rows
            raise control.ProfileError(f"profile {profile!r} was taken but is not in InfluxDB after {deadline_s:.0f} s:"
                                       f" is Telegraf up, and is spark.sparkscope.influx.url pointing at it?")
        previous = len(rows)
        time.sleep(2)


def _complete(rows: list[Row]) -> bool:
    children = sum(r.value for r in rows if r.level == 1)
    return rows[0].level == 0 and rows[0].value == children + rows[0].self_value


def stage_cuts(influx_url: str, database: str, app_id: str, profile: str, kind: str) -> list[dict]:
    """The per-stage cuts stored with a profile (same executor, kind, start
    and length), each with the job or SQL query the annotator recorded for
    its stage, busiest first."""
    prefix = profile.rsplit(" all threads", 1)[0] + " "
    cuts = [c for c in store.stage_cuts(influx_url, database, app_id, kind) if c["profile"].startswith(prefix)]
    reads = InfluxReads(influx_url, database)
    for cut in cuts:
        stage_id = cut["stage"].split()[-1].split(".")[0]
        cut["job"] = ""
        # The final point names the job; a stage still running has only its short text.
        for field in ("job_description", "text") if stage_id.isdigit() else ():
            found = reads.stage_text(app_id, int(stage_id), field)
            if found:
                cut["job"] = found
                break
    return sorted(cuts, key=lambda c: -c["samples"])


def grafana_link(grafana_url: str, app_id: str, profile: str, kind: str, start_ms: int, seconds: float) -> str:
    query = urllib.parse.urlencode({"var-app": app_id, "var-kind": kind, "var-profile": profile,
                                    "from": start_ms - 60_000, "to": start_ms + int(seconds * 1000) + 60_000})
    return f"{grafana_url}/d/{PROFILES_UID}/spark-profiles?{query}"


def _start_ms(profile: str) -> int:
    stamp = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", profile)
    if not stamp:
        return int(time.time() * 1000)
    return calendar.timegm(time.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S")) * 1000


def run_of(args: argparse.Namespace) -> str | None:
    """RUN, or the deprecated --app (said so on stderr); None: the newest here."""
    if args.app is None:
        return args.app_id
    print("sparkscope profile: --app is deprecated: give the run as the first argument, "
          "./sparkscope profile RUN (as report and top take it)", file=sys.stderr)
    if args.app_id is not None and args.app_id != args.app:
        raise UsageError(f"two runs given: {args.app_id} and --app {args.app}; give one, as RUN")
    return args.app


def cmd_profile(args: argparse.Namespace) -> int:
    settings = load_settings()
    ctl = control.find_control(run_of(args), Path(args.control_dir) if args.control_dir else None)
    live = control.live_executors(ctl)
    if not live:
        raise control.ProfileError(f"{ctl.application_id} has no executor running the profiler plugin yet "
                                   f"(executors check in every few seconds after they start, spark.sparkscope.profiler.pollSeconds): try again in a few seconds")
    if args.executor == "all":
        executors = [e for e in live if e != "driver"] or live
    elif args.executor:
        executors = [args.executor]
    else:
        executors = [sorted(live, key=lambda e: (not e.isdigit(), int(e) if e.isdigit() else 0, e))[0]]
    print(f"profiling {ctl.application_id}, executor {', '.join(executors)}: {args.mode} for {args.seconds:g} s")
    requests = [control.request_profile(ctl, e, args.mode, args.seconds) for e in executors]
    states = control.follow(ctl, [r["id"] for r in requests], args.seconds)
    out_dir = Path(args.out)
    failures = 0
    for state in states:
        if state["state"] != "done":
            failures += 1
            print(f"executor {state['executor']}: no profile: {state['message']}")
            continue
        if state["message"]:
            print(f"executor {state['executor']}: note: {state['message']}")
        profile = state["profile"]
        rows = wait_for_rows(settings.influx_reader, settings.database, ctl.application_id, profile)
        unit = store.UNIT.get(args.mode, "ns")
        out_dir.mkdir(parents=True, exist_ok=True)
        safe = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{ctl.application_id}-{profile}")
        path = out_dir / f"sparkscope-profile-{safe}.html"
        path.write_text(page.render(rows, f"{ctl.application_id}: {profile}", unit, {
            "application": ctl.application_id, "executor": state["executor"], "mode": args.mode,
            "samples": str(state["samples"])}), encoding="utf-8")
        print(f"executor {state['executor']}: {state['samples']} samples; most self time:")
        total = rows[0].value or 1
        for label, value in widest_leaves(rows, 5):
            print(f"  {100 * value / total:5.1f} %  {label}")
        samples = max(int(state["samples"]), 1)
        for cut in stage_cuts(settings.influx_reader, settings.database, ctl.application_id, profile, args.mode):
            job = f" ({cut['job']})" if cut["job"] else ""
            print(f"  {cut['stage']}{job}: {100 * cut['samples'] / samples:.0f} % of the samples, "
                  f"most self time in {cut['top']}")
        print(f"  flame graph: {path}")
        print(f"  in Grafana:  {grafana_link(settings.grafana_url, ctl.application_id, profile, args.mode, _start_ms(profile), args.seconds)}")
    return RUNTIME_ERROR if failures == len(states) else 0


def register(sub) -> None:
    p = sub.add_parser("profile", help="JVM flame graph of a running application's executors (async-profiler, "
                                       "needs the profiler plugin): terminal summary, HTML file and Grafana")
    add_run_argument(p, "the application with the profiler that started last on this host")
    p.add_argument("--app", help=argparse.SUPPRESS)  # before RUN; deprecated, still accepted (run_of)
    p.add_argument("--executor", help="executor id, 'driver' or 'all' (default: the lowest executor id)")
    p.add_argument("--seconds", type=float, default=30, help="how long to sample (default 30)")
    p.add_argument("--mode", choices=MODES, default=MODES[0],
                   help="cpu: on-CPU time; wall: all threads, running and waiting, split in the graph; "
                        "alloc: bytes allocated; lock: time waiting on contended locks (default cpu)")
    p.add_argument("--out", default=REPORTS_DIR,
                   help=f"directory for the HTML file, from the working directory (default {REPORTS_DIR}/)")
    p.add_argument("--control-dir", help="where drivers leave their control files (default: "
                                         "<tmp>/sparkscope-profiler-<user>)")
    p.set_defaults(func=cmd_profile)
