"""The README is read to the end: it stays short, every relative link in it and
in docs/ leads to a file (and a heading) in this repository, the `top` screen it
shows is what the view draws, and it names the test command CI runs."""

from __future__ import annotations

import calendar
import re
import time
from pathlib import Path

import pytest

from sparkscope.demo.run import APP_NAME
from sparkscope.settings import ROOT
from sparkscope.top.data import Activity, ExecutorNow, Run, Snapshot
from sparkscope.top.view import Screen, as_text

README_MAX_LINES = 300
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|^\[[^\]]+\]:\s*(\S+)", re.M)
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def prose(text: str) -> str:
    """The text outside fenced code blocks (a `# comment` there is no heading)."""
    return FENCE.sub("", text)


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {anchor(line.lstrip("#")) for line in prose(path.read_text()).splitlines() if line.startswith("#")}


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    """Each relative link of a Markdown file that does not lead to a file or
    folder inside `root`, or to a heading of the Markdown file it names."""
    out = []
    for match in LINK.finditer(prose(path.read_text())):
        target = match.group(1) or match.group(2)
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        name, _, fragment = target.partition("#")
        where = (path.parent / name).resolve() if name else path
        if not where.is_relative_to(root.resolve()):
            out.append(f"{path.name}: {target} is outside the repository")
        elif not where.exists():
            out.append(f"{path.name}: {target} does not exist")
        elif fragment and where.suffix == ".md" and fragment not in anchors(where):
            out.append(f"{path.name}: {target}: no such heading in {where.name}")
    return out


def test_the_readme_is_at_most_300_lines():
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move reference material to docs/"


def test_every_relative_link_in_the_readme_and_docs_resolves_inside_the_repository():
    assert [line for path in documents() for line in broken_links(path)] == []


def test_a_broken_link_a_missing_heading_and_a_link_outside_are_caught(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "real.md").write_text("# Real\n\n## A section: here\n")
    page = tmp_path / "README.md"
    page.write_text("[ok](docs/real.md) [ok](docs/real.md#a-section-here) [web](https://example.com)\n"
                    "[gone](docs/gone.md) [no heading](docs/real.md#nowhere) [out](../elsewhere/notes.md)\n"
                    "```\n[in code](not/checked.md)\n```\n")
    assert broken_links(page, tmp_path) == ["README.md: docs/gone.md does not exist",
                                            "README.md: docs/real.md#nowhere: no such heading in real.md",
                                            "README.md: ../elsewhere/notes.md is outside the repository"]


def test_the_readme_names_the_test_command_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^exec \./sparkscope test$", ci, re.M)
    blocks = re.findall(r"^```sh\n(.*?)^```", (ROOT / "README.md").read_text(), re.M | re.S)
    assert any(re.search(r"^\./sparkscope test\s*$", block, re.M) for block in blocks)


# --- the `top` screen the README shows ----------------------------------------------------

GiB, MiB = 2**30, 2**20


def demo_snapshot() -> Snapshot:
    """The demo's TPC-DS run 2m41s in, as the reader would have it: two
    executors of 1 core and the driver, query 41 (q14a) running."""
    start = calendar.timegm((2026, 11, 27, 10, 15, 0)) * 1000

    def executor(executor_id: str, heap: float, tasks, gc: float, read, write, history, rss: float,
                 cores=1) -> ExecutorNow:
        return ExecutorNow(executor_id, heap_used=heap, active_tasks=tasks, cores=cores, heap_max=989 * MiB,
                           rss_jvm=rss, rss_python=0, rss_other=0, execution=heap * 0.3, storage=heap * 0.05,
                           gc_ms_per_s=gc, shuffle_read=read, shuffle_write=write, heap_history=history,
                           last_ms=start + 160_000)

    executors = [executor("0", 612 * MiB, 1, 48, 21 * MiB, 9 * MiB, [200 * MiB, 400 * MiB, 612 * MiB], 1190 * MiB),
                 executor("1", 455 * MiB, 1, 37, 19 * MiB, 8 * MiB, [300 * MiB, 450 * MiB, 455 * MiB], 1120 * MiB),
                 executor("driver", 231 * MiB, None, 6, None, None, [150 * MiB, 170 * MiB, 231 * MiB], 690 * MiB,
                          cores=None)]
    running = {"query": [Activity("query", "41", "query 41 running: TPC-DS q14a", start + 140_000, "RUNNING")],
               "job": [Activity("job", "97", "job 97 running [group tpcds-q14a]: TPC-DS q14a", start + 150_000,
                                "RUNNING")],
               "stage": [Activity("stage", "171.0", "stage 171.0 running: TPC-DS q14a (200 tasks)",
                                  start + 152_000, "RUNNING")]}
    straggler = Activity("stage", "133.0", "stage 133.0: ...", start + 100_000, "SUCCEEDED",
                         {"name": "TPC-DS q11", "task_max_ms": 6_400, "task_p50_ms": 310,
                          "slowest_executor": "1", "straggler": "true"})
    return Snapshot(run=Run("app-20261127101500-0000", APP_NAME, start), at_ms=start + 161_000,
                    executors=executors, running=running, last={}, stragglers=[straggler], removed=[],
                    interval_s=5)


@pytest.fixture
def utc(monkeypatch):
    """The screen's clock in UTC, as the README prints it."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_the_top_screen_in_the_readme_is_what_the_view_draws(utc):
    readme = (ROOT / "README.md").read_text()
    drawn = as_text(Screen(snapshot=demo_snapshot()), 80, 24).rstrip("\n")
    blocks = re.findall(r"^```\w*\n(.*?)^```", readme, re.M | re.S)
    shown = [block.rstrip("\n") for block in blocks if block.startswith("app-")]
    assert shown == [drawn], "README's top screen differs: paste what this test draws"
