"""Stored text as a terminal may show it: anyone who can write a point (the
events listener, Graphite) chooses run ids, names and messages, and an escape
sequence in them would clear the screen, retitle the terminal or write the
clipboard (OSC 52) of whoever prints them."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def clean(value: object) -> str:
    """A stored value as one line of plain text: control and bidi characters out."""
    return _CONTROL.sub(" ", str(value))
