"""Telegraf's host inputs record the machine Spark runs on."""

from __future__ import annotations


def test_host_cpu_and_memory_are_recorded_during_the_run(stack, metrics_run):
    window = f"time >= {metrics_run.started_ms}ms AND time <= {metrics_run.ended_ms + 15000}ms"
    cpu = stack.influx(f'SELECT max("usage_active") FROM "cpu" WHERE "cpu" = \'cpu-total\' AND {window}')
    mem = stack.influx(f'SELECT max("used") FROM "mem" WHERE {window}')
    assert cpu and 0 < cpu[0]["values"][0][1] <= 100
    assert mem and mem[0]["values"][0][1] > 0
