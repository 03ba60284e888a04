"""Debian's Chromium, for opening our own pages in a real browser in the tests
(the report, the flame graph page). Playwright drives it; its own browser
download is never used (it cannot work offline)."""

from __future__ import annotations

from sparkscope_dev.browser import find_chromium
from sparkscope.provision import BuildError
from sparkscope.provision.apt import apt_install
from sparkscope.process import Progress


def ensure_chromium(progress: Progress = print) -> str:
    found = find_chromium()
    if found:
        return found
    progress("installing Debian's chromium for the browser checks (once, about a minute)")
    apt_install(["chromium"], progress)
    found = find_chromium()
    if found is None:
        raise BuildError("apt-get installed chromium but no chromium is on PATH: check /usr/bin/chromium")
    return found
