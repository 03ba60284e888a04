"""The read layer (store/reads.py) takes a run id, a name or a field as data:
whatever a Spark job wrote there reaches InfluxQL as a quoted literal or
identifier, never as query text."""

from __future__ import annotations

import inspect

import pytest

from sparkscope.store import influx
from sparkscope.store.reads import InfluxReads, Reads, Recent, Run
from sparkscope.store.schema import STAGE_MEASUREMENT

HOSTILE = "app' OR 1=1 --\\\"x\n/"


class Recorder(InfluxReads):
    def __init__(self):
        super().__init__("http://127.0.0.1:1", "spark")
        self.sent: list[str] = []

    def q(self, statement: str) -> list[dict]:
        self.sent.append(statement)
        return []


def calls(reads: InfluxReads) -> dict[str, object]:
    """Every public method taking a run id, called with the hostile id."""
    args = {"app_id": HOSTILE, "app_name": HOSTILE, "span": (0, 1), "measurement": STAGE_MEASUREMENT,
            "long_run_ms": 10, "tail_ms": 1, "bucket_s": 10, "when": "time > 0", "stage_id": 3, "field": HOSTILE,
            "depth": 5, "most": 3, "seconds": 5, "event": HOSTILE, "executor_id": HOSTILE, "job": HOSTILE,
            "counters": ("runTime.count", HOSTILE), "recent": Recent(5.0), "measurements": ("JVMHeapMemory",),
            "executors": [HOSTILE, "1"]}
    done = {}
    for name, method in inspect.getmembers(reads, inspect.ismethod):
        params = inspect.signature(method).parameters
        if name.startswith("_") or not {"app_id", "app_name", "job"} & set(params):
            continue
        done[name] = method(**{p: args[p] for p in params if p in args})
    return done


def unquoted(statement: str, value: str) -> bool:
    """Whether the statement holds the value anywhere but as a quoted literal or identifier."""
    text = statement.replace(influx.string_literal(value), "").replace(influx.identifier(value), "")
    return "OR 1=1" in text


def test_every_read_of_a_run_quotes_its_id_and_names():
    reads = Recorder()
    done = calls(reads)
    assert {"run", "finished_runs", "job_runs", "jobs", "run_totals", "memory_conf", "executor_peaks", "stages", "containers", "streaming",
            "stage_text", "executor_events"} <= set(done)
    assert reads.sent and not [s for s in reads.sent if unquoted(s, HOSTILE)]
    assert all(influx.string_literal(HOSTILE) in s or influx.identifier(HOSTILE) in s for s in reads.sent
               if "applicationid" in s or "app_name" in s or '"job"' in s)


def test_the_quoting_check_finds_an_id_pasted_into_the_query():
    class Careless(Recorder):
        def memory_conf(self, app_id):
            self.q(f"SELECT * FROM x WHERE applicationid = '{app_id}'")
            return {}

    reads = Careless()
    calls(reads)
    assert [s for s in reads.sent if unquoted(s, HOSTILE)]


def test_only_annotation_measurements_are_read_as_ended_entities():
    with pytest.raises(ValueError):
        Recorder().ended("JVMHeapMemory", "app-1")


def test_a_second_store_implements_the_same_methods():
    # Reads is the contract: each of its methods is answered by InfluxReads.
    contract = {n for n, _ in inspect.getmembers(Reads, inspect.isfunction) if not n.startswith("_")}
    assert contract and all(getattr(InfluxReads, n) is not getattr(Reads, n) for n in contract)
    with pytest.raises(NotImplementedError):
        Reads().runs()


def test_runs_pairs_each_start_with_its_end():
    class Store(Recorder):
        def q(self, statement):
            if "RUNNING'" in statement and "<>" not in statement:
                return [{"columns": ["time", "app_name", "applicationid"],
                         "values": [[2000, "b", "app-2"], [1000, "a", "app-1"]]}]
            return [{"columns": ["time", "end_time_ms", "duration_ms", "applicationid", "status"],
                     "values": [[1000, 5000, 4000, "app-1", "FINISHED"]]}]

    runs = Store().runs()
    assert runs == [Run("app-2", "b", 2000, job="b"), Run("app-1", "a", 1000, 5000, "FINISHED", 4000, job="a")]
    assert runs[0].running and not runs[1].running


def test_reads_that_grow_with_a_run_or_the_retention_are_bounded():
    reads = Recorder()
    reads.finished_runs()
    reads.stages("app-1")
    reads.queries("app-1")
    reads.stage_peaks("app-1")
    assert len(reads.sent) == 4
    assert all("ORDER BY time DESC LIMIT" in s for s in reads.sent), reads.sent


def test_the_newest_entities_come_back_oldest_first_and_a_doubled_end_is_one_run():
    class Store(Recorder):
        def q(self, statement):
            if "FINISHED" in statement:
                return [{"columns": ["time", "app_name", "end_time_ms", "duration_ms", "applicationid"],
                         "values": [[3000, "b", 9, 1, "app-2"], [2000, "a", 8, 1, "app-1"], [1000, "a", 7, 1, "app-1"]]}]
            return [{"columns": ["time", "stage_id"], "values": [[30, 3], [20, 2], [10, 1]]}]

    store = Store()
    assert [r.app_id for r in store.finished_runs()] == ["app-2", "app-1"]
    assert [s["stage_id"] for s in store.stages("app-1")] == [1, 2, 3]


def test_a_job_s_runs_are_those_of_its_job_or_of_its_name_before_jobs_were_stored():
    class Store(Recorder):
        def q(self, statement):
            self.sent.append(statement)
            return [{"columns": ["time", "app_name", "job", "end_time_ms", "duration_ms", "applicationid"],
                     "values": [[3000, "etl", "etl", 9000, 6000, "app-3"],  # the job named after the app
                                [2000, "etl", "other", 8000, 6000, "app-2"],  # named etl, but of another job
                                [1000, "etl", None, 7000, 6000, "app-1"]]}]  # stored before the job field

    assert [r.app_id for r in Store().job_runs("etl")] == ["app-3", "app-1"]
