"""The annotator jar (annotator/, Maven), rebuilt when its sources change."""

from __future__ import annotations

import shutil
from pathlib import Path

from sparkscope.provision import BuildError, exclusive
from sparkscope.process import Progress, log_tail, run_logged


def jar_path(root: Path) -> Path:
    return root / "annotator" / "target" / "sparkscope-annotator.jar"


def _newest_source(root: Path) -> float:
    sources = [root / "annotator" / "pom.xml", *(root / "annotator" / "src").rglob("*")]
    return max(p.stat().st_mtime for p in sources if p.is_file())


def ensure_annotator_jar(root: Path, progress: Progress = print) -> Path:
    """The jar, rebuilt with `mvn package` (unit tests included) when its sources changed."""
    jar = jar_path(root)

    def current() -> bool:
        return jar.is_file() and jar.stat().st_mtime >= _newest_source(root)

    if current():
        return jar
    if shutil.which("mvn") is None:
        raise BuildError("Maven (mvn) is needed to build the annotator jar: install it "
                         "(apt-get install maven) and Java 8+")
    # Maven's shade step replaces the jar in place: a second build at once fails it.
    with exclusive(jar.parent / ".build.lock"):
        if current():  # built by whoever held the lock
            return jar
        progress("building the annotator jar (mvn package, runs its unit tests)")
        log = root / "annotator" / "target" / "build.log"
        done = run_logged(["mvn", "-B", "-q", "package"], log, "mvn package (annotator)", progress,
                          cwd=root / "annotator")
        if done.returncode != 0:
            raise BuildError(f"mvn package (annotator) failed (exit {done.returncode}):\n{log_tail(log)}\n"
                             f"  Full log: {log}")
        if not jar.is_file():
            raise BuildError(f"mvn package finished but {jar} is missing")
    return jar
