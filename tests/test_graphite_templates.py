"""Telegraf's Graphite templates turn real Spark metric names into the stored
schema of DESIGN.md. Every case goes through the real Telegraf into InfluxDB."""

from __future__ import annotations

import time

import pytest

# (line as Spark sends it, measurement, tags expected besides host)
CASES = [
    # standalone app id, executor source
    ("spark.app-20991231235959-0001.1.executor.threadpool.activeTasks",
     "threadpool.activeTasks",
     {"username": "spark", "applicationid": "app-20991231235959-0001", "executorid": "1", "namespace": "executor"}),
    # local mode: everything is the driver
    ("spark.local-4102444799001.driver.ExecutorMetrics.JVMHeapMemory",
     "JVMHeapMemory",
     {"username": "spark", "applicationid": "local-4102444799001", "executorid": "driver",
      "namespace": "ExecutorMetrics"}),
    # YARN id with underscores; a metric with quotes and dashes
    ("spark.application_4102444799000_0042.7.jvm.pools.CodeHeap-'non-nmethods'.used",
     "pools.CodeHeap-'non-nmethods'.used",
     {"username": "spark", "applicationid": "application_4102444799000_0042", "executorid": "7",
      "namespace": "jvm"}),
    # Kubernetes id; a metric with many more dots
    ("spark.spark-0123456789abcdef0123456789abcdef.driver.LiveListenerBus.listenerProcessingTime"
     ".org.apache.spark.HeartbeatReceiver.p99",
     "listenerProcessingTime.org.apache.spark.HeartbeatReceiver.p99",
     {"username": "spark", "applicationid": "spark-0123456789abcdef0123456789abcdef",
      "executorid": "driver", "namespace": "LiveListenerBus"}),
    # a custom prefix
    ("etl_prod.app-20991231235959-0002.0.ExecutorMetrics.OnHeapUnifiedMemory",
     "OnHeapUnifiedMemory",
     {"username": "etl_prod", "applicationid": "app-20991231235959-0002", "executorid": "0",
      "namespace": "ExecutorMetrics"}),
    # prefix forgotten: the same schema, username "none"
    ("app-20991231235959-0003.2.executor.threadpool.activeTasks",
     "threadpool.activeTasks",
     {"username": "none", "applicationid": "app-20991231235959-0003", "executorid": "2",
      "namespace": "executor"}),
    ("local-4102444799002.driver.jvm.heap.used",
     "heap.used",
     {"username": "none", "applicationid": "local-4102444799002", "executorid": "driver", "namespace": "jvm"}),
    ("application_4102444799000_0043.3.ExecutorMetrics.ProcessTreeJVMRSSMemory",
     "ProcessTreeJVMRSSMemory",
     {"username": "none", "applicationid": "application_4102444799000_0043", "executorid": "3",
      "namespace": "ExecutorMetrics"}),
    ("spark-fedcba9876543210fedcba9876543210.5.executor.filesystem.file.read_bytes",
     "filesystem.file.read_bytes",
     {"username": "none", "applicationid": "spark-fedcba9876543210fedcba9876543210", "executorid": "5",
      "namespace": "executor"}),
    # standalone daemons carry no app id
    ("sparktpl.worker.coresFree", "coresFree", {"username": "sparktpl", "namespace": "worker"}),
    ("sparktpl.master.aliveWorkers", "aliveWorkers", {"username": "sparktpl", "namespace": "master"}),
    ("sparktpl.jvm.heap.used", "heap.used", {"username": "sparktpl", "namespace": "jvm"}),
    ("sparktpl.application.nightly_etl.4102444799003.cores", "cores",
     {"username": "sparktpl", "namespace": "application", "appname": "nightly_etl",
      "appstarttime": "4102444799003"}),
]


def stored_tags(stack, measurement: str, where: str) -> list[dict[str, str]]:
    series = stack.influx(f'SELECT * FROM "{measurement}" WHERE {where} GROUP BY *')
    return [{k: v for k, v in s.get("tags", {}).items() if v and k != "host"} for s in series]


@pytest.fixture(scope="module")
def sent(stack):
    now = int(time.time())
    stack.send_graphite("".join(f"{name} {i + 1} {now}\n" for i, (name, _, _) in enumerate(CASES)))
    return now


@pytest.mark.parametrize("name,measurement,tags", CASES, ids=[c[0][:60] for c in CASES])
def test_spark_metric_name_yields_schema(stack, sent, name, measurement, tags):
    value = [c[0] for c in CASES].index(name) + 1
    key, val = next((k, v) for k, v in tags.items() if k in ("applicationid", "username"))
    where = f"\"{key}\" = '{val}' AND time = {sent}s"
    stack.wait_for(f'SELECT "value" FROM "{measurement}" WHERE {where}', lambda s: bool(s))
    assert tags in stored_tags(stack, measurement, where)
    rows = stack.influx(f'SELECT "value" FROM "{measurement}" WHERE {where}')[0]["values"]
    assert value in [row[1] for row in rows]
