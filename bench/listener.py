#!/usr/bin/env python3
"""Annotator overhead on Spark's listener bus.

Runs a job of N tiny tasks (default 100,000) in local mode, alternately with
and without the annotator (interleaved, --runs each), with the Graphite sink
on a throwaway stack. Prints the job's time (median of each, and the ratio),
the annotator's own processing time per event as Spark measures it
(LiveListenerBus.listenerProcessingTime.<listener>), the events per second
that implies it can absorb, and every LiveListenerBus dropped-events counter.

    .venv/bin/python bench/listener.py --tasks 100000 --runs 3
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
from pathlib import Path

from sparkscope.provision.annotator_jar import ensure_annotator_jar
from sparkscope.spark.conf import LISTENER_CLASS, annotator_properties, sparkscope_properties
from sparkscope.spark.submit import run_submit, submit_argv
from sparkscope.store import influx
from sparkscope_testkit.sandbox import throwaway_stack

ROOT = Path(__file__).resolve().parents[1]

JOB = Path(__file__).with_name("jobs") / "many_tasks.py"


def run(settings, tasks: int, conf: dict[str, str], log: Path) -> dict:
    props = sparkscope_properties(settings, period_s=1)
    props.update(conf)
    result = run_submit(submit_argv(JOB, "local[2]", props, [str(tasks)]), log, timeout_s=7200)
    if result.returncode != 0:
        raise SystemExit(f"spark-submit failed ({result.returncode}); see {log}")
    out = result.stdout
    return {
        "app_id": re.search(r"^APP_ID (\S+)", out, re.M).group(1),
        "seconds": float(re.search(r"^JOB_SECONDS (\S+)", out, re.M).group(1)),
        "listeners": {d["name"]: d for d in map(json.loads, re.findall(r"^LISTENER (.*)$", out, re.M))},
        "dropped": {d["queue"]: d["count"] for d in map(json.loads, re.findall(r"^DROPPED (.*)$", out, re.M))},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3, help="runs with and without, interleaved")
    parser.add_argument("--only-with", action="store_true",
                        help="skip the runs without the annotator: just its bus time and the dropped counters")
    args = parser.parse_args()
    modes = ("with",) if args.only_with else ("without", "with")
    jar = ensure_annotator_jar(ROOT)
    runs = {mode: [] for mode in modes}
    with tempfile.TemporaryDirectory(prefix="sparkscope-bench-") as tmp, \
            throwaway_stack(Path(tmp) / "stack", only=("influxdb", "telegraf")) as settings:
        for i in range(args.runs):
            for mode in modes:
                conf = annotator_properties(settings, jar) if mode == "with" else {}
                result = run(settings, args.tasks, conf, Path(tmp) / f"{mode}-{i}.log")
                runs[mode].append(result)
                print(f"run {i + 1}/{args.runs} {mode:7} annotator: {result['seconds']:7.2f} s  "
                      f"({result['app_id']})", flush=True)
        last = runs["with"][-1]
        written = influx.query(settings.influx_admin, f'SELECT count("text") FROM /^sparkscope_/ '
                               f'WHERE "applicationid" = \'{last["app_id"]}\'', settings.database)
    median = {m: statistics.median(r["seconds"] for r in rs) for m, rs in runs.items()}
    print(f"\n{args.tasks} tasks, local[2], median of {args.runs} run(s) per arm:")
    if "without" in median:
        print(f"  job time without annotator {median['without']:.2f} s, with {median['with']:.2f} s, "
              f"ratio {median['with'] / median['without']:.3f}")
    else:
        print(f"  job time with the annotator {median['with']:.2f} s (no runs without: --only-with)")
    ours = [r["listeners"][LISTENER_CLASS] for r in runs["with"] if LISTENER_CLASS in r["listeners"]]
    if ours:
        mean_us = statistics.median(o["mean_us"] for o in ours)
        p99_us = statistics.median(o["p99_us"] for o in ours)
        print(f"  annotator on the bus thread: {ours[-1]['count']} events, mean {mean_us:.1f} us, "
              f"p99 {p99_us:.1f} us per event: it absorbs ~{1e6 / mean_us:,.0f} events/s")
        others = {n: d["mean_us"] for n, d in last["listeners"].items() if n != LISTENER_CLASS}
        print("  for scale, Spark's own listeners (mean us/event): "
              + ", ".join(f"{n.rsplit('.', 1)[-1]} {v:.1f}" for n, v in sorted(others.items())))
    else:
        print("  the annotator's timer was not found: was the listener attached?")
    print(f"  annotation points written: {sum(s['values'][0][1] for s in written)}")
    for mode, rs in runs.items():
        dropped = {q: max(r["dropped"].get(q, 0) for r in rs) for q in rs[0]["dropped"]}
        print(f"  dropped listener-bus events, {mode} annotator: "
              + ", ".join(f"{q}={c}" for q, c in sorted(dropped.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
