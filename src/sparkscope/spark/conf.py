"""What attaches sparkscope to Spark: spark-conf/ pointed at a stack, and the
annotator listener, as properties or spark-submit flags."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from sparkscope.errors import SparkscopeError
from sparkscope.store.http import EVENTS_PASSWORD_ENV
from sparkscope.settings import Settings

LISTENER_CLASS = "dev.sparkscope.annotator.AnnotatorListener"
# JVM flame graphs on demand (./sparkscope profile); idle until asked: each
# executor checks with its driver every 5 s (spark.sparkscope.profiler.pollSeconds)
# over Spark's own RPC.
PROFILER_PLUGIN_CLASS = "dev.sparkscope.annotator.ProfilerPlugin"
# Each executor and the driver read their own container's memory cgroup (limit,
# working set, OOM kills) every 5 s and write it as sparkscope_container.
CONTAINER_PLUGIN_CLASS = "dev.sparkscope.annotator.ContainerMemoryPlugin"

SINK = "spark.metrics.conf.*.sink.graphite."
_LINE = re.compile(r"^\s*([^\s=:]+)\s*[=:\s]\s*(.*?)\s*$")


class ConfError(SparkscopeError):
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


def sparkscope_properties(settings: Settings, period_s: int | None = None) -> dict[str, str]:
    """spark-conf/spark-defaults.conf pointed at this stack's Graphite listener."""
    props = read_properties(settings.root / "spark-conf" / "spark-defaults.conf")
    return with_endpoint(props, graphite_host=settings.graphite_host,
                         graphite_port=settings.graphite_port, period_s=period_s)


def listener_properties(jar: str, events_url: str, user: str | None = None,
                        password_env: str | None = None) -> dict[str, str]:
    """Spark settings that attach the listener and plugins and point them at a
    Telegraf events listener (which writes to InfluxDB's database); with its
    user, and the NAME of the environment variable holding its password, when
    it asks for them (a value would sit in spark-submit's argv and, on
    Kubernetes, in the driver's ConfigMap)."""
    props = {
        "spark.jars": jar,
        "spark.extraListeners": LISTENER_CLASS,
        "spark.plugins": f"{PROFILER_PLUGIN_CLASS},{CONTAINER_PLUGIN_CLASS}",
        "spark.sparkscope.influx.url": events_url,
    }
    if user is not None:
        props["spark.sparkscope.influx.username"] = user
    if password_env is not None:
        props["spark.sparkscope.influx.passwordEnv"] = password_env
    return props


def annotator_properties(settings: Settings, jar: Path) -> dict[str, str]:
    """listener_properties for this stack's events listener, with its
    credentials when it asks for them (EVENTS_AUTH): the password itself goes
    in spark-submit's environment (annotator_env)."""
    user, _ = settings.events_credentials or (None, None)
    return listener_properties(str(jar), settings.events_url, user, EVENTS_PASSWORD_ENV if user else None)


def annotator_env(settings: Settings) -> dict[str, str]:
    """What spark-submit's environment needs beside annotator_properties: the
    events password, which the driver (and local executors) inherit."""
    _, password = settings.events_credentials or (None, None)
    return {EVENTS_PASSWORD_ENV: password} if password else {}
