"""A command at a terminal of a given size, as a person sees it: tmux with its
own server and socket (so only it is ever killed), read with capture-pane and
typed into with send-keys."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from sparkscope.settings import ROOT
from sparkscope_testkit.sandbox import settings_environ

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (sparkscope test installs it)")


class Terminal:
    """`python -m sparkscope <argv>` (default `top`), or `python -c <script>`
    when script is given, with the stack's settings in its environment."""

    def __init__(self, settings, args: list[str], width: int, height: int, env: dict[str, str] | None = None,
                 script: str | None = None):
        self.home = tempfile.mkdtemp(prefix="sparkscope-tmux-")
        self.socket = os.path.join(self.home, "socket")
        environ = {**settings_environ(settings), **(env or {})}
        program = ["-c", script, *args] if script is not None else ["-m", "sparkscope", "top", *args]
        # COLUMNS and LINES (pytest's own) would override the terminal's size.
        command = ["env", "-u", "COLUMNS", "-u", "LINES", *(f"{k}={v}" for k, v in environ.items()),
                   sys.executable, *program]
        # The pane stays after the command ends, to show how it ended.
        shell = " ".join(shlex.quote(a) for a in command) + "; echo EXIT=$?; sleep 600"
        subprocess.run(["tmux", "-S", self.socket, "-f", "/dev/null", "new-session", "-d", "-s", "t",
                        "-x", str(width), "-y", str(height), shell], check=True, cwd=ROOT)

    def screen(self, history: bool = False) -> str:
        """What the pane shows; history: with the lines scrolled off its top."""
        more = ["-S", "-"] if history else []
        return subprocess.run(["tmux", "-S", self.socket, "capture-pane", "-p", "-t", "t", *more],
                              capture_output=True, text=True, check=True).stdout

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "-S", self.socket, "send-keys", "-t", "t", *keys], check=True)

    def wait_for(self, predicate, what: str, deadline_s: float = 30.0, history: bool = False) -> str:
        end = time.monotonic() + deadline_s
        while True:
            text = self.screen(history)
            if predicate(text):
                return text
            if time.monotonic() > end:
                raise AssertionError(f"after {deadline_s:.0f} s the screen still does not show {what}:\n{text}")
            time.sleep(0.3)

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True)
        shutil.rmtree(self.home, ignore_errors=True)

    def __enter__(self) -> "Terminal":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
