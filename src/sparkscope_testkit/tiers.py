"""The suite's two tiers, told apart by what a test uses (a pytest plugin,
loaded by pyproject.toml's addopts: -p sparkscope_testkit.tiers).

A test is marked `slow` when it, one of its fixtures (to any depth), or a
helper of the tests or of this package that these call (to any depth) uses
one of the things below: a stack, Spark, a browser, a download or a build.
Nothing is tagged by hand, so a new test lands in the right tier by what it
does. Everything else is the fast tier: units and model-level checks,
`pytest --fast` (what `./sparkscope test --fast` runs). `-m slow` and
`-m "not slow"` select the same way.

In the fast tier, the stack fixture, throwaway_stack and run_spark_job refuse
to start (refuse_in_fast_tier): a test that reaches them by a way the rules
below miss fails loudly instead of quietly making the fast tier slow.
"""

from __future__ import annotations

import inspect
import os
import types

from sparkscope.provision import NO_BUILDS_ENV, NotBuilt

# pytest is imported where it is used: sandbox.py (throwaway_stack, for bench/ too)
# imports this module, and is imported where no pytest is installed (bench/, the
# oldest Python in test_build.py).


# Fixtures that start something: any test whose fixtures include one, to any depth, is slow.
SLOW_FIXTURES = {
    "stack": "the session's InfluxDB and Telegraf",
}

# Names that, used in a test's code, its fixtures' or a test helper's, start something.
SLOW_NAMES = {
    "throwaway_stack": "a throwaway stack",
    "influxdb_service": "an InfluxDB of its own",
    "run_spark_job": "a Spark application",
    "run_submit": "a Spark application",
    "submit_argv": "a Spark application",
    "spark_env": "a Spark process",
    "ensure_annotator_jar": "the annotator jar (a Maven build)",
    "ensure_pyspark": "a second Spark (a download)",
    "ensure_previous_influxd": "an InfluxDB build",
    "ensure_influxd": "an InfluxDB build",
    "ensure_thanos": "a Thanos build",
    "chromium": "a Chromium",
}

# Names that start something only together, in one function: NativeBackend(...).up().
SLOW_TOGETHER = {
    ("NativeBackend", "up"): "a native stack",
}

FAST_OPTION = "--fast"
_fast_tier = False


def refuse_in_fast_tier(what: str) -> None:
    """Called where the expensive things start; fails a test that reached one in the fast tier."""
    if _fast_tier:
        import pytest
        pytest.fail(f"{what} started in the fast tier (pytest {FAST_OPTION}): teach "
                    "sparkscope_testkit/tiers.py the name this test reaches it by, so the test is marked slow",
                    pytrace=False)


def names_in(code: types.CodeType) -> set[str]:
    """Every global and attribute name a function's code uses, its nested functions' included."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= names_in(const)
    return names


def is_test_code(obj) -> bool:
    """Code of the tests (test modules, conftest) or of this package: followed into; the
    product is not (its branches would make units of its argument errors slow)."""
    module = getattr(obj, "__module__", None) or ""
    return module == "conftest" or module.split(".")[-1].startswith("test_") or \
        module.split(".")[0] == "sparkscope_testkit"


def functions_of(obj) -> list[types.FunctionType]:
    obj = inspect.unwrap(obj) if callable(obj) else obj
    if isinstance(obj, types.FunctionType):
        return [obj]
    if isinstance(obj, type):
        return [f for value in vars(obj).values() for f in functions_of(
            value.__func__ if isinstance(value, (staticmethod, classmethod)) else
            value.fget if isinstance(value, property) else value) if isinstance(f, types.FunctionType)]
    return []


def slow_reason(funcs: list, seen: set | None = None) -> str | None:
    """Why these functions are slow (what they, or the test code they call, start), or None."""
    seen = set() if seen is None else seen
    for func in funcs:
        for f in functions_of(func):
            if f.__code__ in seen:
                continue
            seen.add(f.__code__)
            names = names_in(f.__code__)
            for name in sorted(names & SLOW_NAMES.keys()):
                return f"{f.__qualname__} uses {name}: {SLOW_NAMES[name]}"
            for together, what in SLOW_TOGETHER.items():
                if names.issuperset(together):
                    return f"{f.__qualname__} uses {' and '.join(together)}: {what}"
            called = [f.__globals__[n] for n in sorted(names) if n in f.__globals__]
            reason = slow_reason([c for c in called if is_test_code(c)], seen)
            if reason:
                return reason
    return None


def item_slow_reason(item) -> str | None:
    info = getattr(item, "_fixtureinfo", None)
    funcs = [getattr(item, "function", None)]
    if info is not None:
        for name in item.fixturenames:
            if name in SLOW_FIXTURES:
                return f"fixture {name}: {SLOW_FIXTURES[name]}"
        for name in item.fixturenames:
            funcs += [d.func for d in info.name2fixturedefs.get(name, ())]
    return slow_reason([f for f in funcs if f is not None])


def pytest_addoption(parser) -> None:
    parser.addoption(FAST_OPTION, action="store_true",
                     help="only the fast tier: tests that start no stack, Spark, browser, download or build "
                          "(sparkscope_testkit/tiers.py)")


def pytest_configure(config) -> None:
    global _fast_tier
    _fast_tier = config.getoption(FAST_OPTION)
    if _fast_tier:
        # Nothing is built, downloaded or installed in the fast tier: a test whose
        # tool (helm, kubeconform, the dashboard checker) this machine has not
        # built yet is skipped, saying so (pytest_runtest_makereport below).
        os.environ[NO_BUILDS_ENV] = "1"
    config.addinivalue_line("markers", "slow(reason): starts a stack, Spark, a browser, a download or a build "
                                       "(marked from what the test uses: sparkscope_testkit/tiers.py)")


def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if _fast_tier and call.excinfo is not None and call.excinfo.errisinstance(NotBuilt):
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {call.excinfo.value}")


try:  # a plugin only where pytest runs
    import pytest as _pytest
    pytest_runtest_makereport = _pytest.hookimpl(hookwrapper=True)(pytest_runtest_makereport)
except ImportError:
    pass


def pytest_collection_modifyitems(config, items: list) -> None:
    import pytest
    fast = []
    for item in items:
        reason = item_slow_reason(item)
        if reason:
            item.add_marker(pytest.mark.slow(reason))
        else:
            fast.append(item)
    if config.getoption(FAST_OPTION):
        config.hook.pytest_deselected(items=[i for i in items if i.get_closest_marker("slow")])
        items[:] = fast
