"""Runs spark-submit from the pyspark package with sparkscope attached."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sparkscope.settings import Settings
from sparkscope.sparkconf import read_properties, with_endpoint


def spark_home() -> Path:
    """The pyspark package directory: it ships bin/spark-submit and the jars."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def spark_env() -> dict[str, str]:
    env = dict(os.environ)
    env["SPARK_HOME"] = str(spark_home())
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    # local and local-cluster runs: keep every Spark port on loopback.
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return env


def sparkscope_properties(settings: Settings, period_s: int | None = None) -> dict[str, str]:
    """spark-conf/spark-defaults.conf pointed at this stack's Graphite listener."""
    props = read_properties(settings.root / "spark-conf" / "spark-defaults.conf")
    return with_endpoint(props, graphite_host=settings.graphite_host,
                         graphite_port=settings.graphite_port, period_s=period_s)


def submit_argv(script: Path, master: str, conf: dict[str, str], args: list[str] = ()) -> list[str]:
    argv = [str(spark_home() / "bin" / "spark-submit"), "--master", master]
    for key, value in conf.items():
        argv += ["--conf", f"{key}={value}"]
    return argv + [str(script), *args]


def run_submit(argv: list[str], log_path: Path, timeout_s: float) -> subprocess.CompletedProcess[str]:
    """Run spark-submit; stdout returned, Spark's log (stderr) kept in log_path."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log:
        return subprocess.run(argv, env=spark_env(), stdout=subprocess.PIPE, stderr=log,
                              text=True, timeout=timeout_s)
