"""The Prometheus names of sparkscope's measurements, fields and tags, as
Telegraf's prometheusremotewrite serializer writes them to a Prometheus store
(the Thanos store, telegraf/thanos.conf): one series per numeric field, named
<measurement>_<field>, its tags as labels. A name Prometheus does not allow
has each disallowed character made "_", a disallowed first character dropped,
and "_" trimmed from both ends; a name it allows is kept as it is. String
fields are not written at all: a Prometheus store holds numbers only.

The PromQL read layer and dashboards spell names through these functions, as
the InfluxQL ones spell the measurements of schema.py. Standard library only.
"""

from __future__ import annotations

import re

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def _sanitized(name: str, valid: re.Pattern, first: str, rest: str) -> str:
    if valid.fullmatch(name):
        return name
    out = [name[0] if re.fullmatch(first, name[0]) else ""] if name else []
    out += [c if re.fullmatch(rest, c) else "_" for c in name[1:]]
    return "".join(out).strip("_")


def series_name(measurement: str, field: str) -> str:
    """The Prometheus metric name of a measurement's numeric field."""
    raw = field if measurement == "prometheus" else f"{measurement}_{field}"
    return _sanitized(raw, _METRIC_NAME, r"[a-zA-Z_:]", r"[a-zA-Z0-9_:]")


def label_name(tag: str) -> str:
    """The Prometheus label name of a tag."""
    return _sanitized(tag, _LABEL_NAME, r"[a-zA-Z_]", r"[a-zA-Z0-9_]")
