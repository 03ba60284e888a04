"""kubeconform (Apache-2.0) and Kubernetes' JSON schemas for it, offline, for
the chart's tests: every object `helm template` renders is validated against
the strict schemas of every Kubernetes minor the chart claims (Chart.yaml's
kubeVersion, up to the newest the schemas cover).

kubeconform is built with `go install` (the Go module proxy serves it; its
go.mod has no replace directive) and cached under <cache>/bin/kubeconform-<version>/.

The schemas are the ones the PyPI package kubernetes-validate ships (a test
dependency), for Kubernetes 1.25 to 1.37 in its 1.37.0. kubeconform cannot
read them as shipped: each kind's file has the `$id`
https://kubernetes.io/api/<kind>/... and refers to
"/api/_definitions.json#/$defs/...", which resolves to kubernetes.io, and
kubeconform would fetch that over the network (and, offline, report "could
not find schema"). So the strict directories are copied once per
kubernetes-validate version to <cache>/kubeconform-schemas/kubernetes-validate-<version>/
with the `$id`s dropped and those references made relative to the file
(`_definitions.json#/$defs/...`); nothing else changes.
"""

from __future__ import annotations

import json
from pathlib import Path

from sparkscope import versions
from sparkscope.provision import BuildError, build_once
from sparkscope.provision.go import go_install
from sparkscope.process import Progress

KUBECONFORM_MODULE = "github.com/yannh/kubeconform/cmd/kubeconform"
KUBECONFORM_VERSION = f"v{versions.KUBECONFORM}"
SHIPPED_REF = "/api/_definitions.json#"
LOCAL_REF = "_definitions.json#"
# kubeconform's -schema-location template: <dir>/v1.30.0-local-strict/deployment-apps-v1.json
LOCATION = "{{ .NormalizedKubernetesVersion }}-local{{ .StrictSuffix }}/{{ .ResourceKind }}{{ .KindSuffix }}.json"


def ensure_kubeconform(cache_dir: Path, progress: Progress = print) -> Path:
    """The kubeconform binary, built with `go install` on first use; returns its path."""
    return go_install(KUBECONFORM_MODULE, KUBECONFORM_VERSION, "kubeconform",
                      cache_dir / "bin" / f"kubeconform-{KUBECONFORM_VERSION}", progress)


def shipped_schemas() -> tuple[str, Path]:
    """kubernetes-validate's version and its directory of schemas."""
    try:
        import kubernetes_validate
        from importlib.metadata import version
    except ImportError as err:
        raise BuildError(f"the chart's schema check needs the Python package kubernetes-validate ({err}): "
                         "./sparkscope test installs it in .venv (pip install -e '.[test]')") from err
    return version("kubernetes-validate"), Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"


def kube_versions(schema_dir: Path, oldest: tuple[int, int]) -> list[str]:
    """Every Kubernetes version with strict schemas in schema_dir from oldest
    (major, minor) on, oldest first: ["1.25.0", ..., "1.37.0"]."""
    found = []
    for path in schema_dir.glob("v*-local-strict"):
        version = path.name[1:-len("-local-strict")]
        major, minor, *_ = (int(part) for part in version.split("."))
        if (major, minor) >= oldest:
            found.append(((major, minor), version))
    return [version for _, version in sorted(found)]


def localized(node):
    """A schema document with its `$id`s dropped and its references to the
    shared definitions made relative to the file."""
    if isinstance(node, dict):
        return {key: (value.replace(SHIPPED_REF, LOCAL_REF, 1)
                      if key == "$ref" and isinstance(value, str) and value.startswith(SHIPPED_REF)
                      else localized(value))
                for key, value in node.items() if key != "$id"}
    if isinstance(node, list):
        return [localized(value) for value in node]
    return node


def ensure_schemas(cache_dir: Path, progress: Progress = print) -> Path:
    """kubernetes-validate's strict schemas, readable by kubeconform offline
    (written once per kubernetes-validate version, atomically); returns the
    directory to give kubeconform's -schema-location (with LOCATION)."""
    version, source = shipped_schemas()
    dest = cache_dir / "kubeconform-schemas" / f"kubernetes-validate-{version}"
    if dest.is_dir():
        return dest
    strict = sorted(source.glob("v*-local-strict"))
    if not strict:
        raise BuildError(f"no strict schemas in {source}: reinstall kubernetes-validate "
                         "(pip install --force-reinstall kubernetes-validate)")
    progress(f"preparing Kubernetes' schemas for kubeconform ({len(strict)} versions from "
             f"kubernetes-validate {version}; once, about a minute)")

    def fill(staging: Path) -> None:
        for number, directory in enumerate(strict, 1):
            out = staging / directory.name
            out.mkdir()
            for path in directory.glob("*.json"):
                (out / path.name).write_text(json.dumps(localized(json.loads(path.read_text()))))
            progress(f"  {directory.name} ({number}/{len(strict)})")

    return build_once(dest, fill)
