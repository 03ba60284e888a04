"""Grafana serves the provisioned datasource. The dashboards and their panel
queries are tested in test_dashboards.py."""

from __future__ import annotations

import pytest

from conftest import GRAFANA_BUILD_ERROR

DATASOURCE_UID = "sparkscope-influxdb"


def test_native_grafana_was_built(stack):
    assert stack.grafana is not None, (
        "the native Grafana backend could not be built, so Grafana was NOT tested; panel queries "
        "ran straight against InfluxDB instead. Cause: " + "; ".join(GRAFANA_BUILD_ERROR)
    )


@pytest.fixture(scope="module")
def grafana(stack):
    if stack.grafana is None:
        pytest.skip("native Grafana unavailable: see test_native_grafana_was_built")
    return stack.grafana


def test_datasource_is_provisioned_and_healthy(grafana):
    ds = grafana.request(f"/api/datasources/uid/{DATASOURCE_UID}")
    assert ds["type"] == "influxdb" and ds["jsonData"]["dbName"] == "spark"
    health = grafana.request(f"/api/datasources/uid/{DATASOURCE_UID}/health")
    assert health["status"] == "OK", health
