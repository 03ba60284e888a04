"""Helm (Apache-2.0), for the chart's tests: `helm lint` and `helm template`
of charts/sparkscope/. No cluster is needed for either.

Built from source with `go install helm.sh/helm/v3/cmd/helm@<version>` (the
Go module proxy serves it; the module has no replace directives) and cached
under <cache>/bin/helm-<version>/, moved there only once the build succeeded,
so an interrupted build is simply redone.
"""

from __future__ import annotations

from pathlib import Path

from sparkscope import versions
from sparkscope.provision.go import go_install
from sparkscope.process import Progress

HELM_MODULE = "helm.sh/helm/v3/cmd/helm"
HELM_VERSION = f"v{versions.HELM}"
# What helm's own release build (its Makefile) sets with -ldflags, which a
# plain `go install` does not: the version `helm version` prints, and the
# Kubernetes version that `helm template` and `helm lint` assume without
# --kube-version: its client-go's minor (v0.37 -> 1.37). Without them helm
# assumes Kubernetes 1.20 and refuses a chart whose kubeVersion asks for more.
KUBE_MINOR = "37"
LDFLAGS = " ".join([f"-X helm.sh/helm/v3/internal/version.version={HELM_VERSION}"] + [
    f"-X helm.sh/helm/v3/pkg/{package}.k8sVersion{part}={value}"
    for package in ("chartutil", "lint/rules") for part, value in (("Major", "1"), ("Minor", KUBE_MINOR))])


def ensure_helm(cache_dir: Path, progress: Progress = print) -> Path:
    """The helm binary, built with `go install` on first use (atomically); returns its path."""
    return go_install(HELM_MODULE, HELM_VERSION, "helm", cache_dir / "bin" / f"helm-{HELM_VERSION}", progress,
                      flags=("-trimpath", f"-ldflags={LDFLAGS}"),
                      what=f"helm {HELM_VERSION} from source, for the chart's tests (first run only, about two minutes)",
                      needs=f"It needs Go 1.26+ (helm {HELM_VERSION}'s go.mod says so) and, the first time, the "
                            f"Go module proxy (GOPROXY). ")
