"""The typed schema (src/sparkscope/store/schema.py) against what a real run
stores: after one Spark application with the annotator (conftest's
metrics_run), every field and tag InfluxDB holds for a declared measurement
of Spark or the annotator is declared, with the declared type, and the
measurements every such run writes are there.

Telegraf's ingest guard (sparkscope.ingest_guard) strips an undeclared tag or
field, or one of another type, from the annotator's points before they are
stored, so a writer that drifted from the schema shows as a refusal, not as
a stored key: the refusals the run caused are part of the contract too."""

from __future__ import annotations

import dataclasses

import pytest

from sparkscope import ingest_guard
from sparkscope.store import schema

# What every batch run with the annotator writes (metrics_job.py: SQL, shuffles,
# two executors): events, peaks, settings, task totals, and Spark's own metrics.
MUST_WRITE = (
    schema.APPLICATION_MEASUREMENT, schema.QUERY_MEASUREMENT, schema.JOB_MEASUREMENT, schema.STAGE_MEASUREMENT,
    schema.EXECUTOR_MEASUREMENT, schema.EXECUTOR_PEAKS_MEASUREMENT, schema.STAGE_PEAKS_MEASUREMENT,
    schema.STAGE_EXECUTOR_PEAKS_MEASUREMENT, schema.MEMORY_CONF_MEASUREMENT,
    *(schema.TASK_TOTALS_PREFIX + counter for counter in schema.TASK_TIME_COUNTERS),
    schema.JVM_HEAP_MEMORY, schema.HEAP_MAX, schema.THREADPOOL_ACTIVE_TASKS, schema.JVM_CPU_TIME,
    schema.RUN_TIME_COUNT, schema.SHUFFLE_BYTES_WRITTEN_COUNT, schema.PROCESS_TREE_JVM_RSS_MEMORY,
)
# Spark's metrics come through Telegraf's Graphite templates: their tags, one float "value".
GRAPHITE_FIELDS = (("value", schema.FLOAT),)
CHECKED_WRITERS = (schema.SPARK, schema.ANNOTATOR)


def declared_shape(m: schema.Measurement) -> tuple[set[str], schema.Measurement]:
    """The tags a measurement may hold, and the declaration that types its fields."""
    if m.writer == schema.SPARK:
        return set(ingest_guard.GRAPHITE_TAGS), schema.Measurement(m.name, m.writer, fields=GRAPHITE_FIELDS)
    return {*m.tags, schema.HOST_TAG}, m


def stored_keys(stack, statement: str) -> dict[str, list[list]]:
    """Measurement -> the rows of SHOW FIELD KEYS or SHOW TAG KEYS (on every measurement)."""
    return {series["name"]: series["values"] for series in stack.influx(statement)}


@pytest.fixture(scope="module")
def stored(stack, metrics_run) -> tuple[dict, dict]:
    """(fields, tags) InfluxDB holds after the run: its field keys with their types, and the
    tag keys of the run's series."""
    return (stored_keys(stack, "SHOW FIELD KEYS"),
            stored_keys(stack, f"SHOW TAG KEYS WHERE \"{schema.APPLICATION}\" = '{metrics_run.app_id}'"))


def contract_problems(fields: dict, tags: dict, measurements=schema.MEASUREMENTS) -> tuple[list[str], int]:
    """Each stored field or tag of a declared Spark or annotator measurement that the
    declaration lacks or types otherwise; and how many measurements were checked."""
    checked = [m for m in measurements if m.writer in CHECKED_WRITERS and m.name in fields]
    problems = []
    for m in checked:
        allowed_tags, typed = declared_shape(m)
        for field, kind in fields[m.name]:
            declared = typed.field_type(field)
            if declared is None:
                problems.append(f"{m.name}: field {field} ({kind}) is stored, not declared")
            elif declared != kind:
                problems.append(f"{m.name}: field {field} is stored as {kind}, declared {declared}")
        problems += [f"{m.name}: tag {tag} is stored, not declared"
                     for (tag,) in tags.get(m.name, []) if tag not in allowed_tags]
    return problems, len(checked)


def test_every_stored_field_and_tag_of_a_real_run_is_declared_with_its_type(stack, metrics_run, stored):
    fields, tags = stored
    problems, checked = contract_problems(fields, tags)
    # What the guard took out of the annotator's points while the run wrote them.
    refused = stack.influx(
        f'SELECT "points", "keys", "last", "refusal" FROM "{schema.INGEST_REFUSED_MEASUREMENT}" '
        f"WHERE time >= {metrics_run.started_ms}ms AND time <= {metrics_run.ended_ms + 30_000}ms")
    refusals = [f"refused by the ingest guard: {row[4]} ({row[3]})" for s in refused for row in s["values"]]
    assert checked >= len(MUST_WRITE)
    # The guard refuses an undeclared measurement of ours whole: none may be stored.
    problems += [f"{name}: stored, not declared" for name in fields
                 if name.startswith(ingest_guard.RESERVED_PREFIXES) and name not in schema.BY_NAME]
    assert not problems + refusals, "\n".join(problems + refusals)


def test_the_measurements_every_annotated_run_writes_are_stored(stored):
    fields, _ = stored
    assert [name for name in MUST_WRITE if name not in fields] == []


def test_the_contract_check_finds_a_stored_field_the_schema_lost_or_typed_otherwise(stored):
    fields, tags = stored
    stage = schema.BY_NAME[schema.STAGE_MEASUREMENT]
    lost = dataclasses.replace(stage, fields=tuple(f for f in stage.fields if f[0] != "task_max_ms"),
                               tags=tuple(t for t in stage.tags if t != "straggler"))
    retyped = dataclasses.replace(stage, fields=tuple((f, schema.FLOAT if f == "stage_id" else t)
                                                      for f, t in stage.fields))
    assert contract_problems(fields, tags, [lost])[0] == [
        "sparkscope_stage: field task_max_ms (integer) is stored, not declared",
        "sparkscope_stage: tag straggler is stored, not declared"]
    assert contract_problems(fields, tags, [retyped])[0] == [
        "sparkscope_stage: field stage_id is stored as integer, declared float"]
