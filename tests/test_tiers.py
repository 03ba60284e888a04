"""The fast tier (pytest --fast, ./sparkscope test --fast) holds only tests
that start nothing: the tiers come from what a test uses
(src/sparkscope_testkit/tiers.py), and these tests catch a test that uses a
stack, Spark or a browser landing in the fast tier."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from sparkscope.settings import ROOT

CONFTEST = '''
import pytest


@pytest.fixture(scope="session")
def stack():
    raise AssertionError("collected only: never started")
'''

TESTS = '''
import pytest

from sparkscope_testkit.sandbox import throwaway_stack
from sparkscope_testkit.annotator_helpers import annotator_conf


@pytest.fixture(scope="module")
def spark_run(stack):
    return stack


@pytest.fixture
def its_dashboard(spark_run):
    return spark_run


@pytest.fixture(scope="module")
def own_stack(tmp_path_factory):
    with throwaway_stack(tmp_path_factory.mktemp("s")) as settings:
        yield settings


def start_one(path):
    with throwaway_stack(path):
        pass


class Cluster:
    def start(self):
        from conftest_helpers import run_spark_job
        run_spark_job()


def test_plain_arithmetic():
    assert 1 + 1 == 2


@pytest.mark.parametrize("n", [1, 2])
def test_plain_parametrized(n, tmp_path, monkeypatch):
    assert n


def test_uses_the_stack(stack):
    pass


def test_uses_a_fixture_of_a_fixture_of_the_stack(its_dashboard):
    pass


def test_uses_a_fixture_that_starts_a_throwaway_stack(own_stack):
    pass


def test_starts_a_throwaway_stack_itself(tmp_path):
    with throwaway_stack(tmp_path):
        pass


def test_calls_a_helper_that_starts_one(tmp_path):
    start_one(tmp_path)


def test_uses_a_class_whose_method_runs_spark():
    Cluster().start()


def test_opens_a_browser_in_a_nested_function():
    def page():
        from sparkscope_dev.browser import chromium
        return chromium
    page()


def test_needs_the_annotator_jar_through_test_support():
    annotator_conf(None)


class TestGrouped:
    def test_plain_in_a_class(self):
        pass

    def test_stack_in_a_class(self, stack):
        pass
'''


def collected(directory: Path, *args: str) -> set[str]:
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist",
                           "-p", "no:cacheprovider", "-p", "sparkscope_testkit.tiers", *args],
                          cwd=directory, capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 5), done.stdout + done.stderr  # 5: nothing selected
    return {line.split("::", 1)[1] for line in done.stdout.splitlines() if "::" in line}


def test_a_test_using_a_stack_spark_or_a_browser_by_any_path_is_outside_the_fast_tier(tmp_path):
    (tmp_path / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (tmp_path / "test_synthetic.py").write_text(textwrap.dedent(TESTS))
    plain = {"test_plain_arithmetic", "test_plain_parametrized[1]", "test_plain_parametrized[2]",
             "TestGrouped::test_plain_in_a_class"}
    everything = collected(tmp_path)
    assert len(everything) == 13 and plain < everything
    assert collected(tmp_path, "--fast") == plain
    assert collected(tmp_path, "-m", "not slow") == plain
    assert collected(tmp_path, "-m", "slow") == everything - plain


UNBUILT = '''
from sparkscope.provision import build_once


def test_needs_a_tool_nobody_built(tmp_path):
    tool = build_once(tmp_path / "tool-v9", lambda staging: (staging / "made").write_text("x"))
    assert (tool / "made").exists()
'''


def test_the_fast_tier_builds_nothing_and_skips_what_needs_an_unbuilt_tool(tmp_path):
    (tmp_path / "test_unbuilt.py").write_text(textwrap.dedent(UNBUILT))
    env = {k: v for k, v in os.environ.items() if k != "SPARKSCOPE_NO_BUILDS"}
    run = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:xdist", "-p", "no:cacheprovider",
           "-p", "sparkscope_testkit.tiers"]
    fast = subprocess.run(run + ["--fast"], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert "1 skipped" in fast.stdout and "tool-v9 is not on this machine yet" in fast.stdout, fast.stdout
    full = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert "1 passed" in full.stdout, full.stdout


def test_no_test_of_the_suite_in_the_fast_tier_uses_the_session_stack():
    """pytest's own account of each test's fixtures (to any depth) over the
    whole suite's fast tier: the session stack is in none."""
    def uses_of_stack(*args: str) -> list[str]:
        done = subprocess.run([sys.executable, "-m", "pytest", "--fixtures-per-test", "-p", "no:xdist",
                               "-p", "no:cacheprovider", *args], cwd=ROOT, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        sections = re.split(r"^-+ fixtures used by (\S+) -+$", done.stdout, flags=re.M)
        return [test for test, listed in zip(sections[1::2], sections[2::2])
                if re.search(r"^stack\b.* -- ", listed, re.M)]

    assert uses_of_stack("tests/test_host_metrics.py"), "the check finds a test that uses the stack"
    assert uses_of_stack("--fast", "tests") == []
