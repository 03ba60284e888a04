"""What the host probes' command lines share (the block I/O probe and the
thread sampler, `python -m sparkscope.probes.blockprobe` / `sparkscope.probes.threadprobe`): the
events listener they send to, and their on/off switches, read from the
environment the runners (or a container's env) give them, the same way the
native runner reads them. Standard library only: the probes import it."""

from __future__ import annotations

import argparse
import os
from typing import Mapping, Optional

from sparkscope.store.lineprotocol import with_tag

HOST_ENV = "SPARKSCOPE_HOST"  # the host tag a probe's points carry; unset: Telegraf's hostname
DEFAULT_EVENTS_URL = "http://127.0.0.1:8186"  # Telegraf's line-protocol listener at EVENTS_PORT's default
OFF_WORDS = ("false", "0", "no", "off")  # what switches a <NAME>_ENABLED (or any switch) off


def switched_on(key: str, env: Optional[Mapping[str, str]] = None) -> bool:
    """A switch of the environment: on unless it says false, 0, no or off."""
    return (os.environ if env is None else env).get(key, "true").strip().lower() not in OFF_WORDS


def add_url_argument(parser: argparse.ArgumentParser, env_key: str) -> None:
    parser.add_argument("--url", default=os.environ.get(env_key, DEFAULT_EVENTS_URL),
                        help="Telegraf's line-protocol listener (EVENTS_PORT); default %(default)s")


def host_tagged(lines: list[str], env: Optional[Mapping[str, str]] = None) -> list[str]:
    """The probe's lines with host=$SPARKSCOPE_HOST when it is set. Telegraf
    tags what it takes with its own hostname only where a line has no host:
    right when it runs beside the probe (compose, the native runner), wrong on
    Kubernetes, where the probes' DaemonSet sets the node's name here."""
    host = (os.environ if env is None else env).get(HOST_ENV, "").strip()
    return [with_tag(line, "host", host) for line in lines] if host else lines
