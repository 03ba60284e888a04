"""The flame graph layout every profiler shares (collapsed stacks to the
nested set Grafana draws) and the standalone page ./sparkscope profile writes,
opened in Chromium as a person opens it."""

from __future__ import annotations

import pytest

from sparkscope.profiles import page
from sparkscope.store import profiles as store
from sparkscope.store.nested_set import Row, iter_stacks, parse_collapsed, rows, widest_leaves
from sparkscope_testkit.browser_checks import open_offline

COLLAPSED = """\
stage 1.0;Thread.run;Task.run;Burn.call;Burn.burnCpu 60
stage 1.0;Thread.run;Task.run;Burn.call 5
stage 1.0;Thread.run;Task.run;Reader.read;FileInputStream.readBytes 20
JVM and Spark service threads;GC Thread#;G1ParTask::work 14
stage 2.0;Thread.run;Task.run;Tiny.frame 1
not a collapsed line
stage 1.0;Thread.run;Task.run;Burn.call;Burn.burnCpu 0
"""


def positions(nested: list[Row]) -> list[tuple[int, int]]:
    """Each row's (start, width) the way Grafana's panel places them: a row
    follows its previous sibling, or starts where its parent starts."""
    out, open_, last_at = [], [], {}
    for i, r in enumerate(nested):
        del open_[r.level:]
        parent = open_[-1] if open_ else None
        sibling = last_at.get(r.level)
        if sibling is not None and sibling[1] == parent:
            start = out[sibling[0]][0] + nested[sibling[0]].value
        else:
            start = out[parent][0] if parent is not None else 0
        out.append((start, r.value))
        last_at = {k: v for k, v in last_at.items() if k <= r.level}
        last_at[r.level] = (i, parent)
        open_.append(i)
    return out


def test_collapsed_stacks_become_a_depth_first_nested_set_with_exact_totals():
    stacks = parse_collapsed(COLLAPSED.splitlines())
    assert sum(stacks.values()) == 100  # the bad line and the zero count are left out
    nested = rows(stacks, "executor 1 cpu", min_share=0.0)
    assert nested[0] == Row(0, 100, 0, "executor 1 cpu")
    # Widest child first, each frame after its parent.
    assert [r.label for r in nested if r.level == 1] == ["stage 1.0", "JVM and Spark service threads", "stage 2.0"]
    for i, r in enumerate(nested[1:], 1):
        assert nested[i - 1].level >= r.level - 1, "a row may only go one level deeper than the one before"
    # value = self + children, everywhere
    for i, r in enumerate(nested):
        children = [c for c in nested[i + 1:] if c.level > r.level]
        end = next((k for k, c in enumerate(nested[i + 1:]) if c.level <= r.level), len(children))
        direct = [c for c in nested[i + 1:i + 1 + end] if c.level == r.level + 1]
        assert r.value == r.self_value + sum(c.value for c in direct), r
    # No frame overlaps its sibling or leaves its parent, as the panel reads them.
    spans = positions(nested)
    for (start, width), r in zip(spans, nested):
        assert 0 <= start and start + width <= 100, (r, start, width)
    assert dict(iter_stacks(nested)) == {k: v for k, v in stacks.items()}


def test_narrow_frames_fold_into_their_parent_and_totals_stay_exact():
    stacks = parse_collapsed(COLLAPSED.splitlines())
    nested = rows(stacks, "root", min_share=0.02)  # 2 %: stage 2.0 (1 %) folds into the root
    assert "Tiny.frame" not in {r.label for r in nested} and "stage 2.0" not in {r.label for r in nested}
    assert nested[0].value == 100 and nested[0].self_value == 1
    assert sum(v for _, v in iter_stacks(nested)) + nested[0].self_value == 100


def test_values_scale_to_time_and_the_widest_leaf_is_where_samples_landed():
    nested = rows(parse_collapsed(COLLAPSED.splitlines()), "root", scale=10_000_000)  # 10 ms per sample
    assert nested[0].value == 1_000_000_000
    assert widest_leaves(nested, 2) == [("Burn.burnCpu", 600_000_000), ("FileInputStream.readBytes", 200_000_000)]


def test_stored_lines_keep_profiles_of_one_millisecond_apart_and_ids_out_of_tags():
    nested = rows(parse_collapsed(COLLAPSED.splitlines()), "root")
    whole = store.lines(store.Profile("app-1", "3", "cpu", 1_700_000_000_000, 30), nested, 100)
    cut = store.lines(store.Profile("app-1", "3", "cpu", 1_700_000_000_000, 30, "stage 1.0", slot=1), nested, 85)
    stamps = [int(line.rsplit(" ", 1)[1]) for line in whole[:-1] + cut[:-1]]
    assert len(set(stamps)) == len(stamps) and stamps == sorted(stamps)
    assert all(line.split(" ", 1)[0].count(",") == 3 for line in whole[:-1])  # tags: app, executor, kind only
    assert 'profile="2023-11-14 22:13:20 exec 3 cpu 30s stage 1.0"' in cut[0]


@pytest.fixture(scope="module")
def browser():
    from sparkscope_dev.browser import chromium, find_chromium

    if find_chromium() is None:
        pytest.fail("no Chromium: ./sparkscope install installs Debian's chromium")
    with chromium(viewport_height=900) as context:
        yield context


def test_the_page_opens_offline_draws_every_frame_and_zooms_and_searches(browser, tmp_path):
    nested = rows(parse_collapsed(COLLAPSED.splitlines()), "executor 1 cpu", min_share=0.0, scale=10_000_000)
    path = tmp_path / "profile.html"
    path.write_text(page.render(nested, "app-1: a profile </script>", "ns", {"executor": "1"}))
    tab = browser.new_page()
    errors, remote = open_offline(tab, path)
    frames = tab.locator("#graph .f")
    assert frames.count() == len(nested)
    assert not errors and not remote, (errors, remote)

    def width_of(label: str) -> float:
        box = tab.locator("#graph .f", has_text=label).first.bounding_box()
        return box["width"] / tab.locator("#graph").bounding_box()["width"]

    assert width_of("Burn.burnCpu") == pytest.approx(0.6, abs=0.01)
    tab.locator("#graph .f", has_text="Reader.read").first.click()  # zoom: it fills the width
    assert width_of("FileInputStream.readBytes") == pytest.approx(1.0, abs=0.01)
    assert tab.locator("#graph .f", has_text="G1ParTask::work").count() == 0
    tab.locator("#graph .f", has_text="executor 1 cpu").first.click()  # back to the root
    tab.fill("#search", "burncpu")
    assert "60.00 % of the profile matches" in tab.locator("#matched").inner_text()
    tab.fill("#search", "burn")  # Burn.call holds Burn.burnCpu: counted once, not twice
    assert "65.00 % of the profile matches" in tab.locator("#matched").inner_text()
    tab.screenshot(path=str(tmp_path / "page.png"))


def test_a_frame_label_that_opens_an_html_comment_does_not_break_the_page(browser, tmp_path):
    """L8: a thread name (wall mode) or Python file path is chosen by whoever runs
    the job: `<!--<script` left the page's script never closed, nothing drawn."""
    text = "main;<!--<script>evil() 3\nmain;work 1\n"
    nested = rows(parse_collapsed(text.splitlines()), "executor 1 wall", min_share=0.0, scale=10_000_000)
    path = tmp_path / "profile.html"
    path.write_text(page.render(nested, "app-1: wall", "ns", {"executor": "1"}))
    tab = browser.new_page()
    errors, remote = open_offline(tab, path)
    assert not errors and not remote, (errors, remote)
    assert tab.locator("#graph .f").count() == len(nested)
    assert tab.locator("#graph .f", has_text="<!--<script>evil()").count() == 1
