"""Telegraf's "no end seen" processor, the second writer of sparkscope_application,
is generated from the typed schema (sparkscope.generate.no_end_seen): the
checked-in telegraf.conf holds what the generator writes, every tag and field
the script writes is declared for its measurement with the type it writes, and
a schema that loses one stops both the check and the generator."""

from __future__ import annotations

import dataclasses
import re

import pytest

from sparkscope.generate import no_end_seen
from sparkscope.generate.steps import COMMAND
from sparkscope.store import schema


def generated_script() -> str:
    conf = no_end_seen.TELEGRAF_CONF.read_text()
    return conf[conf.index(no_end_seen.BEGIN):conf.index(no_end_seen.END)]


def written(script: str) -> dict[str, tuple[set[str], set[str]]]:
    """Measurement -> (tags, fields) the script's assignments write, read through its
    declaration lines (NAME = "value", or NAMES, ... = "values", ...)."""
    names: dict[str, object] = {}
    for left, right in re.findall(r'^([A-Z_, ]+) = (.+)$', script, re.M):
        values = re.findall(r'"([^"]*)"', right)
        for name, value in zip([n.strip() for n in left.split(",")], values if not right.startswith("[") else [values]):
            names[name] = value
    out = {}
    for var, measurement in re.findall(r'^\s+(\w+) = Metric\((\w+)\)$', script, re.M):
        tags = {names[k] for k in re.findall(rf'{var}\.tags\[(\w+)\] =', script)}
        keys = re.findall(rf'{var}\.fields\[(\w+)\] =', script)
        # `field` is the loop over CARRIED: the start point's fields the end repeats.
        fields = {f for k in keys for f in (names["CARRIED"] if k == "field" else [names[k]])}
        out[names[measurement]] = (tags, fields)
    return out


def test_the_processor_in_telegraf_conf_is_the_one_the_schema_generates():
    conf = no_end_seen.TELEGRAF_CONF.read_text()
    assert no_end_seen.with_block(conf) == conf, f"telegraf/telegraf.conf is stale: run {COMMAND}"


def test_the_script_writes_exactly_what_its_declaration_says():
    script = generated_script()
    assert not re.search(r'\.(tags|fields)\["', script), "the script spells a key instead of naming a declaration"
    assert written(script) == {name: (set(tags), set(fields)) for name, (tags, fields) in no_end_seen.WRITES.items()}


def test_every_tag_and_field_it_writes_is_declared_with_the_type_it_writes():
    assert no_end_seen.problems() == []
    app = schema.BY_NAME[schema.APPLICATION_MEASUREMENT]
    assert schema.TELEGRAF in app.also_written_by
    assert no_end_seen.WRITES[schema.APPLICATION_MEASUREMENT][1]["duration_ms"] == schema.INTEGER


@pytest.mark.parametrize("change, problem", [
    (lambda fields: tuple(f for f in fields if f[0] != "duration_ms"),
     "sparkscope_application: field duration_ms is written, not declared"),
    (lambda fields: tuple((f, schema.STRING if f == "end_time_ms" else t) for f, t in fields),
     "sparkscope_application: field end_time_ms is written as integer, declared string"),
])
def test_a_schema_that_loses_or_retypes_a_written_field_stops_the_check_and_the_generator(monkeypatch, change,
                                                                                        problem):
    app = schema.BY_NAME[schema.APPLICATION_MEASUREMENT]
    monkeypatch.setitem(schema.BY_NAME, app.name, dataclasses.replace(app, fields=change(app.fields)))
    assert no_end_seen.problems() == [problem]
    with pytest.raises(SystemExit, match=problem):
        no_end_seen.block()
