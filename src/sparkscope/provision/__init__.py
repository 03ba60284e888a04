"""Builds: InfluxDB and Telegraf (go.py), Grafana (grafana.py), the annotator
jar (annotator_jar.py), and the tools the tests need (compose_validator.py,
apt.py). Each result is cached, so only a first run pays for it."""

from __future__ import annotations

from sparkscope.errors import SparkscopeError


class BuildError(SparkscopeError):
    """A component could not be built or installed; the message says what to do next."""
