#!/usr/bin/env python3
"""Series a long-running streaming application adds to InfluxDB through the
annotator.

Runs tests/jobs/streaming_job.py (rate source, 0.5 s trigger, local-cluster)
for --minutes on a throwaway stack and samples, every --every seconds, the
series of the annotator's measurements for that application (SHOW SERIES
EXACT CARDINALITY) next to the entities annotated so far. Prints both, the
growth per hour, and what the earlier schema (ids and job group as tags,
RUNNING and final points in separate series) would have made of the same
entities: 2 series per query, job and stage attempt (RUNNING + final), plus
the application's 2 and 2 per executor. The query's own measurements
(progress per batch, state per operator, start and end) are counted apart,
with the progress points stored: hundreds of batches must stay a handful of
series. After the stop, the series once the query's end is written.

    .venv/bin/python bench/streaming_series.py --minutes 5
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from sparkscope.provision.annotator_jar import ensure_annotator_jar
from sparkscope.spark.conf import annotator_properties, sparkscope_properties
from sparkscope.spark.submit import spark_env, submit_argv
from sparkscope.store import influx
from sparkscope_testkit.sandbox import throwaway_stack

ROOT = Path(__file__).resolve().parents[1]

JOB = ROOT / "tests" / "jobs" / "streaming_job.py"
MEASUREMENTS = ("sparkscope_application", "sparkscope_query", "sparkscope_job", "sparkscope_stage",
                "sparkscope_executor")
# The streaming query's own (annotator StreamingQueries.java): tags application, query, operator.
STREAMING = ("sparkscope_streaming", "sparkscope_streaming_state", "sparkscope_streaming_query",
             "sparkscope_streaming_end")


def sample(settings, app_id: str) -> dict[str, int]:
    def q(statement: str) -> list[dict]:
        return influx.query(settings.influx_admin, statement, settings.database)

    where = f'"applicationid" = {influx.string_literal(app_id)}'

    def cardinality(measurements) -> int:
        return sum(v[0] for m in measurements
                   for s in q(f'SHOW SERIES EXACT CARDINALITY FROM "{m}" WHERE {where}') for v in s["values"])

    series = cardinality(MEASUREMENTS)
    progress = q(f'SELECT count("batch_id") FROM "sparkscope_streaming" WHERE {where}')
    started = {}
    for m in MEASUREMENTS[1:]:
        result = q(f'SELECT count("text") FROM "{m}" WHERE {where} AND "status" = \'RUNNING\'')
        started[m] = result[0]["values"][0][1] if result else 0
    executors = q(f'SELECT count("text") FROM "sparkscope_executor" WHERE {where}')
    started["sparkscope_executor"] = executors[0]["values"][0][1] if executors else 0
    old = 2 + 2 * (started["sparkscope_query"] + started["sparkscope_job"] + started["sparkscope_stage"]) \
        + started["sparkscope_executor"]
    return {"series": series, "queries": started["sparkscope_query"], "jobs": started["sparkscope_job"],
            "stages": started["sparkscope_stage"], "old_schema_series": old,
            "stream_series": cardinality(STREAMING), "progress_points": progress[0]["values"][0][1] if progress else 0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--every", type=float, default=30.0, help="seconds between samples")
    args = parser.parse_args()
    jar = ensure_annotator_jar(ROOT)
    with tempfile.TemporaryDirectory(prefix="sparkscope-bench-") as tmp, \
            throwaway_stack(Path(tmp) / "stack", only=("influxdb", "telegraf")) as settings:
        stop_file = Path(tmp) / "stop"
        props = sparkscope_properties(settings, period_s=5)
        props.update(annotator_properties(settings, jar))
        log = Path(tmp) / "streaming.log"
        proc = subprocess.Popen(submit_argv(JOB, "local-cluster[2,1,1024]", props, [str(stop_file)]),
                                env=spark_env(log), stdout=subprocess.PIPE, stderr=open(log, "w"), text=True)
        app_id, batches = None, [-1]
        first_batch = threading.Event()

        def read_stdout() -> None:
            nonlocal app_id
            for line in proc.stdout:
                if line.startswith("APP_ID "):
                    app_id = line.split()[1]
                elif line.startswith("BATCH "):
                    batches[0] = int(line.split()[1])
                    first_batch.set()

        reader = threading.Thread(target=read_stdout, daemon=True)
        reader.start()
        if not first_batch.wait(240):
            raise SystemExit(f"no streaming batch after 240 s; see {log}")
        started = time.monotonic()
        samples = []
        print(f"{'minute':>6} {'batches':>7} {'queries':>7} {'jobs':>6} {'stages':>6} {'series':>6} "
              f"{'old schema':>10} {'stream points':>13} {'stream series':>13}", flush=True)
        while True:
            s = dict(sample(settings, app_id), minute=(time.monotonic() - started) / 60, batches=batches[0])
            samples.append(s)
            print(f"{s['minute']:6.1f} {s['batches']:7d} {s['queries']:7d} {s['jobs']:6d} {s['stages']:6d} "
                  f"{s['series']:6d} {s['old_schema_series']:10d} {s['progress_points']:13d} "
                  f"{s['stream_series']:13d}", flush=True)
            if s["minute"] >= args.minutes:
                break
            time.sleep(args.every)
        stop_file.touch()
        proc.wait(300)
        reader.join(10)
        time.sleep(5)  # Telegraf flushes every 2 s: the query's end and the application's
        stopped = sample(settings, app_id)
    first, last = samples[1] if len(samples) > 1 else samples[0], samples[-1]
    hours = max(1e-9, (last["minute"] - first["minute"]) / 60)
    print(f"\nstreaming app {app_id}: {last['batches'] + 1} batches in {last['minute']:.1f} min "
          f"(trigger 0.5 s)")
    print(f"  annotation series now: {first['series']} -> {last['series']} "
          f"({(last['series'] - first['series']) / hours:,.0f} per hour)")
    print(f"  earlier schema, same entities: {first['old_schema_series']} -> {last['old_schema_series']} "
          f"({(last['old_schema_series'] - first['old_schema_series']) / hours:,.0f} per hour, "
          f"{(last['old_schema_series'] - first['old_schema_series']) / hours * 24:,.0f} per day)")
    print(f"  streaming query's own series: {first['stream_series']} -> {last['stream_series']} while "
          f"{first['progress_points']} -> {last['progress_points']} batches were stored; "
          f"{stopped['stream_series']} once stopped (its end written)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
