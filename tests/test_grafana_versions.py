"""The Grafana versions come from one place (src/sparkscope/versions.py): compose,
the chart, the fakes, the README and the docs say the same, and no file of the
repository points at notes outside it."""

from __future__ import annotations

import re
import subprocess

import yaml

from sparkscope import versions
from sparkscope.settings import ROOT


def numbers(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def test_the_pins_are_a_13_patch_that_was_not_pulled_and_the_last_12_line():
    assert re.fullmatch(r"13\.\d+\.\d+", versions.GRAFANA) and numbers(versions.GRAFANA) >= (13, 0, 1)
    assert re.fullmatch(r"12\.4\.\d+", versions.GRAFANA_12)


def test_compose_and_the_chart_pin_the_version():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["grafana"]
    assert compose["image"] == f"grafana/grafana:{versions.GRAFANA}"
    image = yaml.safe_load((ROOT / "charts" / "sparkscope" / "values.yaml").read_text())["grafana"]["image"]
    assert (image["repository"], image["tag"]) == ("grafana/grafana", versions.GRAFANA)


def test_the_readme_and_the_docs_name_both_versions():
    readme = (ROOT / "README.md").read_text()
    assert f"grafana/grafana:{versions.GRAFANA}" in readme and versions.GRAFANA_12 in readme
    for doc in ("grafana.md", "upgrading.md"):
        text = (ROOT / "docs" / doc).read_text()
        assert versions.GRAFANA in text and versions.GRAFANA_12 in text, doc
    assert f"Grafana {versions.GRAFANA}" in (ROOT / "docs" / "kubernetes.md").read_text()


def test_no_other_grafana_version_is_pinned_anywhere():
    # Any grafana/grafana:<x> in a tracked file is one of the two.
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    pinned = set()
    for name in tracked:
        path = ROOT / name
        if path.suffix in {".yml", ".yaml", ".md", ".py", ".json", ".txt"} and path.is_file():
            pinned |= set(re.findall(r"grafana/grafana:([0-9][\w.]*)", path.read_text(errors="replace")))
    assert pinned <= {versions.GRAFANA, versions.GRAFANA_12}, pinned


def test_no_file_points_at_notes_outside_the_repository():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    outside = [name for name in tracked if (ROOT / name).is_file() and (ROOT / name).suffix in {".py", ".md", ".go"}
               and re.search("/work/" + "shared|\\.\\./" + "shared/|GRAFANA1[23]\\.md",
                             (ROOT / name).read_text(errors="replace"))]
    assert outside == []
