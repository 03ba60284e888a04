"""Helm (Apache-2.0), for the chart's tests: `helm lint` and `helm template`
of charts/sparkscope/. No cluster is needed for either.

Built from source with `go install helm.sh/helm/v3/cmd/helm@<version>` (the
Go module proxy serves it; the module has no replace directives) and cached
under <cache>/bin/helm-<version>/, moved there only once the build succeeded,
so an interrupted build is simply redone.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from sparkscope.provision import BuildError
from sparkscope.provision.go import go_env
from sparkscope.process import Progress, log_tail, run_logged

HELM_MODULE = "helm.sh/helm/v3/cmd/helm"
HELM_VERSION = "v3.22.0"
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
    dest = cache_dir / "bin" / f"helm-{HELM_VERSION}"
    target = dest / "helm"
    if target.is_file():
        return target
    env = go_env()
    dest.parent.mkdir(parents=True, exist_ok=True)
    progress(f"building helm {HELM_VERSION} from source, for the chart's tests (first run only, a few minutes)")
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    try:
        env["GOBIN"] = str(staging)
        log = dest.parent / f"{dest.name}.build.log"
        cmd = ["go", "install", "-trimpath", f"-ldflags={LDFLAGS}", f"{HELM_MODULE}@{HELM_VERSION}"]
        done = run_logged(cmd, log, "go install helm", progress, env=env)
        if done.returncode != 0:
            raise BuildError(
                f"go install helm failed (exit {done.returncode}) after {done.seconds:.0f} s:\n"
                f"{log_tail(log)}\n  Full log: {log}. It needs Go 1.26+ (helm {HELM_VERSION}'s go.mod says so) "
                f"and, the first time, the Go module proxy (GOPROXY); fix the cause and run again.")
        if not (staging / "helm").is_file():
            raise BuildError(f"go install finished but {staging / 'helm'} is missing; see {log}")
        try:
            os.replace(staging, dest)
        except OSError:
            if not target.is_file():  # else another run stored the same build first
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
