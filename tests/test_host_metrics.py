"""Telegraf's host inputs record the machine and the Spark JVMs on it."""

from __future__ import annotations


def test_host_cpu_and_memory_are_recorded_during_the_run(stack, metrics_run):
    window = f"time >= {metrics_run.started_ms}ms AND time <= {metrics_run.ended_ms + 15000}ms"
    cpu = stack.influx(f'SELECT max("usage_active") FROM "cpu" WHERE "cpu" = \'cpu-total\' AND {window}')
    mem = stack.influx(f'SELECT max("used") FROM "mem" WHERE {window}')
    assert cpu and 0 < cpu[0]["values"][0][1] <= 100
    assert mem and mem[0]["values"][0][1] > 0


def test_spark_jvms_are_seen_by_procstat(stack, metrics_run):
    window = f"time >= {metrics_run.started_ms}ms AND time <= {metrics_run.ended_ms + 15000}ms"
    rows = stack.influx(f'SELECT max("memory_rss") FROM "procstat" WHERE {window} GROUP BY "process_name"')
    assert rows, "procstat recorded no Spark JVM while the job ran"
    assert all(r["values"][0][1] > 50e6 for r in rows), rows
