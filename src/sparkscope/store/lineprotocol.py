"""InfluxDB line protocol as sparkscope writes it, in Python here and in Java
in annotator/.../Point.java: one rule for both, so an application id, a stage
name or a device name is stored under the same value whoever wrote it. The
two are held to it by one table, tests/data/lineprotocol_cases.json, which
tests/test_lineprotocol.py and the annotator's LineProtocolCasesTest both
read. Stdlib only: the probes' container images copy it.

The rule is what survives the real path (writer -> Telegraf 1.37's
influxdb_listener -> InfluxDB 1.13), as tests/test_lineprotocol.py finds by
sending every case from both languages:

- string fields: every character kept, backslash and double quote escaped.
  Control characters are written raw, a line break too: Telegraf and InfluxDB
  read a quoted field value up to its closing quote, and store it exactly.
  (A line break written as backslash-n instead has Telegraf refuse the whole
  request: it knows no such escape.)
- tag keys, tag values and field keys: commas, equals signs and spaces
  escaped with a backslash, and a backslash left as it is (escaping it would
  store two). Some cannot be written at all: a tab, newline, carriage return,
  form feed or vertical tab in a tag, or a backslash at its end, has Telegraf
  refuse the whole request, however it is escaped. The five are written as the
  two characters \\t, \\n, \\r, \\f, \\v, and trailing backslashes as U+29F5,
  which looks the same: the only changes a value can get, and none loses a
  character (spaces for the five, or trailing backslashes dropped, would make
  two application ids one). Other control
  characters are stored as they are. An empty tag is left out: InfluxDB reads
  a missing tag as "" in every WHERE;
- measurement names: commas and spaces escaped, the same changes;
- floats: the shortest decimal that reads back as the same double, Python's
  repr (1.5, 0.0001, 1e-05, 1e+16); NaN and infinities have no spelling and
  are left out. Integers end in "i" and must fit 64 bits; booleans are
  true/false.
"""

from __future__ import annotations

import functools
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
        if not -2**63 <= value < 2**63:
            raise ValueError(f"{value} does not fit InfluxDB's 64-bit integers")
        return f"{value}i"
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"line protocol has no {value}: leave the field out")
        return repr(value)
    return string_field(str(value))


def line(name: str, tags: Mapping[str, Optional[str]], fields: Mapping[str, Optional[Field]],
         time_ns: Optional[int] = None) -> str:
    """One point; tags with an empty or None value and None fields are left out.
    Raises ValueError for what InfluxDB would refuse: no field left, an empty
    name or key."""
    return series_line(series_key(name, tags), fields, time_ns)


def series_key(name: str, tags: Mapping[str, Optional[str]]) -> str:
    """A point's measurement and tags as line() writes them: for a writer of many
    points of one series (a profile's rows), to escape them once for series_line."""
    if not name or not all(k for k, v in tags.items() if v):
        raise ValueError(f"a point needs a name and every tag a key: {name!r}, {tags!r}")
    return measurement(name) + "".join(f",{tag_key(k)}={tag_value(v)}" for k, v in sorted(tags.items()) if v)


@functools.lru_cache(maxsize=1024)
def _field_key(key: str) -> str:
    return tag_key(key)  # writers use a few names over and over


def series_line(key: str, fields: Mapping[str, Optional[Field]], time_ns: Optional[int] = None) -> str:
    """line() for a series_key."""
    if "" in fields:
        raise ValueError(f"a field of {key!r} has no key: {fields!r}")
    field_text = ",".join(f"{_field_key(k)}={field_value(v)}" for k, v in fields.items()
                          if v is not None and not (isinstance(v, float) and not math.isfinite(v)))
    if not field_text:
        raise ValueError(f"a point of {key!r} needs at least one field")
    stamp = "" if time_ns is None else f" {int(time_ns)}"
    return f"{key} {field_text}{stamp}"


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
