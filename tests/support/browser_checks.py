"""The browser check every dashboard test shares: a logged-in Chromium page on
the test stack's Grafana, and what counts as a clean dashboard (what a person
would call broken: a panel error, "No data", an unresolved $variable in a
query, a console error, a series named by its refId)."""

from __future__ import annotations

from typing import Iterator

import pytest

from sparkscope.browser import GrafanaPage, chromium, find_chromium
from sparkscope.build.grafana import grafana_home
from sparkscope.build.grafana_ui import has_ui

# Panels that may honestly show nothing for a finished run, and why.
MAY_BE_EMPTY: dict[str, str] = {}


def grafana_page(stack) -> Iterator[GrafanaPage]:
    """For a module-scoped fixture: fails (not skips) when the UI or Chromium is missing."""
    if stack.grafana is None:
        pytest.skip("NATIVE GRAFANA UNAVAILABLE: no browser check of the dashboards (see test_grafana.py)")
    home = grafana_home(stack.settings.cache_dir)
    if not has_ui(home):
        pytest.fail(f"Grafana's web UI is not built in {home}: ./sparkscope install builds it; "
                    "its build log says why it failed")
    if find_chromium() is None:
        pytest.fail("no Chromium: ./sparkscope install installs Debian's chromium")
    with chromium() as context:
        grafana = GrafanaPage(context.new_page(), stack.settings.grafana_url)
        grafana.login(stack.settings.grafana_user, stack.settings.grafana_password)
        yield grafana


def check_clean(page: GrafanaPage, where: str, allowed_empty: dict[str, str] = MAY_BE_EMPTY) -> None:
    problems = []
    problems += [f"query with an unresolved variable: {q}" for q in page.traffic.unresolved]
    problems += [f"query error: {e}" for e in page.traffic.query_errors]
    problems += [f"console: {e}" for e in page.traffic.console_errors]
    views = page.panels()
    assert views, f"{where}: no panel drawn at all"
    for view in views:
        if view.error:
            problems.append(f"panel {view.title!r} shows an error: {view.error}")
        if view.no_data and view.title not in allowed_empty:
            problems.append(f"panel {view.title!r} says No data")
        if view.labels_named_like_refids():
            problems.append(f"panel {view.title!r} labels a series by its refId: {view.labels_named_like_refids()}")
    assert not problems, f"{where}:\n  " + "\n  ".join(problems)


def open_offline(page, path) -> tuple[list[str], list[str]]:
    """Open a local file as a person would and record, while the page lives,
    its console and page errors and every request that leaves the file
    (a page that must open offline fetches nothing)."""
    errors: list[str] = []
    remote: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: remote.append(r.url) if not r.url.startswith(("file:", "data:")) else None)
    page.goto(path.as_uri())
    return errors, remote
