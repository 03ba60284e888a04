"""Every shipped dashboard decodes strictly against Grafana 12's models
(tools/dashcheck, built on grafana-foundation-sdk): no field Grafana 12 does
not know, no value of the wrong type, per panel type. And the check is real:
it refuses a Grafana 10 heatmap tooltip, an unknown field and a wrong type,
and accepts the 12.x shape.

Grafana 13 converts the same JSON to its v2 schema on load: every dashboard
goes through that conversion (dashcheck -grafana13) with every panel, query,
variable, annotation and link surviving and the result decoding strictly
with the SDK's v2 models; a dashboard 12.4 takes and 13's conversion breaks
fails there and only there."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from sparkscope.provision import BuildError
from sparkscope_dev.dashcheck import check_dashboards
from sparkscope.process import quiet
from sparkscope.settings import ROOT
from sparkscope_testkit.sandbox import isolated_settings

DASHBOARDS = sorted((ROOT / "dashboards").glob("*.json"))
EXECUTORS = ROOT / "dashboards" / "spark-executors.json"
GRAFANA10_HEATMAP_TOOLTIP = {"show": True, "yHistogram": False}
GRAFANA12_HEATMAP_TOOLTIP = {"mode": "single", "yHistogram": False, "showColorScale": False}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    """The binary lands in the same cache as the stack's builds (SPARKSCOPE_CACHE_DIR or
    the default), so CI builds it once."""
    return isolated_settings(tmp_path_factory.mktemp("state")).cache_dir


@pytest.fixture(scope="module")
def check(cache_dir):
    """check(*paths) -> problem lines, by Grafana 12's v1 models."""
    return lambda *paths: check_dashboards(paths, cache_dir, quiet)


@pytest.fixture(scope="module")
def check13(cache_dir):
    """check13(*paths) -> problem lines, after Grafana 13's conversion, by its v2 models."""
    return lambda *paths: check_dashboards(paths, cache_dir, quiet, grafana13=True)


def panels(dashboard: dict):
    """Every panel, those inside collapsed rows too."""
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def the_heatmap(dashboard: dict) -> dict:
    (heatmap,) = [p for p in panels(dashboard) if p["type"] == "heatmap"]
    return heatmap


def names(panel: dict) -> str:
    """How a problem line names a panel."""
    return f"title={json.dumps(panel['title'])}"


def executors_with_heatmap_tooltip(tooltip: dict) -> dict:
    dashboard = json.loads(EXECUTORS.read_text())
    the_heatmap(dashboard)["options"]["tooltip"] = copy.deepcopy(tooltip)
    return dashboard


def write(tmp_path: Path, dashboard: dict) -> Path:
    path = tmp_path / "dashboard.json"
    path.write_text(json.dumps(dashboard, indent=2))
    return path


@pytest.mark.parametrize("dashboard", DASHBOARDS, ids=lambda p: p.name)
def test_dashboard_decodes_strictly_as_grafana12(check, dashboard):
    assert check(dashboard) == []


@pytest.mark.parametrize("dashboard", DASHBOARDS, ids=lambda p: p.name)
def test_dashboard_survives_grafana13s_conversion_and_decodes_strictly_as_v2(check13, dashboard):
    assert check13(dashboard) == []


def leaf_panels(dashboard: dict) -> list[dict]:
    return [p for p in panels(dashboard) if p["type"] != "row"]


def test_a_repeated_panel_id_passes_12_and_fails_13s_conversion(check, check13, tmp_path):
    # Grafana 12.4 renumbers a repeated id; 13 names each panel's v2 element by it and loses one.
    dashboard = json.loads(EXECUTORS.read_text())
    first, second = leaf_panels(dashboard)[:2]
    second["id"] = first["id"]
    path = write(tmp_path, dashboard)
    assert check(path) == []
    problems = check13(path)
    assert any(f"both become element panel-{first['id']}" in line for line in problems), problems
    assert any("panels lost" in line and "refuses a conversion that loses data" in line for line in problems)


def test_a_variable_sort_the_conversion_does_not_map_passes_12_and_fails_13(check, check13, tmp_path):
    dashboard = json.loads(EXECUTORS.read_text())
    variable = dashboard["templating"]["list"][0]
    variable["sort"] = 7  # natural ascending: Grafana 12 sorts by it, 13's conversion maps 0-4 only
    path = write(tmp_path, dashboard)
    assert check(path) == []
    assert any(f'variable "{variable["name"]}": sort 7 is lost' in line for line in check13(path))


def test_a_value_of_the_wrong_type_is_refused_by_the_v2_models(check13, tmp_path):
    dashboard = json.loads(EXECUTORS.read_text())
    panel = leaf_panels(dashboard)[0]
    panel["interval"] = 10  # a number where v2's queryOptions.interval is a string
    problems = check13(write(tmp_path, dashboard))
    assert any(f"elements[panel-{panel['id']}].spec.data.spec.queryOptions.interval" in line
               and "cannot unmarshal number" in line for line in problems), problems


def test_a_grafana10_heatmap_tooltip_is_refused(check, tmp_path):
    dashboard = executors_with_heatmap_tooltip(GRAFANA10_HEATMAP_TOOLTIP)
    problems = check(write(tmp_path, dashboard))
    heatmap = the_heatmap(dashboard)
    assert any(names(heatmap) in line and ".options.tooltip" in line and "unexpected field 'show'" in line
               for line in problems), problems


def test_a_grafana12_heatmap_tooltip_is_accepted(check, tmp_path):
    dashboard = executors_with_heatmap_tooltip(GRAFANA12_HEATMAP_TOOLTIP)
    problems = check(write(tmp_path, dashboard))
    assert [line for line in problems if names(the_heatmap(dashboard)) in line] == []


def test_an_unknown_top_level_field_is_refused(check, tmp_path):
    dashboard = executors_with_heatmap_tooltip(GRAFANA12_HEATMAP_TOOLTIP)
    dashboard["sparkscopeVersion"] = 1
    path = write(tmp_path, dashboard)
    assert f"{path}: Dashboard: unexpected field 'sparkscopeVersion'" in check(path)


def test_a_string_panel_width_is_refused(check, tmp_path):
    dashboard = executors_with_heatmap_tooltip(GRAFANA12_HEATMAP_TOOLTIP)
    panel = next(p for p in panels(dashboard) if p["type"] == "timeseries")
    panel["gridPos"]["w"] = str(panel["gridPos"]["w"])
    problems = check(write(tmp_path, dashboard))
    assert any(names(panel) in line and ".gridPos.w" in line and "cannot unmarshal string" in line
               for line in problems), problems


def test_a_panel_wider_than_the_grid_is_refused(check, tmp_path):
    dashboard = executors_with_heatmap_tooltip(GRAFANA12_HEATMAP_TOOLTIP)
    panel = next(p for p in panels(dashboard) if p["type"] == "stat")
    panel["gridPos"]["w"] = 25
    problems = check(write(tmp_path, dashboard))
    assert any(names(panel) in line and ".gridPos.w): must be <= 24" in line for line in problems), problems


def test_field_options_and_overrides_are_decoded_strictly(check, tmp_path):
    # The SDK decodes fieldConfig loosely apart from defaults.custom; dashcheck does the rest.
    dashboard = executors_with_heatmap_tooltip(GRAFANA12_HEATMAP_TOOLTIP)
    panel = next(p for p in panels(dashboard) if p["type"] == "timeseries")
    panel["fieldConfig"]["defaults"]["units"] = "bytes"
    panel["fieldConfig"].setdefault("overrides", []).append({
        "matcher": {"id": "byName", "options": "heap"},
        "properties": [{"id": "custom.lineWidth", "value": "thick"}],
    })
    problems = [line for line in check(write(tmp_path, dashboard)) if names(panel) in line]
    assert any(".fieldConfig.defaults" in line and "unexpected field 'units'" in line
               for line in problems), problems
    assert any(".properties[0].lineWidth" in line and "cannot unmarshal string" in line
               for line in problems), problems


def test_an_unreadable_dashboard_is_an_error_not_a_pass(check, tmp_path):
    with pytest.raises(BuildError, match="no-such-dashboard.json"):
        check(tmp_path / "no-such-dashboard.json")
