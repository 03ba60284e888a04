"""Spark's settings for a release of the Helm chart (charts/sparkscope/): what
`./sparkscope conf --k8s` prints, the same flags the release's NOTES.txt
prints (charts/sparkscope/templates/_helpers.tpl, "sparkscope.submitFlags";
tests/test_chart.py compares them, and the host names with the Services
`helm template` renders).

The Graphite sink and the annotator are pointed at the Telegraf Service by its
cluster DNS name, <fullname>-telegraf.<namespace>.svc.<clusterDomain>, so
Spark's pods reach it from any namespace. The events password is never
printed: the last flag has the user's shell read it from the release's Secret
at submit time, as NOTES.txt does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from sparkscope.errors import SparkscopeError
from sparkscope.store.http import EVENTS_PASSWORD_ENV
from sparkscope.spark.conf import as_flags, conf_flags, for_stack, listener_properties, read_properties, with_endpoint

CHART_VALUES = Path("charts") / "sparkscope" / "values.yaml"
SECRET_KEY = "events-password"
# What helm accepts as a release name, and Kubernetes as a namespace (a DNS label).
RELEASE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


class ReleaseError(SparkscopeError):
    """A release name, namespace or values file that the chart would not take."""


def merged(base: dict, override: dict) -> dict:
    """base with override laid over it, maps merged key by key, as helm merges -f files."""
    out = dict(base)
    for key, value in override.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def chart_values(root: Path, files: tuple[Path, ...] = ()) -> dict:
    """The chart's values.yaml with each file (as given to helm install -f) laid over it, in order."""
    try:  # imported here: every other command runs without PyYAML
        import yaml
    except ImportError as err:
        raise ReleaseError(f"conf --k8s reads the chart's values.yaml with PyYAML ({err}): pip install pyyaml "
                           "(./sparkscope has it in .venv)") from err
    values = yaml.safe_load((root / CHART_VALUES).read_text())
    for path in files:
        try:
            given = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as err:
            raise ReleaseError(f"cannot read values file {path}: {err}") from err
        if not isinstance(given, dict):
            raise ReleaseError(f"{path}: a values file is a YAML map, as for helm install -f")
        values = merged(values, given)
    return values


@dataclass(frozen=True)
class Release:
    """One `helm install <name> charts/sparkscope -n <namespace> [-f values]`."""
    name: str
    namespace: str
    values: dict

    def __post_init__(self) -> None:
        if len(self.name) > 53 or not RELEASE_NAME.fullmatch(self.name):
            raise ReleaseError(f"release name {self.name!r}: helm takes lower-case letters, digits, '-' and '.', "
                               "at most 53 characters, starting and ending with a letter or digit")
        if len(self.namespace) > 63 or not NAMESPACE.fullmatch(self.namespace):
            raise ReleaseError(f"namespace {self.namespace!r}: Kubernetes takes lower-case letters, digits and '-', "
                               "at most 63 characters, starting and ending with a letter or digit")

    @property
    def fullname(self) -> str:
        """The prefix of every object's name (the chart's "sparkscope.fullname")."""
        name = (self.values.get("fullnameOverride") or self.name)[:40]
        return name[:-1] if name.endswith("-") else name

    @property
    def telegraf_host(self) -> str:
        return f"{self.fullname}-telegraf.{self.namespace}.svc.{self.values['clusterDomain']}"

    @property
    def secret_name(self) -> str:
        return self.values["secrets"].get("existingSecret") or f"{self.fullname}-secrets"

    @property
    def annotator(self) -> bool:
        return bool(self.values["spark"]["annotator"]["enabled"])

    @property
    def events_auth(self) -> bool:
        return self.annotator and bool(self.values["events"]["auth"])


def endpoint(release: Release) -> dict:
    spark, ports = release.values["spark"], release.values["telegraf"]["ports"]
    return {"graphite_host": release.telegraf_host, "graphite_port": int(ports["graphite"]),
            "prefix": spark["prefix"], "period_s": int(spark["periodSeconds"])}


def annotator_props(release: Release) -> dict[str, str]:
    """The annotator's settings for the release, without the password (it stays in the Secret)."""
    if not release.annotator:
        return {}
    events_url = f"http://{release.telegraf_host}:{int(release.values['telegraf']['ports']['events'])}"
    user = release.values["events"]["user"] if release.events_auth else None
    props = listener_properties(release.values["spark"]["annotator"]["jar"], events_url, user,
                                EVENTS_PASSWORD_ENV if user else None)
    if user:  # the pods read the password from the Secret; Spark's settings (and its ConfigMap) name it only
        for role in ("driver", "executor"):
            props[f"spark.kubernetes.{role}.secretKeyRef.{EVENTS_PASSWORD_ENV}"] = \
                f"{release.secret_name}:{SECRET_KEY}"
    return props


def spark_properties(root: Path, release: Release) -> dict[str, str]:
    """Every Spark setting for the release, the password left out: what the
    release's spark-conf ConfigMap holds, and what a SparkApplication's
    sparkConf takes (spark.jars included)."""
    props = with_endpoint(read_properties(root / "spark-conf" / "spark-defaults.conf"), **endpoint(release))
    return {**for_stack(props, release.values["telegraf"]["unreadMetrics"]), **annotator_props(release)}


def submit_flags(root: Path, release: Release) -> list[str]:
    """spark-submit flags for the release, one a list item, as `./sparkscope
    conf` prints them for a host (spark.jars as --jars), then the password
    read from the Secret when the annotator's listener asks for one."""
    flags = conf_flags(root / "spark-conf" / "spark-defaults.conf", release.values["telegraf"]["unreadMetrics"],
                       **endpoint(release))
    return flags + as_flags(annotator_props(release))
