"""Opening our own pages (the report, the flame graph page) in Chromium as a
person would: offline, with every console error and remote request recorded."""

from __future__ import annotations


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
