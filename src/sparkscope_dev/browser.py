"""Our own pages in a real browser: Debian's Chromium driven by Playwright.

The report (`sparkscope report`) and the standalone flame graph page are
opened as a person would, offline, in the tests. Grafana is not driven
here: no Grafana runs in the tests (src/sparkscope_testkit/grafana12.py models it).
"""

from __future__ import annotations

import shutil
from contextlib import contextmanager
from typing import Iterator

from sparkscope.errors import SparkscopeError

# As the machine's own browser tests run it: as root, offline, nothing phoning home.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


@contextmanager
def chromium(viewport_height: int = 5000) -> Iterator[object]:
    """A fresh headless Chromium context, tall enough to show a whole report page at once."""
    from playwright.sync_api import sync_playwright

    executable = find_chromium()
    if executable is None:
        raise SparkscopeError("No Chromium on PATH: install Debian's chromium package "
                              "(./sparkscope test installs it for the tests) and run again.")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1600, "height": viewport_height})
            yield context
            context.close()
        finally:
            browser.close()
