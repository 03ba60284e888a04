"""Stored text as a terminal may show it: anyone who can write a point (the
events listener, Graphite) chooses run ids, names and messages, and an escape
sequence in them would clear the screen, retitle the terminal or write the
clipboard (OSC 52) of whoever prints them. And text the generators write
into hand-written files (replaced)."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def clean(value: object) -> str:
    """A stored value as one line of plain text: control and bidi characters out."""
    return _CONTROL.sub(" ", str(value))


# A generated block inside a hand-written file (telegraf.conf's ingest guard and
# "no end seen" processor): the text between its markers is the generator's.
def replaced(text: str, begin: str, end: str, block: str, what: str) -> str:
    """text with its one begin..end block replaced by block (markers included in block)."""
    if text.count(begin) != 1 or text.count(end) != 1:
        raise SystemExit(f"expected one pair of GENERATED markers of {what}; restore them from git and "
                         "run .venv/bin/python -m sparkscope.generate again")
    head, rest = text.split(begin)
    _, tail = rest.split(end)
    return head + block + tail
