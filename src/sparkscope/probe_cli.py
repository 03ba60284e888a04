"""What the host probes' command lines share (the block I/O probe and the
thread sampler, `python -m sparkscope.blockprobe` / `sparkscope.threadprobe`): the
events listener they send to, and their on/off switches, read from the
environment the runners (or a container's env) give them, the same way the
native runner reads them. Standard library only: the probes import it."""

from __future__ import annotations

import argparse
import os
from typing import Mapping, Optional

DEFAULT_EVENTS_URL = "http://127.0.0.1:8186"  # Telegraf's line-protocol listener at EVENTS_PORT's default
OFF_WORDS = ("false", "0", "no", "off")  # what switches a <NAME>_ENABLED (or any switch) off


def switched_on(key: str, env: Optional[Mapping[str, str]] = None) -> bool:
    """A switch of the environment: on unless it says false, 0, no or off."""
    return (os.environ if env is None else env).get(key, "true").strip().lower() not in OFF_WORDS


def add_url_argument(parser: argparse.ArgumentParser, env_key: str) -> None:
    parser.add_argument("--url", default=os.environ.get(env_key, DEFAULT_EVENTS_URL),
                        help="Telegraf's line-protocol listener (EVENTS_PORT); default %(default)s")
