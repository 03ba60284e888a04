"""Every generated file is what its generator writes, checked by the one
command that runs them all in order (python -m sparkscope.generate --check):
the dashboards, the alert rules (from the dashboards' panel ids), the rollups
setup, telegraf.conf's generated blocks, the annotator's Schema.java once its
generator is here, and the chart's copies of all of them."""

from __future__ import annotations

import shutil

from sparkscope.generate import steps
from sparkscope.settings import ROOT

# What the steps read and write, copied for a check that must not touch the repository.
COPIED = ("dashboards", "dashboards-prometheus", "grafana", "influxdb", "telegraf", "spark-conf", "charts")


def test_every_generated_file_is_what_the_generators_write():
    stale = steps.run().stale()
    assert not stale, "stale generated files:\n  " + "\n  ".join(stale) + f"\nrun: {steps.COMMAND}"


def repository_copy(tmp_path):
    for rel in COPIED:
        shutil.copytree(ROOT / rel, tmp_path / rel)
    if steps.java_schema is not None:
        target = steps.java_schema.TARGET.relative_to(ROOT)
        (tmp_path / target).parent.mkdir(parents=True)
        shutil.copy(steps.java_schema.TARGET, tmp_path / target)
    return tmp_path


def test_the_check_names_each_edited_file_and_the_command_and_writes_nothing(tmp_path, capsys):
    root = repository_copy(tmp_path)
    edits = {
        "dashboards/spark-application.json": lambda text: text.replace('"title"', '"titel"', 1),
        "influxdb/rollups.setup": lambda text: text + "# by hand\n",
        # Outside the generated blocks: kept, and the chart's copy of it is stale.
        "telegraf/telegraf.conf": lambda text: text.replace("## BEGIN GENERATED", "# edited\n## BEGIN GENERATED", 1),
    }
    for rel, edit in edits.items():
        (root / rel).write_text(edit((root / rel).read_text()))
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}

    assert steps.main(["--check", "--root", str(root)]) == 1
    out, err = capsys.readouterr()
    assert [line for line in out.splitlines() if line.startswith("stale: ")] == [
        "stale: charts/sparkscope/files/telegraf/telegraf.conf",
        "stale: dashboards/spark-application.json",
        "stale: influxdb/rollups.setup",
    ]
    assert f"run {steps.COMMAND}" in err
    assert len([line for line in out.splitlines() if not line.startswith("stale: ")]) == len(steps.STEPS)
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before

    assert steps.main(["--root", str(root)]) == 0
    assert steps.main(["--check", "--root", str(root)]) == 0
    assert (root / "dashboards/spark-application.json").read_bytes() == (
        ROOT / "dashboards/spark-application.json").read_bytes()
