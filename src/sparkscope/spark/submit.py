"""Runs spark-submit from the pyspark package with sparkscope attached."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from sparkscope.provision import BuildError, exclusive
from sparkscope.process import Progress, run_logged


def spark_home() -> Path:
    """The pyspark package directory: it ships bin/spark-submit and the jars."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def ensure_pyspark(version: str, cache_dir: Path, progress: Progress = print, extras: tuple[str, ...] = ()) -> Path:
    """SPARK_HOME of another pyspark version, in its own cached venv
    (e.g. Spark 4 next to the project's Spark 3.5). extras: pyspark's own
    extras to have in that venv as well ("connect": the Spark Connect client's
    grpcio, grpcio-status, googleapis-common-protos, pandas, pyarrow,
    zstandard), installed on first need into a venv made without them."""
    venv = cache_dir / "venvs" / f"pyspark-{version}"
    python = venv / "bin" / "python"
    home = venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages" / "pyspark"

    def missing() -> list[str]:
        return [extra for extra in sorted(set(extras)) if not (venv / f".ready-{extra}").is_file()]

    if (venv / ".ready").is_file() and not missing():
        return home
    # A venv is made in place: one install at a time, the second finds it ready.
    with exclusive(venv.parent / f"pyspark-{version}.lock"):
        made = (venv / ".ready").is_file()
        if made and not missing():
            return home
        wanted = missing()
        spec = f"pyspark[{','.join(wanted)}]=={version}" if wanted else f"pyspark=={version}"
        log = cache_dir / "venvs" / f"pyspark-{version}.log"
        steps = [] if made else [([sys.executable, "-m", "venv", "--clear", str(venv)], "python -m venv")]
        steps.append(([str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", spec],
                      f"pip install {spec}"))
        progress(f"installing {spec} into {venv} (first use only"
                 + (", ~450 MB)" if not made else ")"))
        for argv, label in steps:
            if run_logged(argv, log, label, progress).returncode != 0:
                raise BuildError(f"{label} failed; see {log}")
        if not (home / "bin" / "spark-submit").is_file():
            raise BuildError(f"pyspark {version} installed but {home}/bin/spark-submit is missing; see {log}")
        (venv / ".ready").touch()
        for extra in wanted:
            (venv / f".ready-{extra}").touch()
    return home


def private_home(log: Path, home: Path | None = None) -> Path:
    """A SPARK_HOME for one run, made beside its log: links to each entry of
    the real home (bin, jars, python, ...) and a `work` folder of its own.

    Standalone and local-cluster workers put each executor's folder and its
    stdout/stderr in SPARK_HOME/work/<app id>/<executor id>. The app id is the
    master's start second and a counter that begins at 0000 in every master, so
    two local-cluster runs started in the same second name the same folder and
    the second one's executors fail to launch ("Failed to create directory").
    In the pyspark package's own home that folder also grows by every run's
    executor logs, inside the venv."""
    real = (home or spark_home()).resolve()
    log.parent.mkdir(parents=True, exist_ok=True)
    run = Path(tempfile.mkdtemp(prefix=f"{log.stem}.spark-", dir=log.parent))
    for entry in real.iterdir():
        if entry.name != "work":
            (run / entry.name).symlink_to(entry)
    (run / "work").mkdir()
    return run


def spark_env(log: Path, home: Path | None = None) -> dict[str, str]:
    """Spark's environment for one run whose log is `log`: its executors'
    logs go to a private home beside it (see private_home)."""
    env = dict(os.environ)
    env["SPARK_HOME"] = str(private_home(log, home))
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    # local and local-cluster runs: keep every Spark port on loopback.
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return env


def submit_argv(script: Path, master: str, conf: dict[str, str], args: list[str] = (),
                home: Path | None = None) -> list[str]:
    argv = [str((home or spark_home()) / "bin" / "spark-submit"), "--master", master]
    for key, value in conf.items():
        argv += ["--conf", f"{key}={value}"]
    return argv + [str(script), *args]


def run_submit(argv: list[str], log_path: Path, timeout_s: float,
               home: Path | None = None,
               env: dict[str, str | None] | None = None) -> subprocess.CompletedProcess[str]:
    """Run spark-submit; stdout returned, Spark's log (stderr) kept in log_path;
    env: variables added to Spark's environment, or taken out of it where None."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    environ = {key: value for key, value in {**spark_env(log_path, home), **(env or {})}.items()
               if value is not None}
    if home is not None:  # that Spark's own Python, with its own pyspark
        environ["PYSPARK_PYTHON"] = str(home.parents[3] / "bin" / "python")
    with open(log_path, "w") as log:
        return subprocess.run(argv, env=environ, stdout=subprocess.PIPE, stderr=log,
                              text=True, timeout=timeout_s)
