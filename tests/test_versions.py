"""One place for versions (src/sparkscope/versions.py): compose, the Helm
chart, the native runner, the Python package and the docs a user reads all
say the versions it holds, so a bump there that misses a file fails here."""

from __future__ import annotations

import re
import subprocess
import yaml

from sparkscope import versions
from sparkscope.settings import ROOT

# The images each versions.py constant pins, by compose service and chart values key.
IMAGES = {
    "influxdb": ("influxdb", versions.INFLUXDB),
    "telegraf": ("telegraf", versions.TELEGRAF),
    "grafana": ("grafana/grafana", versions.GRAFANA),
}
# Where a user reads which images and versions run: every image reference and
# version sentence in them must be the pinned one.
UPGRADING = "docs/upgrading.md"
DOCS = ("README.md", "docs/scale.md", "docs/kubernetes.md", "docs/stack.md", "docs/demo.md", "docs/development.md", UPGRADING,
        "charts/sparkscope/Chart.yaml", "charts/sparkscope/values.yaml", "docker-compose.yml", ".env.example")


def image_disagreements(compose: dict, chart_values: dict) -> list[str]:
    out = []
    for service, (repository, version) in IMAGES.items():
        wanted = f"{repository}:{version}"
        for name, spec in compose["services"].items():
            image = spec.get("image", "")
            if image.split(":")[0] == repository and image != wanted:
                out.append(f"docker-compose.yml: service {name} runs {image}, versions.py says {wanted}")
        image = chart_values[service]["image"]
        if (image["repository"], str(image["tag"])) != (repository, version):
            out.append(f"chart values.yaml: {service} is {image['repository']}:{image['tag']}, "
                       f"versions.py says {wanted}")
    return out


def text_disagreements(name: str, text: str) -> list[str]:
    """Image references (`influxdb:1.8.10`) and version sentences (`InfluxDB 1.8.10`,
    `Telegraf 1.37.2`) in a document that name another version than the pin. The
    version users upgrade from may be named in the upgrade guide."""
    out = []
    for repository, version in IMAGES.values():
        also = {versions.GRAFANA_12} if repository == "grafana/grafana" else set()  # the other one supported
        for found in re.findall(rf"(?<![\w/.-]){re.escape(repository)}:(\d+\.\d+(?:\.\d+)?)", text):
            if found != version and found not in also:
                out.append(f"{name}: {repository}:{found}, versions.py says {repository}:{version}")
    for product, version, upgraded_from, also in (
            ("InfluxDB", versions.INFLUXDB, {versions.INFLUXDB_PREVIOUS}, set()),
            ("Telegraf", versions.TELEGRAF, set(), set()),
            ("Grafana", versions.GRAFANA, set(), {versions.GRAFANA_12}),
            ("Thanos", versions.THANOS, set(), set())):
        for found in re.findall(rf"{product} v?(\d+\.\d+\.\d+)", text):
            if found != version and found not in also and not (found in upgraded_from and name == UPGRADING):
                out.append(f"{name}: {product} {found}, versions.py says {version}")
    return out


def test_compose_and_the_chart_pin_the_images_versions_py_names():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    values = yaml.safe_load((ROOT / "charts" / "sparkscope" / "values.yaml").read_text())
    assert image_disagreements(compose, values) == []


def test_a_compose_file_or_chart_left_on_the_old_influxdb_is_caught():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    values = yaml.safe_load((ROOT / "charts" / "sparkscope" / "values.yaml").read_text())
    compose["services"]["influxdb-setup"]["image"] = "influxdb:1.8.10"
    values["telegraf"]["image"]["tag"] = "1.36.0"
    found = image_disagreements(compose, values)
    assert any("influxdb-setup runs influxdb:1.8.10" in line for line in found), found
    assert any("telegraf is telegraf:1.36.0" in line for line in found), found


def test_the_docs_a_user_reads_name_the_pinned_versions():
    problems = [line for name in DOCS if (ROOT / name).exists()
                for line in text_disagreements(name, (ROOT / name).read_text())]
    assert problems == []


def test_a_readme_naming_an_old_image_or_version_is_caught():
    found = text_disagreements("README.md", f"Images are pinned: `influxdb:1.8.10`, `telegraf:{versions.TELEGRAF}`; "
                                            "the stack runs InfluxDB 1.12.4.")
    assert found == [f"README.md: influxdb:1.8.10, versions.py says influxdb:{versions.INFLUXDB}",
                     f"README.md: InfluxDB 1.12.4, versions.py says {versions.INFLUXDB}"]


def test_a_scale_guide_naming_another_thanos_than_the_one_built_is_caught():
    found = text_disagreements("docs/scale.md", f"It builds Thanos v{versions.THANOS} once; Thanos 0.39.2 had no "
                                                 "capnproto port.")
    assert found == [f"docs/scale.md: Thanos 0.39.2, versions.py says {versions.THANOS}"]


def test_the_python_package_pins_the_spark_the_suite_runs():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.findall(r'"pyspark==([\d.]+)"', pyproject) == [versions.SPARK]


# --- Grafana: the two lines users run

def numbers(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def test_the_pins_are_a_13_patch_that_was_not_pulled_and_the_last_12_line():
    assert re.fullmatch(r"13\.\d+\.\d+", versions.GRAFANA) and numbers(versions.GRAFANA) >= (13, 0, 1)
    assert re.fullmatch(r"12\.4\.\d+", versions.GRAFANA_12)


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
