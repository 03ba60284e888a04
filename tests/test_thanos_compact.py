"""The Thanos store's bucket (docs/scale.md): uploads, the store gateway, the
compactor's downsampling, retention settings.

Fast: the settings (durations as Thanos reads them, refused when too short to
downsample), the command lines (every ingester uploads to the one bucket, the
store gateway behind the stack's mTLS, one compactor with the retentions),
the bucket's write check, the remote-write encoder the slow tests send with.

Slow, real: Thanos built here with one ingester, the router, the store
gateway, the compactor and Query. Blocks spanning two days, written by our
tsdb-blocks (Prometheus' tsdb package) before the compactor starts, come back
as 5-minute blocks, and Query answers from those alone with the averages the
raw samples give; an ingester's block cut from remote-written samples lands
in the bucket and is still answered after the ingester lost it; a bucket that
takes no writes is said in status while Query keeps answering.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from sparkscope.process import quiet, wait_until
from sparkscope.settings import SettingsError, duration_ms
from sparkscope.stack import thanos, thanos_layout
from sparkscope.store import http
from sparkscope_testkit import remote_write
from sparkscope_testkit.sandbox import free_base_port, isolated_settings

HOUR_MS = 3600_000
STEP_MS = 30_000


# --- fast ---------------------------------------------------------------------------------

def test_retentions_are_read_as_thanos_durations_and_refused_when_too_short_to_downsample(tmp_path):
    settings = isolated_settings(tmp_path, THANOS_RETENTION_RAW="60h", THANOS_RETENTION_5M="0d",
                                 THANOS_RETENTION_1H="1y2w", THANOS_RECEIVE_RETENTION="6h")
    assert (settings.thanos_retention_raw, settings.thanos_retention_5m, settings.thanos_retention_1h,
            settings.thanos_receive_retention) == ("60h", "0d", "1y2w", "6h")
    assert duration_ms("1y2w") == (365 + 14) * 24 * HOUR_MS and duration_ms("0d") == 0
    for key, value, says in [("THANOS_RETENTION_RAW", "30", "not a duration as Thanos reads them"),
                             ("THANOS_RETENTION_RAW", "2d1y", "largest unit first"),
                             ("THANOS_RETENTION_5M", "", "not a duration"),
                             ("THANOS_RETENTION_RAW", "1d", "at least 2d"),
                             ("THANOS_RETENTION_5M", "9d", "at least 10d"),
                             ("THANOS_RECEIVE_RETENTION", "1h", "at least 2h")]:
        with pytest.raises(SettingsError, match=f"{key}={value!r}.*{says}|{key}={value}: .*{says}"):
            isolated_settings(tmp_path, **{key: value})


def test_every_ingester_uploads_to_the_one_bucket_served_by_the_gateway_and_compacted_by_one_process(tmp_path):
    plan = thanos.layout(20000, ingesters=3, replication_factor=2)
    files = thanos.Files(tmp_path)
    binary = Path("/bin/thanos")
    for process in plan.ingesters:
        argv = thanos.receive_argv(binary, plan, process, files, "1d")
        assert f"--objstore.config-file={files.objstore_config}" in argv and "--tsdb.retention=1d" in argv
    assert not any("objstore" in arg for arg in thanos.receive_argv(binary, plan, plan.router, files, "1d"))
    store = thanos.store_argv(binary, plan, files)
    assert f"--objstore.config-file={files.objstore_config}" in store
    assert f"--grpc-server-tls-client-ca={files.ca}" in store and f"--http.config={files.web_config}" in store
    assert f"--grpc-address=127.0.0.1:{plan.store.grpc}" in store
    query = thanos.query_argv(binary, plan, files)
    assert f"--endpoint={plan.store.grpc_address}" in query and "--query.auto-downsampling" in query
    compact = thanos.compact_argv(binary, plan, files, "30d", "180d", "2y")
    assert compact[1:3] == ["compact", "--wait"]
    assert {"--retention.resolution-raw=30d", "--retention.resolution-5m=180d",
            "--retention.resolution-1h=2y", f"--deduplication.replica-label={thanos.REPLICA_LABEL}"} <= set(compact)
    assert [p.name for p in plan.processes].count(thanos.COMPACT) == 1  # Thanos' rule: one per bucket
    assert plan.compact.grpc == 0 and plan.compact.ports() == [plan.compact.http]
    ports = [port for process in plan.processes for port in process.ports()]
    assert len(ports) == len(set(ports))
    assert plan.query.http == 20000 + 10 * 4 + thanos.HTTP  # where Grafana's datasource found it before


def test_the_objstore_config_is_private_and_a_path_with_quotes_stays_one_string(tmp_path):
    files = thanos.Files(tmp_path / 'odd "dir" \\ #x')
    thanos.write_objstore_config(files)
    assert files.objstore_config.stat().st_mode & 0o777 == 0o600 and files.bucket.is_dir()
    text = files.objstore_config.read_text()
    directory = text.split("directory: ", 1)[1].strip()
    assert text.startswith("type: FILESYSTEM\n") and json.loads(directory) == str(files.bucket)


def test_a_bucket_that_takes_no_file_is_named_with_what_to_do(tmp_path):
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    assert thanos.bucket_problem(bucket) is None and list(bucket.iterdir()) == []
    shutil.rmtree(bucket)
    bucket.write_text("not a folder")  # as root too, where permissions would not stop a write
    problem = thanos.bucket_problem(bucket)
    assert problem and str(bucket) in problem and "Not a directory" in problem and "up thanos-compact" in problem


def test_the_bucket_summary_counts_blocks_per_resolution_and_leaves_deleted_ones_out(tmp_path):
    for name, resolution in [("A", 0), ("B", 0), ("C", 300_000), ("D", 3_600_000), ("E", 0)]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "meta.json").write_text(json.dumps({"thanos": {"downsample": {"resolution": resolution}}}))
    (tmp_path / "E" / "deletion-mark.json").write_text("{}")
    summary = thanos.bucket_summary(tmp_path)
    assert summary.startswith("bucket: 4 blocks (2 raw, 1 5m, 1 1h), ")
    assert thanos.bucket_summary(tmp_path / "none") == "bucket: 0 blocks (none yet), 0.0 MB"


def test_a_halted_compactor_is_found_in_its_log_with_its_error():
    lines = ['ts=1 level=info msg="start sync of metas"',
             'ts=2 level=error msg="critical error detected; halting" err="overlaps found \\"x\\" y"',
             'ts=3 level=info msg="still here"']
    assert thanos.compactor_halted(lines) == 'overlaps found \\"x\\" y'
    assert thanos.compactor_halted(lines[:1]) is None
    # Started again since (up's header line): that halt is over.
    assert thanos.compactor_halted([*lines, "--- 2026-11-28 03:00:00 $ (cd /state && thanos compact ...)"]) is None


def test_remote_write_bodies_are_snappy_framed_protobuf():
    body = remote_write.write_request([({"b": "2", "__name__": "m"}, [(1700000000000, 1.5)])])
    # timeseries { labels {name "__name__" value "m"} labels {name "b" value "2"} samples {1.5 @ ms} }
    assert body.startswith(b"\x0a") and b"\x0a\x0d\x0a\x08__name__\x12\x01m" in body
    assert b"\x09\x00\x00\x00\x00\x00\x00\xf8\x3f\x10" in body  # 1.5 as a little-endian double, then the time
    framed = remote_write.snappy_block(b"x" * 70000)
    assert framed[:3] == bytes([0xF0, 0xA2, 0x04])  # varint 70000
    assert framed[3:6] == bytes([61 << 2, 0xFF, 0xFF]) and len(framed) == 3 + 3 + 65536 + 3 + 4464


# --- slow: the real bucket ----------------------------------------------------------------

def sawtooth(start_ms: int, hours: int) -> list[tuple[int, float]]:
    """A sample every 30 s, 15 s past each step (so no sample sits on a 5-minute
    edge, where raw and downsampled windows would differ by one sample): the
    hour's number times 100 plus a 10-minute sawtooth."""
    return [(t, 100.0 * ((t - start_ms) // HOUR_MS) + (t // STEP_MS) % 20)
            for t in range(start_ms + 15_000, start_ms + hours * HOUR_MS, STEP_MS)]


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


class Query:
    def __init__(self, settings):
        self.url = thanos_layout(settings).query.http_url
        self.password = thanos.Files(settings.state_dir / "thanos").password()

    def get(self, path: str, **params) -> dict:
        request = urllib.request.Request(f"{self.url}{path}?{urllib.parse.urlencode(params)}")
        request.add_header("Authorization", http.basic_auth(thanos.USER, self.password))
        with http.urlopen(request, timeout=60) as resp:
            body = json.loads(resp.read())
        assert body["status"] == "success", body
        return body["data"]

    def range(self, promql: str, start_ms: int, end_ms: int, step_s: int, **params) -> dict[int, float]:
        """{time in ms: value} of a query answering one series (none: {})."""
        data = self.get("/api/v1/query_range", query=promql, start=start_ms / 1000, end=end_ms / 1000,
                        step=step_s, **params)
        assert len(data["result"]) <= 1, data
        return {int(float(t) * 1000): float(v) for t, v in (data["result"][0]["values"] if data["result"] else [])}


def tsdb_blocks(settings) -> Path:
    from sparkscope.provision.go import ensure_tsdb_blocks
    return ensure_tsdb_blocks(settings.cache_dir, quiet)


# Receive labels its blocks with its --label and the tenant (Thanos' default tenant label).
def ingester_labels(index: int) -> dict[str, str]:
    return {thanos.REPLICA_LABEL: str(index), "tenant_id": thanos.TENANT}


OLD_HOURS = 50  # more than the 40 h from which Thanos makes 5-minute blocks
LONG_DAYS = 11  # more than the 10 days from which it makes 1-hour blocks of the 5-minute ones


def minutes(start_ms: int, days: int) -> list[tuple[int, float]]:
    """A sample a minute, 30 s past it: the hour's number times 10 plus the minute modulo 7."""
    return [(t, 10.0 * ((t - start_ms) // HOUR_MS) + (t // 60_000) % 7)
            for t in range(start_ms + 30_000, start_ms + days * 24 * HOUR_MS, 60_000)]


@pytest.fixture(scope="module")
def bucket_stack(tmp_path_factory):
    """One ingester, the router, the store gateway, the compactor and Query, started
    over a bucket that already holds a 50-hour raw block of four days ago, twice:
    as ingesters 1 and 2 would have uploaded their copies of a replicated series."""
    from sparkscope.stack.native import NativeBackend
    state = tmp_path_factory.mktemp("thanos-bucket")
    base = free_base_port(1)
    settings = isolated_settings(state, SPARKSCOPE_METRICS_STORE="thanos", THANOS_PORT=str(base),
                                 THANOS_INGESTERS="1", THANOS_REPLICATION_FACTOR="1")
    files = thanos.Files(state / "thanos")
    thanos.write_objstore_config(files)
    start = (int(time.time() * 1000) // (24 * HOUR_MS) - 4) * 24 * HOUR_MS
    series = {"__name__": "sparkscope_test_sawtooth", "job": "old"}
    blocks = []
    for replica in (1, 2):
        given = {"external_labels": ingester_labels(replica), "source": "receive",
                 "series": [{"labels": series, "samples": sawtooth(start, OLD_HOURS)}]}
        done = subprocess.run([str(tsdb_blocks(settings)), "-out", str(files.bucket)], input=json.dumps(given),
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        blocks.append(done.stdout.strip())
    # Eleven days of a series, ending 16 days ago (apart from the block above: blocks of one
    # stream that overlap are merged, which the test above does not want here).
    long_start = start - 23 * 24 * HOUR_MS
    long_series = {"__name__": "sparkscope_test_minutes", "job": "long"}
    given = {"external_labels": ingester_labels(1), "source": "receive",
             "series": [{"labels": long_series, "samples": minutes(long_start, LONG_DAYS)}]}
    done = subprocess.run([str(tsdb_blocks(settings)), "-out", str(files.bucket)], input=json.dumps(given),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    backend = NativeBackend(settings)
    try:
        backend.up(only=thanos_layout(settings).names, progress=quiet)
        yield settings, backend, {"start": start, "raw_blocks": blocks, "series": series,
                                  "long_start": long_start, "long_block": done.stdout.strip()}
    finally:
        backend.down(progress=quiet)


def metas(bucket: Path) -> dict[str, dict]:
    return {meta["ulid"]: meta for meta in thanos.bucket_blocks(bucket)}


@pytest.mark.slow
def test_an_ingesters_block_lands_in_the_bucket_and_is_answered_after_the_ingester_lost_it(bucket_stack):
    settings, backend, _ = bucket_stack
    plan, files = thanos_layout(settings), thanos.Files(settings.state_dir / "thanos")
    query = Query(settings)
    now = int(time.time() * 1000)
    early = now - 4 * HOUR_MS
    labels = {"__name__": "sparkscope_test_uploaded", "job": "recent"}
    for samples in ([(early, 41.0)], [(now, 42.0)]):
        assert remote_write.send(plan.router.remote_write_url, [(labels, samples)], files.ca, files.cert,
                                 files.key) == 200
    # A running ingester cuts and uploads a block every 2 hours (Thanos' periodic head compaction);
    # stopped, it cuts what its head holds and uploads that before it exits, as here.
    ingester = plan.ingesters[0].name
    backend.down(only=(ingester,), progress=quiet)

    def uploaded() -> list[dict]:
        return [m for m in metas(files.bucket).values()
                if m["thanos"].get("source") == "receive"
                and m["ulid"] not in [*bucket_stack[2]["raw_blocks"], bucket_stack[2]["long_block"]]]
    assert uploaded(), f"no block of the ingester's reached the bucket; {backend.log_excerpt(ingester)}"
    block = uploaded()[0]
    assert block["minTime"] <= early < block["maxTime"]
    assert block["thanos"]["labels"] == ingester_labels(1)  # what the test's own old block carries too
    assert block["thanos"]["downsample"]["resolution"] == 0

    # The ingester loses it (its copy removed while stopped); the store gateway still has it.
    local = list(files.data(ingester).rglob(block["ulid"]))
    assert local, f"the ingester kept no copy of {block['ulid']} under {files.data(ingester)}"
    for folder in local:
        shutil.rmtree(folder)
    backend.up(only=(ingester,), progress=quiet)
    backend.down(only=(thanos.STORE,), progress=quiet)  # started again: it lists the bucket at once
    backend.up(only=(thanos.STORE,), progress=quiet)
    answer = {}
    assert wait_until(lambda: answer.update(query.range(
        'sparkscope_test_uploaded{job="recent"}', early, early, 60)) or answer, 60), answer
    assert answer == {early: 41.0}


@pytest.mark.slow
def test_the_compactor_downsamples_old_blocks_and_query_answers_from_the_5m_ones(bucket_stack):
    settings, backend, given = bucket_stack
    files = thanos.Files(settings.state_dir / "thanos")
    query = Query(settings)
    start, raw_blocks = given["start"], given["raw_blocks"]

    def downsampled() -> list[dict]:
        return [m for m in metas(files.bucket).values() if m["thanos"]["downsample"]["resolution"] == 300_000
                and m["minTime"] < start + OLD_HOURS * HOUR_MS and m["maxTime"] > start]
    assert wait_until(lambda: downsampled(), 240), \
        f"no 5-minute block; compactor's log:\n{backend.log_excerpt(thanos.COMPACT)}"
    (five,) = downsampled()
    assert five["minTime"] <= start + 15_000 and five["maxTime"] >= start + (OLD_HOURS - 1) * HOUR_MS
    assert thanos.REPLICA_LABEL not in five["thanos"]["labels"]
    # The two replicas' blocks became one raw block without the replica label (vertical
    # compaction on it), which the 5-minute block was made from; theirs are marked for deletion.
    raw_now = [m for m in metas(files.bucket).values() if m["thanos"]["downsample"]["resolution"] == 0
               and m["minTime"] < start + OLD_HOURS * HOUR_MS and m["maxTime"] > start]
    assert [m["thanos"]["labels"] for m in raw_now] == [{"tenant_id": thanos.TENANT}], raw_now
    assert sorted(raw_now[0]["compaction"]["sources"]) == sorted(raw_blocks)
    assert raw_now[0]["stats"]["numSamples"] == len(sawtooth(start, OLD_HOURS))  # one copy, not two
    assert all((files.bucket / ulid / "deletion-mark.json").exists() for ulid in raw_blocks)
    assert five["compaction"]["sources"] == raw_now[0]["compaction"]["sources"]

    # Only the 5-minute copy answers now: the raw blocks leave the bucket, the gateway lists it again.
    for ulid in [*raw_blocks, raw_now[0]["ulid"]]:
        shutil.move(str(files.bucket / ulid), str(files.folder / ulid))
    backend.down(only=(thanos.STORE,), progress=quiet)
    backend.up(only=(thanos.STORE,), progress=quiet)

    raw = sawtooth(start, OLD_HOURS)
    selector = 'sparkscope_test_sawtooth{job="old"}'
    # Every 5-minute average over two hours, as the raw samples say.
    window = (start + 10 * HOUR_MS, start + 12 * HOUR_MS)
    expected = {t: mean([v for ts, v in raw if t - 300_000 < ts <= t]) for t in range(window[0] + 300_000,
                                                                                       window[1] + 1, 300_000)}
    got = {}
    assert wait_until(lambda: got.update(query.range(f"avg_over_time({selector}[5m])", window[0] + 300_000,
                                                     window[1], 300, max_source_resolution="5m")) or got, 60)
    assert got == pytest.approx(expected)
    # Hourly averages over the whole range, with the resolution Query picks (auto: a fifth of the step).
    hours = {t: mean([v for ts, v in raw if t - HOUR_MS < ts <= t])
             for t in range(start + HOUR_MS, start + OLD_HOURS * HOUR_MS + 1, HOUR_MS)}
    auto = query.range(f"avg_over_time({selector}[1h])", start + HOUR_MS, start + OLD_HOURS * HOUR_MS, 3600,
                       max_source_resolution="auto")
    assert auto == pytest.approx(hours)
    assert set(auto.values()) != {auto[start + HOUR_MS]}  # hours differ: no constant passes for right
    # Raw data only (max_source_resolution=0s): none is left for that period.
    assert query.range(selector, window[0], window[1], 300, max_source_resolution="0s") == {}


@pytest.mark.slow
def test_ten_days_and_more_become_1h_blocks_that_answer_hourly_averages_alone(bucket_stack):
    settings, backend, given = bucket_stack
    files = thanos.Files(settings.state_dir / "thanos")
    query = Query(settings)
    start, end = given["long_start"], given["long_start"] + LONG_DAYS * 24 * HOUR_MS

    def of_range(resolution: int) -> list[dict]:
        return [m for m in metas(files.bucket).values() if m["thanos"]["downsample"]["resolution"] == resolution
                and m["minTime"] < end and m["maxTime"] > start]
    assert wait_until(lambda: of_range(3_600_000), 240), \
        f"no 1-hour block; compactor's log:\n{backend.log_excerpt(thanos.COMPACT)}"
    (hourly,) = of_range(3_600_000)
    (five,) = of_range(300_000)
    assert hourly["compaction"]["sources"] == [given["long_block"]] == five["compaction"]["sources"]
    # The 1-hour block alone answers: the raw and 5-minute ones leave the bucket.
    for meta in [*of_range(0), five]:
        shutil.move(str(files.bucket / meta["ulid"]), str(files.folder / meta["ulid"]))
    backend.down(only=(thanos.STORE,), progress=quiet)
    backend.up(only=(thanos.STORE,), progress=quiet)
    raw = minutes(start, LONG_DAYS)
    selector = 'sparkscope_test_minutes{job="long"}'
    hours = {t: mean([v for ts, v in raw if t - HOUR_MS < ts <= t]) for t in range(start + HOUR_MS, end + 1, HOUR_MS)}
    got = {}
    assert wait_until(lambda: got.update(query.range(f"avg_over_time({selector}[1h])", start + HOUR_MS, end, 3600,
                                                     max_source_resolution="1h")) or got, 60)
    assert got == pytest.approx(hours) and len(got) == LONG_DAYS * 24
    # Six-hour steps with auto (a fifth of the step: 72 min) read the same 1-hour block. (A [6h]
    # average over it differed from the raw one at 1 of 44 points by 0.3% here: docs/scale.md.)
    six = {t: hours[t] for t in range(start + 6 * HOUR_MS, end + 1, 6 * HOUR_MS)}
    assert query.range(f"avg_over_time({selector}[1h])", start + 6 * HOUR_MS, end, 6 * 3600,
                       max_source_resolution="auto") == pytest.approx(six)
    assert query.range(selector, start, end, 3600, max_source_resolution="5m") == {}  # no finer data left


@pytest.mark.slow
def test_a_bucket_that_takes_no_writes_is_said_in_status_and_query_keeps_answering(bucket_stack):
    settings, backend, given = bucket_stack
    files = thanos.Files(settings.state_dir / "thanos")
    query = Query(settings)
    rows = {row.name: row for row in backend.status()}
    assert rows[thanos.COMPACT].state == "up" and rows[thanos.COMPACT].data.startswith("bucket: "), rows
    assert rows[thanos.QUERY].data == "reaches 1 of 1 ingesters and the store gateway", rows[thanos.QUERY]
    # The gateway, started again by the tests above after the compactor's work, serves every block
    # of the bucket not marked for deletion: the 5-minute, the 1-hour, the ingester's upload.
    blocks = len(thanos.bucket_blocks(files.bucket))
    assert rows[thanos.STORE].data == f"serves {blocks} blocks of the bucket" and blocks >= 3, rows[thanos.STORE]
    aside = files.folder / "bucket.aside"
    files.bucket.rename(aside)
    try:
        files.bucket.write_text("")  # a file where the folder was: no write lands, as root too
        rows = {row.name: row for row in backend.status()}
        compact = rows[thanos.COMPACT]
        assert compact.state == "degraded" and str(files.bucket) in compact.detail, compact
        assert "does not take new blocks" in compact.detail and "Query" not in compact.detail
        assert all(rows[p.name].state == "up" for p in thanos_layout(settings).processes
                   if p.name != thanos.COMPACT), rows
        # Remote write still lands, and Query answers it (the ingester keeps its blocks meanwhile).
        now = int(time.time() * 1000)
        plan = thanos_layout(settings)
        assert remote_write.send(plan.router.remote_write_url, [({"__name__": "sparkscope_test_during", "job": "x"},
                                                                 [(now, 7.0)])], files.ca, files.cert, files.key) == 200
        assert query.range('sparkscope_test_during{job="x"}', now, now, 60) == {now: 7.0}
        # Started meanwhile, the compactor starts (Thanos takes a file for an empty bucket, silently);
        # up says what is wrong.
        backend.down(only=(thanos.COMPACT,), progress=quiet)
        said = []
        backend.up(only=(thanos.COMPACT,), progress=said.append)
        assert any("warning: the bucket" in line and "does not take new blocks" in line for line in said), said
    finally:
        files.bucket.unlink()
        aside.rename(files.bucket)
    assert {row.name: row for row in backend.status()}[thanos.COMPACT].state == "up"
