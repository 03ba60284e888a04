"""Builds the annotator jar (annotator/, Maven) and says how to attach it."""

from __future__ import annotations

import shutil
from pathlib import Path

from sparkscope.install import InstallError, Progress, run_with_progress
from sparkscope.settings import Settings

LISTENER_CLASS = "dev.sparkscope.annotator.AnnotatorListener"


def jar_path(root: Path) -> Path:
    return root / "annotator" / "target" / "sparkscope-annotator.jar"


def _newest_source(root: Path) -> float:
    sources = [root / "annotator" / "pom.xml", *(root / "annotator" / "src").rglob("*")]
    return max(p.stat().st_mtime for p in sources if p.is_file())


def ensure_annotator_jar(root: Path, progress: Progress = print) -> Path:
    """The jar, rebuilt with `mvn package` (unit tests included) when its sources changed."""
    jar = jar_path(root)
    if jar.is_file() and jar.stat().st_mtime >= _newest_source(root):
        return jar
    if shutil.which("mvn") is None:
        raise InstallError("Maven (mvn) is needed to build the annotator jar: install it "
                           "(apt-get install maven) and Java 8+")
    progress("building the annotator jar (mvn package, runs its unit tests)")
    run_with_progress(["mvn", "-B", "-q", "package"], root / "annotator" / "target" / "build.log",
                      "mvn package (annotator)", progress, cwd=root / "annotator")
    if not jar.is_file():
        raise InstallError(f"mvn package finished but {jar} is missing")
    return jar


def annotator_properties(settings: Settings, jar: Path) -> dict[str, str]:
    """Spark settings that attach the listener and point it at this stack's
    Telegraf events listener (which writes to InfluxDB's database)."""
    return {
        "spark.jars": str(jar),
        "spark.extraListeners": LISTENER_CLASS,
        "spark.sparkscope.influx.url": settings.events_url,
    }
