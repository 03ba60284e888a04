"""Upgrading InfluxDB in place, as a user of an older sparkscope does: a data
directory that a real InfluxDB 1.8.10 (what sparkscope pinned until November
2026) filled through the stack's own setup and Telegraf comes up on the
InfluxDB sparkscope runs now with every point, user, grant, retention policy
and continuous query, and the stack goes on writing to it; what Spark sent
while InfluxDB was being swapped waits in Telegraf's buffer and arrives."""

from __future__ import annotations

import dataclasses
import socket
import time

import pytest

from sparkscope.store import influx
from sparkscope import versions
from sparkscope.process import quiet, wait_until
from sparkscope.stack import rollups
from sparkscope.stack.native import NativeBackend
from sparkscope.provision.go import ensure_previous_influxd
from sparkscope_testkit.sandbox import isolated_settings, terminated_as_exit

APP = "app-20261127120000-0007"


def graphite_lines(start_s: int, end_s: int, executors=("1", "2")) -> str:
    """What Spark's GraphiteSink sends for two executors every 5 s (names the filter keeps)."""
    out = []
    for t in range(start_s, end_s, 5):
        for executor in executors:
            out.append(f"spark.{APP}.{executor}.ExecutorMetrics.JVMHeapMemory {100_000_000 + t % 977} {t}")
            out.append(f"spark.{APP}.{executor}.executor.threadpool.activeTasks {t % 3} {t}")
    return "\n".join(out) + "\n"


def send_graphite(settings, text: str) -> None:
    with socket.create_connection((settings.graphite_host, settings.graphite_port), 5) as s:
        s.sendall(text.encode())


def inventory(settings) -> dict:
    """Everything an upgrade must keep, as the admin reads it: users and their
    grants, retention policies, continuous queries, and per policy and
    measurement the number of points of each field."""
    def q(statement: str, database: str | None = settings.database) -> list[dict]:
        return influx.query(settings.influx_admin, statement, database)

    users = sorted(tuple(row) for s in q("SHOW USERS", None) for row in s["values"])
    grants = {user[0]: sorted(tuple(row) for s in q(f"SHOW GRANTS FOR {influx.identifier(user[0])}", None)
                              for row in s.get("values", []))
              for user in users}
    # By column: 1.12 added columns (future and past limits) to SHOW RETENTION POLICIES.
    policies = sorted((row for row in influx.rows(q("SHOW RETENTION POLICIES"))), key=lambda row: row["name"])
    measurements = [row[0] for s in q("SHOW MEASUREMENTS") for row in s["values"]]
    points = {}
    for policy in (p["name"] for p in policies):
        for measurement in measurements:
            for series in q(f"SELECT count(*) FROM {influx.identifier(policy)}.{influx.identifier(measurement)}"):
                points[(policy, measurement)] = dict(zip(series["columns"][1:], series["values"][0][1:]))
    return {"users": users, "grants": grants, "policies": policies,
            "queries": rollups.existing_queries(settings.influx_admin, settings.database), "points": points}


def heap_points(settings) -> int:
    series = influx.query(settings.influx_admin, 'SELECT count("value") FROM "JVMHeapMemory"', settings.database)
    return series[0]["values"][0][1] if series else 0


def test_a_data_directory_written_by_influxdb_1_8_comes_up_whole_on_the_current_influxdb(tmp_path):
    old_influxd = ensure_previous_influxd(isolated_settings(tmp_path / "probe").cache_dir, progress=quiet)
    old = isolated_settings(tmp_path / "state", INFLUXD_BINARY=str(old_influxd))
    new = dataclasses.replace(old, influxd_binary="")  # the same state dir, ports and users
    now = int(time.time())
    with terminated_as_exit():
        try:
            NativeBackend(old).up(only=("influxdb", "telegraf"), progress=quiet)
            assert influx.server_version(old.influx_url) in (None, versions.INFLUXDB_PREVIOUS)
            # Ten minutes of two executors through the stack's own Telegraf, and the
            # rollups the continuous queries would have made of them (the stack's own SELECTs).
            send_graphite(old, graphite_lines(now - 600, now))
            assert wait_until(lambda: heap_points(old) == 2 * 120, 60), heap_points(old)
            for statement in rollups.backfill_statements(old.database, rollups.LEVELS[1], (now - 600) * 1000,
                                                         now // 60 * 60 * 1000):
                influx.query(old.influx_admin, statement, old.database)
            before = inventory(old)
            assert before["points"][("sparkscope_1m", "JVMHeapMemory")]["count_value"] >= 8, before["points"]
            assert {u[0] for u in before["users"]} == {old.influx_admin_user, old.influx_write_user,
                                                      old.influx_read_user}
            assert before["queries"], "the 1.8.10 setup made no continuous queries"

            # The upgrade: InfluxDB alone is stopped and started on the new binary, as
            # `./sparkscope up` after a `git pull` does; Telegraf keeps running.
            NativeBackend(old).down(only=("influxdb",), progress=quiet)
            send_graphite(old, graphite_lines(now, now + 30))  # Spark goes on meanwhile
            NativeBackend(new).up(only=("influxdb",), progress=quiet)

            assert influx.server_version(new.influx_url) == versions.INFLUXDB
            after = inventory(new)
            for key in ("users", "grants", "queries"):
                assert after[key] == before[key], key
            assert len(after["policies"]) == len(before["policies"])
            assert [{column: p[column] for column in old_policy} for p, old_policy in
                    zip(after["policies"], before["policies"])] == before["policies"]
            for where, counts in before["points"].items():
                if where != ("sparkscope", "JVMHeapMemory") and where != ("sparkscope", "threadpool.activeTasks"):
                    assert after["points"].get(where) == counts, where
            # What Spark sent during the swap was buffered by Telegraf and is stored now, beside the old points.
            assert wait_until(lambda: heap_points(new) == 2 * 126, 60), heap_points(new)
            # The users work as before: the reader reads, and may not write.
            reader = new.influx_reader
            assert influx.query(reader, 'SELECT count("value") FROM "JVMHeapMemory"', new.database)
            with pytest.raises(influx.InfluxError):
                influx.write(reader, new.database, f"JVMHeapMemory,applicationid={APP} value=1 {now}")
        finally:
            NativeBackend(old).down(progress=quiet)
