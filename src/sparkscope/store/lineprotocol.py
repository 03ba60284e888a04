"""InfluxDB line protocol as sparkscope's Python writers write it (the block
I/O probe, the thread sampler, the profile store): one module, so a device
name, a command or a stage name is escaped the same way everywhere. Stdlib
only: the probes' container images copy it.

What survives the real path (writer -> Telegraf's events listener ->
InfluxDB 1.8), as tests/test_lineprotocol.py finds by sending every case:

- string fields: every character, with backslash and double quote escaped;
- tag values: commas, equals signs and spaces escaped with a backslash, and
  a backslash left as it is (escaping it would store two). Some cannot be
  written at all: a tab, newline, carriage return, form feed or vertical tab
  in a tag, or a backslash at its end, has Telegraf refuse the whole request.
  The five are written as the two characters \\t, \\n, \\r, \\f, \\v, and
  trailing backslashes as U+29F5 (the only changes a value can get). An empty
  tag is left out: InfluxDB reads a missing tag as "" in every WHERE;
- measurement names: commas and spaces escaped, the same changes.
"""

from __future__ import annotations

import math
from typing import Mapping, Optional, Union

Field = Union[str, bool, int, float]

_UNWRITABLE = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f", "\v": "\\v"}
# What stands for a backslash that would end a tag value or name: Telegraf refuses
# one there however it is escaped. U+29F5 REVERSE SOLIDUS OPERATOR looks the same.
TRAILING_BACKSLASH = "\u29f5"


def _plain(text: str) -> str:
    for char, name in _UNWRITABLE.items():
        text = text.replace(char, name)
    return text


def _no_trailing_escape(text: str) -> str:
    """Backslashes that end a value become TRAILING_BACKSLASH: written, the last
    one would escape the separator after it, and doubled Telegraf refuses it."""
    stripped = text.rstrip("\\")
    return stripped + TRAILING_BACKSLASH * (len(text) - len(stripped))


def measurement(name: str) -> str:
    return _no_trailing_escape(_plain(name).replace(",", "\\,").replace(" ", "\\ "))


def tag_value(value: str) -> str:
    return _no_trailing_escape(_plain(value).replace(",", "\\,").replace("=", "\\=").replace(" ", "\\ "))


tag_key = tag_value  # the same rules


def string_field(value: str) -> str:
    """A string field value, quotes included."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def field_value(value: Field) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value}i"
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"line protocol has no {value}: leave the field out")
        return repr(value)
    return string_field(str(value))


def line(name: str, tags: Mapping[str, Optional[str]], fields: Mapping[str, Optional[Field]],
         time_ns: Optional[int] = None) -> str:
    """One point; tags with an empty or None value and None fields are left out.
    Raises ValueError when no field is left (InfluxDB refuses such a line)."""
    tag_text = "".join(f",{tag_key(k)}={tag_value(v)}" for k, v in sorted(tags.items()) if v)
    field_text = ",".join(f"{tag_key(k)}={field_value(v)}" for k, v in fields.items()
                          if v is not None and not (isinstance(v, float) and not math.isfinite(v)))
    if not field_text:
        raise ValueError(f"a point of {name!r} needs at least one field")
    stamp = "" if time_ns is None else f" {int(time_ns)}"
    return f"{measurement(name)}{tag_text} {field_text}{stamp}"


def with_tag(written: str, key: str, value: str) -> str:
    """A written line with one more tag, placed after its series key (the
    measurement and tags end at the first space no backslash escapes);
    InfluxDB sorts tags itself. An empty value leaves the line as it is."""
    if not value:
        return written
    i = 0
    while i < len(written) and written[i] != " ":
        i += 2 if written[i] == "\\" else 1
    return f"{written[:i]},{tag_key(key)}={tag_value(value)}{written[i:]}"
