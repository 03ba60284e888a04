"""sparkscope.store.lineprotocol, fuzzed through the real path its writers use: a
POST to Telegraf's events listener, Telegraf's parser and serializer,
InfluxDB 1.13. Every string comes back as it went in (fields), or with only
the documented change (tags); no line of a batch is lost for another's value.
The annotator's Point writes the same rule: both are held to one table of
cases, write the same lines for the same points and profiles, and odd values
sent by both are stored under the same values."""

from __future__ import annotations

import json
import os
import random
import struct
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from sparkscope.store import http, lineprotocol
from sparkscope.store import influx
from sparkscope.provision.annotator_jar import ensure_annotator_jar
from sparkscope.settings import ROOT

# One table of odd inputs and the lines they must become, read by this module
# and by the annotator's PointTest: the Python and Java encoders cannot drift.
SHARED_CASES = Path(__file__).parent / "data" / "lineprotocol_cases.json"
FIELD_TYPES = {"string": str, "int": int, "float": float, "bool": bool}


def shared_cases() -> list[dict]:
    return json.loads(SHARED_CASES.read_text(encoding="utf-8"))["cases"]


def java_lines(request: dict) -> dict:
    """The annotator's writers (Point, ProfileLines) on the same inputs: the test
    class LinesForPython, run from the built jar and its test classes."""
    jar = ensure_annotator_jar(ROOT, progress=lambda _: None)
    classes = ROOT / "annotator" / "target" / "test-classes"
    assert (classes / "dev" / "sparkscope" / "annotator" / "core" / "LinesForPython.class").is_file(), \
        f"{classes} lacks LinesForPython: rebuild the annotator (cd annotator && mvn package)"
    done = subprocess.run(["java", "-cp", f"{classes}{os.pathsep}{jar}", "dev.sparkscope.annotator.core.LinesForPython"],
                          input=json.dumps(request).encode(), capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return json.loads(done.stdout.decode("utf-8"))


def line_of(case: dict) -> str:
    """A shared case written by sparkscope.store.lineprotocol."""
    fields = {key: None if value is None else FIELD_TYPES[kind](value) for key, kind, value in case["fields"]}
    return lineprotocol.line(case["measurement"], case["tags"], fields, case["time"])


SPECIAL = ["\n", "\r", "\t", "\f", "\v", "\x00", "\x07", "\x1b", '"', "'", "\\", ",", "=", " ", "é", "✓",
           "\ufffd", "\u2028", "$", "`", "/", "*"]
CASES = ["", "plain", "a\nb", "a\r\nb", "a\tb", "a\fb", "ends with a backslash\\", "two at the end\\\\",
         "\\", "\\\\\\", "a\\,b", "a\\ b", "a\\=b", 'quote"inside', "'single'", " leading and trailing ",
         "a,b=c d", "x$/ ; DROP MEASUREMENT \"canary\" ; SELECT 1 FROM /^y",
         b"invalid \xff\xfe utf-8".decode("utf-8", errors="replace"), "\x00\x01\x1f\x7f"]


def fuzzed(count: int, seed: int = 20261125) -> list[str]:
    rng = random.Random(seed)
    alphabet = SPECIAL + list("abcXYZ019-_.:")
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(count)]


def tag_as_stored(value: str) -> str:
    """What the module documents a tag value becomes (and nothing else)."""
    for char, name in {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f", "\v": "\\v"}.items():
        value = value.replace(char, name)
    stripped = value.rstrip("\\")
    return stripped + "\u29f5" * (len(value) - len(stripped))


def test_the_writer_refuses_what_influxdb_would_refuse():
    with pytest.raises(ValueError, match="needs at least one field"):
        lineprotocol.line("m", {"a": "b"}, {"x": None})
    assert lineprotocol.line("m", {"empty": "", "none": None, "a": "b"}, {"v": 1, "f": float("nan"), "s": "x"}, 5) \
        == 'm,a=b v=1i,s="x" 5'


def test_the_shared_cases_become_the_lines_the_table_gives():
    cases = shared_cases()
    assert len(cases) >= 40 and sum("error" in c for c in cases) >= 5
    wrong = []
    for case in cases:
        if "error" in case:
            try:
                wrong.append((case["case"], "written", line_of(case)))
            except ValueError:
                pass
        elif line_of(case) != case["line"]:
            wrong.append((case["case"], case["line"], line_of(case)))
    assert not wrong, wrong


def test_a_changed_expectation_in_the_shared_cases_is_caught(tmp_path, monkeypatch):
    """The check above, run on a copy of the table with one expected line changed, fails."""
    table = json.loads(SHARED_CASES.read_text(encoding="utf-8"))
    case = next(c for c in table["cases"] if "U+29F5" in c["case"])
    case["line"] = case["line"].replace("\u29f5", "")  # what the old Java rule wrote
    changed = tmp_path / "cases.json"
    changed.write_text(json.dumps(table), encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "SHARED_CASES", changed)
    with pytest.raises(AssertionError, match="trailing backslash"):
        test_the_shared_cases_become_the_lines_the_table_gives()


def test_integers_beyond_64_bits_are_refused_not_sent():
    """InfluxDB would refuse the line, and Telegraf the whole request with it."""
    assert lineprotocol.line("m", {}, {"v": 2**63 - 1}) == "m v=9223372036854775807i"
    with pytest.raises(ValueError, match="64-bit"):
        lineprotocol.line("m", {}, {"v": 2**63})


def test_every_string_survives_telegraf_and_influxdb(stack):
    # Through declared keys of a declared measurement (Telegraf's ingest guard
    # stores nothing else): the profile rows' applicationid tag and label field.
    values = CASES + fuzzed(300)
    now, run = time.time_ns(), uuid.uuid4().hex
    lines = []
    for n, value in enumerate(values):
        lines.append(lineprotocol.line("sparkscope_flame", {"applicationid": value, "executorid": str(n),
                                                            "kind": f"lp-{run}"},
                                       {"label": value, "level": n}, now + n))
        # A sentinel after every case: nothing else on the request may be lost.
        lines.append(lineprotocol.line("sparkscope_profiles", {"applicationid": f"lp-{run}", "kind": str(n)},
                                       {"samples": n}, now + n))
    # One request, as the probes send a period: one value Telegraf could not
    # parse would have it refuse them all.
    http.post_lines(stack.settings.events_url, lines, timeout=30)
    query = f'SELECT "label", "applicationid", "level" FROM "sparkscope_flame" WHERE "kind" = \'lp-{run}\''
    series = stack.wait_for(query, lambda s: bool(s) and len(s[0]["values"]) == len(values), deadline_s=30)
    stored = {row[3]: (row[1], row[2]) for row in series[0]["values"]}
    wrong = []
    for n, value in enumerate(values):
        field, tag = stored[n]
        if field != value or (tag or "") != tag_as_stored(value):
            wrong.append((value, field, tag))
    assert not wrong, f"{len(wrong)} of {len(values)} changed: {wrong[:5]}"
    sentinels = stack.influx(f'SELECT count("samples") FROM "sparkscope_profiles" WHERE "applicationid" = \'lp-{run}\'')
    assert sentinels[0]["values"][0][1] == len(values)


def test_a_probes_host_tag_is_the_one_stored_and_telegraf_adds_its_own_only_without_one(stack):
    """On Kubernetes the probes' DaemonSet names the node (SPARKSCOPE_HOST); the
    Telegraf replica that takes the lines runs elsewhere and must not rename it."""
    import socket

    from sparkscope.probes.cli import host_tagged

    hosts = ["node-1", "ip-10-0-3-7.ec2.internal", "a b,c=d", "ends\\", "x\\ y"]
    now, device = time.time_ns(), f"sd a,{uuid.uuid4().hex}"
    lines = []
    for n, host in enumerate(hosts):
        # Series keys with escaped spaces and commas, string fields with spaces: the tag goes after the key.
        written = [lineprotocol.line("block_outlier", {"device": device, "direction": f"case {n}"},
                                     {"text": "a b c", "bytes": n}, now + n)]
        lines += host_tagged(written, {"SPARKSCOPE_HOST": host})
    lines += host_tagged([lineprotocol.line("block_outlier", {"device": device, "direction": "plain"},
                                            {"bytes": -1}, now)], {})
    http.post_lines(stack.settings.events_url, lines, timeout=30)
    series = stack.wait_for(f'SELECT "bytes", "text" FROM "block_outlier" WHERE "device" = {influx.string_literal(device)} '
                            f'GROUP BY "direction", "host", "device"',
                            lambda s: len(s) == len(hosts) + 1, deadline_s=30)
    stored = {s["tags"]["direction"]: s for s in series}
    for n, host in enumerate(hosts):
        assert stored[f"case {n}"]["tags"]["host"] == tag_as_stored(host), (host, stored[f"case {n}"]["tags"])
        assert stored[f"case {n}"]["tags"]["device"] == device and stored[f"case {n}"]["values"][0][2] == "a b c"
    assert stored["plain"]["tags"]["host"] == socket.gethostname()


def test_the_probes_the_profile_store_and_the_rollups_lookups_write_through_it(monkeypatch):
    """No writer assembles a line itself: with the module's line writer marking
    what it writes, every line they produce carries the mark."""
    from sparkscope.probes.blockprobe import probe
    from sparkscope.store import profiles as store
    from sparkscope.store.nested_set import Row
    from sparkscope.stack import rollups
    from sparkscope.probes.threadprobe import periods

    written = lineprotocol.series_line
    monkeypatch.setattr(lineprotocol, "series_line", lambda *args: "MARK " + written(*args))
    dev = 8 << 20
    reports = probe.Reports(clock_offset_ns=0, names={dev: "sd a\\"})
    lines = reports.feed(json.dumps({"type": "printf", "data": f"outlier {dev} R 150000 4096 42 5000 java\n"}))
    reports.feed(json.dumps({"type": "hist", "data": {"@hist": {f"{dev},R": [{"min": 128, "count": 3}]}}}))
    lines += reports.feed(json.dumps({"type": "printf", "data": "end 9000\n"}))
    lines += store.lines(store.Profile("app\\", "1", "cpu", 1, 30.0), [Row(0, 2, 0, "root"), Row(1, 2, 2, "f")], 2)
    for text in (rollups.resolution_lines(), rollups.peak_source_lines(), rollups.task_scope_lines()):
        lines += text.split("\n")
    assert len(lines) >= 10
    assert [line for line in lines if not line.startswith("MARK ")] == []
    assert any("device=sd\\ a\u29f5" in line for line in lines)
    assert periods.escape_tag is lineprotocol.tag_value  # its lines are still built by hand, with these escapes


# Odd values of the four kinds the annotator and the Python writers both store.
APPLICATION_IDS = ["app-20261127174254-0001", "app\\", "app\\\\", "\\", "a b,c=d", "tab\there", "nl\nhere",
                   "cr\rlf\n", "ff\fvt\v", 'quote"s\'', "é✓😀", "x\\ y", "a\\,b", "ctl\x00\x1b\x7f", " lead",
                   "trail "]
EXECUTOR_IDS = ["1", "driver", "exec 1", "e,1=2", "e\\", "e\t", "é"]
STAGE_NAMES = ["stage 3.0: map at <console>:1", "line\nbreak", "tab\tand\rcr", 'q"uote\\', "", "\x00\x1f\x7f",
               "日本語 😀"]
DESCRIPTIONS = ['SELECT "a", b\nFROM t\r\n', "\\", "ends\\", "a\\nb", "\f\v", "x" * 3000, "☃ ✓ \u2028"]
SECONDS = [30.0, 2.5, 0.1, 1e16, 1e-05, 0.30000000000000004, 1234567.5, 5e-324]


def cross_language_cases(run: str, writer: str, now: int) -> list[dict]:
    """Every odd value, once per writer, as shared-table cases: a profile row
    (applicationid, executorid tags; stage name and description fields) and a
    profile index point (a float field)."""
    cases = []
    for n, app in enumerate(APPLICATION_IDS):
        executor, stage = EXECUTOR_IDS[n % len(EXECUTOR_IDS)], STAGE_NAMES[n % len(STAGE_NAMES)]
        cases.append({"measurement": "sparkscope_flame",
                      "tags": {"applicationid": app, "executorid": executor, "kind": f"lp-{run}-{writer}"},
                      "fields": [["label", "string", stage], ["profile", "string", DESCRIPTIONS[n % len(DESCRIPTIONS)]],
                                 ["level", "int", n]], "time": now + n})
        cases.append({"measurement": "sparkscope_profiles", "tags": {"applicationid": app, "kind": f"lp-{run}-{writer}"},
                      "fields": [["stage", "string", stage], ["seconds", "float", SECONDS[n % len(SECONDS)]],
                                 ["samples", "int", n]], "time": now + n})
    return cases


def influxql_equals(value: str) -> str:
    """`= 'value'`, or where InfluxQL cannot spell the value in a string literal
    (its scanner reads a NUL as the end of the statement) the same match as a
    regular expression with the NUL written \\x00."""
    if "\x00" not in value:
        return f"= {influx.string_literal(value)}"
    spelled = "".join(f"\\x{ord(c):02x}" if ord(c) < 0x20 or c == "\x7f" else
                      "\\" + c if c in "\\.+*?()|[]{}^$/" else c for c in value)
    return f"=~ /^{spelled}$/"


def test_python_and_java_write_every_float_alike():
    """Point.floatText is Python's repr: the shortest decimal that reads back, in the same notation."""
    rng = random.Random(20261127)
    values = [rng.uniform(-1, 1) * 10.0 ** rng.randint(-30, 30) for _ in range(3000)]
    values += [struct.unpack("<d", struct.pack("<q", rng.getrandbits(64) - 2**63))[0] for _ in range(3000)]
    values += [0.1, 0.2, 0.3, 1 / 3, 2 / 3, 1e22, 1e23, 2e-3, 9007199254740993.0, 5e-324, 2.2250738585072014e-308]
    values = [v for v in values if v == v and abs(v) != float("inf")]
    bits = [struct.unpack("<q", struct.pack("<d", v))[0] for v in values]
    java = java_lines({"float_bits": bits})["floats"]
    wrong = [(v, repr(v), text) for v, text in zip(values, java) if text != repr(v)]
    assert not wrong and len(java) == len(values), wrong[:5]


def test_python_and_java_profile_writers_write_the_same_lines():
    from sparkscope.store import profiles as store
    from sparkscope.store.nested_set import Row

    rows = [Row(0, 100, 0, "executor 1 cpu"), Row(1, 60, 10, "a.b(C.java:1)"), Row(2, 50, 25, 'odd "label"\\ x\n'),
            Row(1, 40, 25, "z,=\t "), Row(2, 15, 15, "a.b(C.java:1)")]  # tie: 25 and 25, first seen wins
    profiles = []
    for n, (app, seconds) in enumerate(zip(APPLICATION_IDS, SECONDS * 2)):
        profiles.append({"application_id": app, "executor_id": EXECUTOR_IDS[n % len(EXECUTOR_IDS)],
                         "kind": store.KINDS[n % len(store.KINDS)], "start_ms": 1795801517678 + n, "seconds": seconds,
                         "stage": "" if n % 2 else f"stage {n}.0", "slot": n % 3, "samples": 1000 + n,
                         "rows": [[r.level, r.value, r.self_value, r.label] for r in rows[:2 + n % 4]]})
    for p in profiles:
        p["unit"] = store.UNIT.get(p["kind"], "ns")
    java = java_lines({"profiles": profiles})["profiles"]
    python = [store.lines(store.Profile(p["application_id"], p["executor_id"], p["kind"], p["start_ms"], p["seconds"],
                                        p["stage"], p["slot"]), [Row(*r) for r in p["rows"]], p["samples"])
              for p in profiles]
    assert len(java) == len(python) == len(APPLICATION_IDS)
    for p, py, jv in zip(profiles, python, java):
        assert py == jv, (p["application_id"], [(a, b) for a, b in zip(py, jv) if a != b][:2])


def test_python_and_java_agree_on_every_shared_case_and_one_line_more_would_be_caught():
    cases = shared_cases()
    python = [None if "error" in c else line_of(c) for c in cases]
    writable = [c for c in cases if "error" not in c]
    java = java_lines({"points": writable})["points"]
    assert java == [line for line in python if line is not None]
    assert java != [line_of(c) for c in writable[:-1]] + [line_of({**writable[-1], "time": 2})]


def test_odd_values_from_python_and_java_are_stored_under_the_same_values(stack):
    """Application ids, executor ids, stage names and descriptions written by
    lineprotocol.line and by the annotator's Point, through Telegraf into
    InfluxDB: each comes back the same from both, and a reader asking for an
    application id finds the points of both writers."""
    run, now = uuid.uuid4().hex, time.time_ns()
    python_cases, java_cases = cross_language_cases(run, "py", now), cross_language_cases(run, "java", now)
    http.post_lines(stack.settings.events_url, [line_of(c) for c in python_cases], timeout=30)
    user = os.environ.get(http.EVENTS_USER_ENV, "")
    auth = http.basic_auth(user, os.environ.get(http.EVENTS_PASSWORD_ENV, "")) if user else None
    java = java_lines({"points": java_cases, "send": f"{stack.settings.events_url}/write?precision=ns",
                       "authorization": auth})["points"]
    assert [line.replace(f"lp-{run}-java", "W") for line in java] == \
        [line_of(c).replace(f"lp-{run}-py", "W") for c in python_cases]

    where = f"WHERE \"kind\" =~ /^lp-{run}-/"
    rows = stack.wait_for(f'SELECT "applicationid", "executorid", "kind", "label", "profile", "level" '
                          f'FROM "sparkscope_flame" {where}',
                          lambda s: bool(s) and len(s[0]["values"]) == 2 * len(APPLICATION_IDS), deadline_s=30)
    indexes = stack.wait_for(f'SELECT "applicationid", "kind", "stage", "seconds", "samples" '
                             f'FROM "sparkscope_profiles" {where}',
                             lambda s: bool(s) and len(s[0]["values"]) == 2 * len(APPLICATION_IDS), deadline_s=30)
    stored: dict[tuple, tuple] = {}
    for _, app, executor, kind, label, profile, level in rows[0]["values"]:
        stored[kind.rsplit("-", 1)[1], "row", level] = (app, executor, label, profile)
    for _, app, kind, stage, seconds, samples in indexes[0]["values"]:
        stored[kind.rsplit("-", 1)[1], "index", samples] = (app, stage, seconds)
    for n, app in enumerate(APPLICATION_IDS):
        executor, stage = EXECUTOR_IDS[n % len(EXECUTOR_IDS)], STAGE_NAMES[n % len(STAGE_NAMES)]
        expected_row = (tag_as_stored(app), tag_as_stored(executor), stage, DESCRIPTIONS[n % len(DESCRIPTIONS)])
        expected_index = (tag_as_stored(app), stage, SECONDS[n % len(SECONDS)])
        for writer in ("py", "java"):
            assert stored[writer, "row", n] == expected_row, (writer, n)
            assert stored[writer, "index", n] == expected_index, (writer, n)
        found = stack.influx(f'SELECT "level", "kind" FROM "sparkscope_flame" WHERE "applicationid" '
                             f'{influxql_equals(tag_as_stored(app))} AND "kind" =~ /^lp-{run}-/')
        assert sorted(row[2] for row in found[0]["values"]) == [f"lp-{run}-java", f"lp-{run}-py"], app
