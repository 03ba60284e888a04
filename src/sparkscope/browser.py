"""Grafana in a real browser: Debian's Chromium driven by Playwright.

A dashboard is read the way a person meets it: log in through the form, open
the dashboard, pick the run in the variable pickers, let every panel load,
then read what is drawn. What the browser sends and gets back is recorded, so
a query that leaves the browser with an unresolved `$variable`, a query
error or a console error is seen even where a panel happens to draw.

Used by the browser tests and by `sparkscope screenshots`.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator
from urllib.parse import parse_qs, urlparse

from sparkscope.errors import SparkscopeError

# As the machine's own browser tests run it: as root, offline, nothing phoning home.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# Left in a query for the server to fill (InfluxQL through /api/ds/query):
# Grafana's backend macros. Anything else with a $ was not substituted.
SERVER_MACROS = {"timeFilter", "__timeFilter", "interval", "__interval", "__interval_ms"}
VARIABLE = re.compile(r"\$\{?(\w+)")


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class Traffic:
    """What the page sent and got back while a dashboard loaded."""
    queries: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)
    query_errors: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    pending: int = 0

    def reset(self) -> None:
        self.queries.clear()
        self.unresolved.clear()
        self.query_errors.clear()
        self.console_errors.clear()


@dataclass
class PanelView:
    title: str
    lines: list[str]
    no_data: bool
    error: str
    series_labels: list[str]

    def labels_named_like_refids(self) -> list[str]:
        """Legend entries or stat names that are a bare query refId ("A", "C"):
        a series nobody named."""
        return [line for line in self.series_labels + self.lines if re.fullmatch(r"[A-Z]", line)]


class GrafanaPage:
    def __init__(self, page, base_url: str) -> None:
        self.page = page
        self.base_url = base_url.rstrip("/")
        self.traffic = Traffic()
        page.on("request", self._on_request)
        page.on("requestfinished", self._on_done)
        page.on("requestfailed", self._on_failed)
        page.on("console", self._on_console)
        page.on("pageerror", lambda error: self.traffic.console_errors.append(f"page error: {error}"))

    # ---------------------------------------------------------------- traffic

    def _is_query(self, request) -> bool:
        path = urlparse(request.url).path
        return path.endswith("/api/ds/query") or ("/api/datasources/proxy/" in path and path.endswith("/query"))

    def _on_request(self, request) -> None:
        if not self._is_query(request):
            return
        self.traffic.pending += 1
        path = urlparse(request.url).path
        if path.endswith("/api/ds/query"):
            body = json.loads(request.post_data or "{}")
            texts = [q.get("query", "") for q in body.get("queries", []) if isinstance(q.get("query"), str)]
            allowed = SERVER_MACROS
        else:  # the datasource proxy: the browser has substituted everything itself
            texts = parse_qs(urlparse(request.url).query).get("q", [])
            texts += parse_qs(request.post_data or "").get("q", [])
            allowed = set()
        for text in texts:
            self.traffic.queries.append(text)
            names = {m.group(1) for m in VARIABLE.finditer(text)} - allowed
            if names:
                self.traffic.unresolved.append(f"${', $'.join(sorted(names))} in: {text}")

    def _on_done(self, request) -> None:
        if not self._is_query(request):
            return
        self.traffic.pending -= 1
        response = request.response()
        if response is None:
            return
        try:
            body = response.json()
        except Exception:  # noqa: BLE001 - not JSON: the status says it
            body = {}
        if response.status >= 400:
            self.traffic.query_errors.append(f"HTTP {response.status}: {json.dumps(body)[:300]}")
        results = body.get("results") if isinstance(body, dict) else None
        # /api/ds/query answers {refId: result}; the datasource proxy passes
        # InfluxDB's own answer through: a list of statement results.
        items = results.items() if isinstance(results, dict) else enumerate(results or [])
        for ref, result in items:
            if isinstance(result, dict) and result.get("error"):
                self.traffic.query_errors.append(f"{ref}: {result['error']}")

    def _on_failed(self, request) -> None:
        if not self._is_query(request):
            return
        self.traffic.pending -= 1
        # Grafana itself cancels a query that a newer one replaces (auto-refresh,
        # a variable changed): the panel shows the newer answer, nothing is lost.
        if "ERR_ABORTED" not in (request.failure or ""):
            self.traffic.query_errors.append(f"request failed: {request.failure}")

    def _on_console(self, message) -> None:
        if message.type == "error":
            self.traffic.console_errors.append(message.text)

    # ---------------------------------------------------------------- actions

    def login(self, user: str, password: str) -> None:
        self.page.goto(f"{self.base_url}/login")
        self.page.fill("input[name=user]", user)
        self.page.fill("input[name=password]", password)
        self.page.click("button[type=submit]")
        self.page.wait_for_url(lambda url: "/login" not in url, timeout=30_000)

    def open(self, uid: str, query: str = "") -> None:
        self.traffic.reset()
        self.page.goto(f"{self.base_url}/d/{uid}{'?' + query if query else ''}")
        self.wait_loaded()

    def variable_value(self, label: str) -> str:
        link = self.page.locator(
            f'[data-testid^="data-testid Dashboard template variables Variable Value DropDown value link text"]'
        ).nth(self._variable_index(label))
        return link.inner_text().strip()

    def pick(self, label: str, value: str) -> None:
        """Choose value in the picker labelled label, as a person does."""
        index = self._variable_index(label)
        self.page.locator(
            '[data-testid^="data-testid Dashboard template variables Variable Value DropDown value link text"]'
        ).nth(index).click()
        option = self.page.get_by_test_id(
            f"data-testid Dashboard template variables Variable Value DropDown option text {value}")
        option.first.click()
        self.page.keyboard.press("Escape")
        self.wait_loaded()

    def _variable_index(self, label: str) -> int:
        labels = self.page.locator('[data-testid^="data-testid Dashboard template variables submenu Label"]')
        texts = [labels.nth(i).inner_text().strip() for i in range(labels.count())]
        assert label in texts, f"no variable picker labelled {label!r}; pickers: {texts}"
        return texts.index(label)

    def wait_loaded(self, deadline_s: float = 60.0, quiet_s: float = 1.5) -> None:
        """Until no query is in flight and no panel shows its loading bar for quiet_s."""
        end = time.monotonic() + deadline_s
        quiet_since = None
        while time.monotonic() < end:
            busy = self.traffic.pending > 0 or self.page.locator('[aria-label="Panel loading bar"]').count() > 0
            if busy:
                quiet_since = None
            elif quiet_since is None:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= quiet_s:
                return
            self.page.wait_for_timeout(250)
        raise AssertionError(f"panels still loading after {deadline_s:.0f} s "
                             f"({self.traffic.pending} queries in flight)")

    def panels(self) -> list[PanelView]:
        views = []
        sections = self.page.locator('[data-testid^="data-testid Panel header "]')
        for i in range(sections.count()):
            section = sections.nth(i)
            testid = section.get_attribute("data-testid") or ""
            title = testid.removeprefix("data-testid Panel header ")
            lines = [line.strip() for line in section.inner_text().splitlines() if line.strip()]
            error = ""
            status = section.locator('[aria-label="Panel status"], [aria-label="Panel header error"]')
            if status.count():
                status.first.hover()
                tooltip = self.page.locator('[role="tooltip"]')
                error = tooltip.first.inner_text() if tooltip.count() else "(error indicator shown)"
            labels = section.locator('[class*="LegendLabel"], [class*="legend"] button, '
                                     '[aria-label="VizLegend series"]').all_inner_texts()
            views.append(PanelView(title, lines, "No data" in lines, error,
                                   [label.strip() for label in labels if label.strip()]))
        return views

    def screenshot(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(path), full_page=True)


@contextmanager
def chromium(viewport_height: int = 5000) -> Iterator[object]:
    """A fresh headless Chromium context; panels below the fold load lazily in
    Grafana, so the viewport is tall enough to show every panel at once (the
    live dashboard is 110 grid units, about 4300 px)."""
    from playwright.sync_api import sync_playwright

    executable = find_chromium()
    if executable is None:
        raise SparkscopeError("No Chromium on PATH: install Debian's chromium package "
                              "(./sparkscope install does) and run again.")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1600, "height": viewport_height})
            yield context
            context.close()
        finally:
            browser.close()


# ---------------------------------------------------------------- screenshots

def newest_run(influx_url: str, database: str, app_id: str | None = None) -> tuple[str, int, int]:
    """(application id, first and last metric time in ms) of app_id, or of the
    run that started last in the past week, as the Application picker orders them."""
    from sparkscope.stack import influx

    where = f"\"applicationid\" = '{app_id}'" if app_id else "time > now() - 7d"
    series = influx.query(influx_url, 'SELECT "applicationid", "first" FROM (SELECT first("value") FROM '
                          f'"JVMHeapMemory" WHERE {where} GROUP BY "applicationid") ORDER BY time DESC LIMIT 1',
                          database)
    if not series:
        raise SparkscopeError(f"No metrics of {app_id or 'any application in the past week'} in InfluxDB "
                              f"at {influx_url}: run a Spark job with sparkscope attached first "
                              "(./sparkscope demo runs one).")
    started_ms, app = series[0]["values"][0][0], series[0]["values"][0][1]
    last = influx.query(influx_url, f"SELECT last(\"value\") FROM \"JVMHeapMemory\" WHERE \"applicationid\" = "
                        f"'{app}'", database)
    return app, int(started_ms), int(last[0]["values"][0][0])


def dashboard_screenshots(grafana_url: str, user: str, password: str, views: dict[str, str],
                          out_dir: Path) -> list[Path]:
    """Open each dashboard view (file stem -> /d/... path and query) as a person
    would, wait for every panel, save a full-page PNG; returns the files."""
    written = []
    with chromium() as context:
        page = GrafanaPage(context.new_page(), grafana_url)
        page.login(user, password)
        for stem, path in views.items():
            page.traffic.reset()
            page.page.goto(f"{page.base_url}{path}")
            page.wait_loaded()
            target = out_dir / f"{stem}.png"
            page.screenshot(target)
            written.append(target)
    return written
