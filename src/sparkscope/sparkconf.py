"""Reads spark-conf/ and turns it into spark-submit flags for a given endpoint."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

SINK = "spark.metrics.conf.*.sink.graphite."
_LINE = re.compile(r"^\s*([^\s=:]+)\s*[=:\s]\s*(.*?)\s*$")


class ConfError(ValueError):
    """A Spark properties file could not be read."""


def read_properties(path: Path) -> dict[str, str]:
    """Key/value pairs of a Spark properties file, in file order."""
    try:
        text = path.read_text()
    except OSError as err:
        raise ConfError(f"cannot read {path}: {err.strerror}") from err
    props: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith(("#", "!")):
            continue
        match = _LINE.match(raw)
        if not match:
            raise ConfError(f"{path}:{number}: not a 'key=value' line: {raw!r}")
        props[match.group(1)] = match.group(2)
    return props


def with_endpoint(props: dict[str, str], graphite_host: str | None = None, graphite_port: int | None = None,
                  prefix: str | None = None, period_s: int | None = None) -> dict[str, str]:
    """A copy of props with the Graphite sink pointed at the given endpoint."""
    out = dict(props)
    overrides = {"host": graphite_host, "port": graphite_port, "prefix": prefix, "period": period_s}
    for key, value in overrides.items():
        if value is not None:
            out[SINK + key] = str(value)
    return out


def conf_flags(defaults_file: Path, **endpoint) -> list[str]:
    """`--conf key=value` flags equivalent to --properties-file defaults_file."""
    props = with_endpoint(read_properties(defaults_file), **endpoint)
    return [f"--conf {shlex.quote(f'{k}={v}')}" for k, v in props.items()]
