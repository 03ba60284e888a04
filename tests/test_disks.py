"""The host row's disk panels and the block I/O probe, checked with real I/O
on two loop devices against the kernel's own counters (/proc/diskstats):

- a healthy disk: a loop device on a plain file;
- a slow disk: a loop device on a file of our FUSE file system
  (sparkscope_testkit/slow_fs.py) that sleeps SLOW_MS before every read and write.

One known pattern runs on both (writes first; a Telegraf sample; then reads),
so every interval has a known direction. Last, a Spark job runs with its
local dir on an ext4 on such a slow device. Needs root (losetup, FUSE mounts);
the probe's tests need eBPF too. Everything created here is removed by name in
teardown.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from sparkscope.probes.blockprobe.readiness import why_not_traceable
from sparkscope.dashboards import DASHBOARDS_DIR
from sparkscope.process import wait_until
from sparkscope_testkit import slow_mount

SLOW_MS = 150  # above the probe's default outlier threshold (100 ms)
THRESHOLD_MS = 100
PATTERN = {"healthy": {"writes": 400, "reads": 300}, "slow": {"writes": 16, "reads": 8}}
TELEGRAF_INTERVAL_S = 10  # telegraf.conf [agent] interval
FIELDS = ("reads", "read_time", "writes", "write_time", "io_time", "weighted_io_time")

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("losetup") is None or not Path("/dev/fuse").exists(),
    reason="needs root, losetup and /dev/fuse to make loop devices and a FUSE mount")
pytestmark = needs_root


def diskstats(name: str) -> dict[str, int]:
    """The kernel's counters of one device, named as Telegraf's diskio names them."""
    for line in Path("/proc/diskstats").read_text().splitlines():
        cols = line.split()
        if cols[2] == name:
            v = [int(x) for x in cols[3:14]]
            return {"reads": v[0], "read_time": v[3], "writes": v[4], "write_time": v[7], "io_time": v[9],
                    "weighted_io_time": v[10]}
    raise AssertionError(f"{name} not in /proc/diskstats")


@dataclass
class Disk:
    role: str
    device: str  # /dev/loopN

    @property
    def name(self) -> str:
        return Path(self.device).name


def attach_loop(backing: Path) -> str:
    done = subprocess.run(["losetup", "--find", "--show", str(backing)], capture_output=True, text=True)
    assert done.returncode == 0, f"losetup failed: {done.stderr}"
    return done.stdout.strip()


def dd(args: list[str]) -> None:
    done = subprocess.run(["dd", *args, "status=none"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@dataclass
class Workload:
    disks: list[Disk]
    before: dict[str, dict[str, int]]  # kernel counters at the baseline sample
    after: dict[str, dict[str, int]]  # kernel counters once the pattern is done
    since_attach: dict[str, dict[str, int]]
    started_ms: dict[str, int]  # each device's baseline sample
    ended_ms: int  # the sample that has everything
    probed_from_ms: int


def stored_last(stack, name: str, until_ms: int | None = None) -> tuple[int, dict[str, int]] | None:
    upto = f" AND time <= {until_ms}ms" if until_ms else ""
    series = stack.influx(f"SELECT {', '.join(f'{chr(34)}{f}{chr(34)}' for f in FIELDS)} FROM \"diskio\" "
                          f"WHERE \"name\" = '{name}'{upto} ORDER BY time DESC LIMIT 1")
    if not series:
        return None
    row = series[0]["values"][0]
    return row[0], dict(zip(FIELDS, row[1:]))


def wait_stored_equals(stack, disk: Disk, kernel: dict[str, int]) -> int:
    """Wait for Telegraf's sample that has the kernel's counters; its time (ms)."""
    found: list = []

    def caught_up() -> bool:
        last = stored_last(stack, disk.name)
        if last and last[1] == kernel:
            found.append(last[0])
            return True
        return False

    assert wait_until(caught_up, 4 * TELEGRAF_INTERVAL_S), (
        f"{disk.name}: Telegraf stored {stored_last(stack, disk.name)}, the kernel says {kernel}")
    return found[-1]


@contextmanager
def slow_fs_mounted(under: Path, mnt: Path, log: Path) -> Iterator[None]:
    """support/slow_fs.py mirroring under at mnt, SLOW_MS per read and write; unmounted after."""
    with slow_mount.slow_fs_mounted(under, mnt, log, SLOW_MS):
        yield


@pytest.fixture(scope="module")
def workload(stack, tmp_path_factory) -> Workload:
    base = tmp_path_factory.mktemp("disks")
    under, mnt = base / "under", base / "mnt"
    under.mkdir(), mnt.mkdir()
    (base / "healthy.img").write_bytes(b"")
    os.truncate(base / "healthy.img", 16 << 20)
    (under / "slow.img").write_bytes(b"")
    os.truncate(under / "slow.img", 16 << 20)
    disks: list[Disk] = []
    with slow_fs_mounted(under, mnt, base / "fs.log"):
        try:
            probed_from_ms = int(time.time() * 1000)
            disks = [Disk("healthy", attach_loop(base / "healthy.img")), Disk("slow", attach_loop(mnt / "slow.img"))]
            since_attach = {d.name: diskstats(d.name) for d in disks}
            # Telegraf leaves out devices that never did I/O: one read each, so
            # that the baseline below is a stored sample.
            for d in disks:
                dd([f"if={d.device}", "of=/dev/null", "bs=4k", "count=1", "iflag=direct"])
            # Baseline: a sample of each idle device, equal to the kernel's counters.
            before = {d.name: diskstats(d.name) for d in disks}
            started = {d.name: wait_stored_equals(stack, d, before[d.name]) for d in disks}
            for phase, flag, src_dst in (("writes", "oflag=direct", lambda d: ["if=/dev/zero", f"of={d.device}"]),
                                         ("reads", "iflag=direct", lambda d: [f"if={d.device}", "of=/dev/null"])):
                for d in disks:
                    dd([*src_dst(d), "bs=4k", f"count={PATTERN[d.role][phase]}", flag])
                # A sample between the phases: intervals with writes and no reads.
                ended = max(wait_stored_equals(stack, d, diskstats(d.name)) for d in disks)
            after = {d.name: diskstats(d.name) for d in disks}
            yield Workload(disks, before, after, since_attach, started, ended, probed_from_ms)
        finally:
            for d in disks:
                subprocess.run(["losetup", "-d", d.device], capture_output=True)


# ---------------------------------------------------------------- the panels' queries

def live_panel(title: str) -> dict:
    board = json.loads((DASHBOARDS_DIR / "spark-executors.json").read_text())
    for top in board["panels"]:
        for panel in [top, *top.get("panels", [])]:
            if panel.get("title") == title:
                return panel
    raise AssertionError(f"no panel {title!r} on the live dashboard")


def run_panel(stack, title: str, device: str, start_ms: int, end_ms: int) -> dict[str, dict[int, float]]:
    """Each target's points (time ms -> value) for one device, as Grafana 12
    sends the live dashboard's queries with that device picked."""
    board = json.loads((DASHBOARDS_DIR / "spark-executors.json").read_text())
    dash = stack.open_dashboard(board, start_ms, end_ms, url_vars={"device": [device]})
    # The graphs' bucket for a range this short is Telegraf's interval: one point per sample.
    assert dash.variables["bucket"].current == [f"{TELEGRAF_INTERVAL_S}s"], dash.variables["bucket"].current
    panel = live_panel(title)
    results = dash.run_panel(panel)
    out = {}
    for target in panel["targets"]:
        points: dict[int, float] = {}
        for s in results[target["refId"]]:
            for row in s["values"]:
                points[_ms(row[0])] = row[1]
        out[target["alias"].replace("$tag_name ", "").replace("$tag_name", "all")] = points
    return out


def _ms(t) -> int:
    return int(t)  # stack.influx asks for epoch=ms


def after_baseline(workload: Workload, name: str) -> tuple[int, int]:
    """From the interval after the baseline sample to the last: InfluxDB reads
    one interval before the range for a rate's first point, which is the baseline."""
    return workload.started_ms[name] + TELEGRAF_INTERVAL_S * 1000, workload.ended_ms


def delta(workload: Workload, name: str, field: str) -> int:
    return workload.after[name][field] - workload.before[name][field]


@pytest.mark.parametrize("role", ["healthy", "slow"])
def test_stored_counters_equal_the_kernels_before_and_after_the_pattern(stack, workload, role):
    disk = next(d for d in workload.disks if d.role == role)
    assert delta(workload, disk.name, "writes") == PATTERN[role]["writes"]
    assert delta(workload, disk.name, "reads") == PATTERN[role]["reads"]
    assert stored_last(stack, disk.name, workload.started_ms[disk.name])[1] == workload.before[disk.name]
    assert stored_last(stack, disk.name, workload.ended_ms)[1] == workload.after[disk.name]


@pytest.mark.parametrize("role", ["healthy", "slow"])
def test_iops_busy_and_queue_panels_add_up_to_the_kernels_deltas(stack, workload, role):
    name = next(d.name for d in workload.disks if d.role == role)
    window = after_baseline(workload, name)
    iops = run_panel(stack, "Disk IOPS: read and write", name, *window)
    busy = run_panel(stack, "Disk busy", name, *window)["all"]
    queue = run_panel(stack, "Disk queue size", name, *window)["all"]
    # Rates per second over 10 s intervals: times 10 s is the interval's increase.
    assert sum(iops["read"].values()) * TELEGRAF_INTERVAL_S == pytest.approx(delta(workload, name, "reads"))
    assert sum(iops["write"].values()) * TELEGRAF_INTERVAL_S == pytest.approx(delta(workload, name, "writes"))
    # busy %: io_time ms per second / 10; times 10 s x 10 is io_time's increase in ms.
    assert sum(busy.values()) * TELEGRAF_INTERVAL_S * 10 == pytest.approx(delta(workload, name, "io_time"))
    assert sum(queue.values()) * TELEGRAF_INTERVAL_S * 1000 == pytest.approx(
        delta(workload, name, "weighted_io_time"))
    assert all(0 <= v <= 100 for v in busy.values()), busy


@pytest.mark.parametrize("role", ["healthy", "slow"])
def test_await_is_time_over_ios_and_absent_where_a_direction_was_idle(stack, workload, role):
    name = next(d.name for d in workload.disks if d.role == role)
    window = after_baseline(workload, name)
    iops = run_panel(stack, "Disk IOPS: read and write", name, *window)
    awaits = run_panel(stack, "Disk await: read and write", name, *window)
    for way, count_field, time_field in (("read", "reads", "read_time"), ("write", "writes", "write_time")):
        ios = {t: v * TELEGRAF_INTERVAL_S for t, v in iops[way].items()}
        busy_times = {t for t, n in ios.items() if n > 0.5}
        # A point exactly where this direction completed I/Os: none for idle
        # intervals, none where only the other direction worked.
        assert set(awaits[way]) == busy_times, (way, awaits[way], ios)
        weighted = sum(awaits[way][t] * ios[t] for t in busy_times)
        assert weighted == pytest.approx(delta(workload, name, time_field)), (way, awaits[way])
    # The pattern wrote, then (after a sample) read: some interval wrote and did not read.
    assert set(awaits["write"]) - set(awaits["read"]), awaits
    if role == "slow":  # each I/O waited SLOW_MS in our file system
        assert all(v >= SLOW_MS for v in awaits["read"].values()), awaits["read"]


# ---------------------------------------------------------------- the probe

needs_probe = pytest.mark.skipif(why_not_traceable(mount=True) is not None,
                                 reason=f"no eBPF block tracing here: {why_not_traceable()}")


def probe_total(stack, measurement: str, name: str, since_ms: int) -> int:
    series = stack.influx(f"SELECT sum(\"count\") FROM \"{measurement}\" WHERE \"device\" = '{name}' "
                          f"AND \"direction\" =~ /^(read|write)$/ AND time >= {since_ms}ms")
    return int(series[0]["values"][0][1]) if series else 0


@needs_probe
@pytest.mark.parametrize("role", ["healthy", "slow"])
def test_probe_histogram_counts_every_io_the_kernel_counted(stack, workload, role):
    name = next(d.name for d in workload.disks if d.role == role)
    k0, k1 = workload.since_attach[name], workload.after[name]
    expected = (k1["reads"] - k0["reads"]) + (k1["writes"] - k0["writes"])
    assert expected >= sum(PATTERN[role].values())
    since = workload.probed_from_ms
    # The probe reports every 10 s: wait for the period that holds the last I/O.
    stack.wait_for(f"SELECT sum(\"count\") FROM \"block_latency\" WHERE \"device\" = '{name}' AND time >= {since}ms",
                   lambda s: s and s[0]["values"][0][1] >= expected, deadline_s=45)
    assert probe_total(stack, "block_latency", name, since) == expected
    assert probe_total(stack, "block_latency_hist", name, since) == expected


@needs_probe
def test_outliers_list_the_slow_disk_and_not_the_healthy_one(stack, workload):
    slow = next(d.name for d in workload.disks if d.role == "slow")
    healthy = next(d.name for d in workload.disks if d.role == "healthy")
    k0, k1 = workload.since_attach[slow], workload.after[slow]
    slow_ios = (k1["reads"] - k0["reads"]) + (k1["writes"] - k0["writes"])
    since = workload.probed_from_ms
    board = json.loads((DASHBOARDS_DIR / "spark-executors.json").read_text())
    panel = live_panel("Block I/O outliers")

    def rows(device: str) -> list[dict]:
        """The outliers table as Grafana 12 sends it with this device picked, the range up to now."""
        dash = stack.open_dashboard(board, since, int(time.time() * 1000) + 5_000, url_vars={"device": [device]})
        series = dash.run_panel(panel)["A"]
        return [dict(zip(s["columns"], row)) for s in series for row in s["values"]]

    wait_until(lambda: len(rows(slow)) >= slow_ios, 45)
    got = rows(slow)
    assert len(got) == slow_ios, got[:3]
    assert all(r["device"] == slow and r["latency_ms"] >= SLOW_MS for r in got), got[:3]
    assert {r["direction"] for r in got} == {"read", "write"}
    assert {r["comm"] for r in got} == {"dd"} and all(r["pid"] > 0 and r["bytes"] == 4096 for r in got), got[:3]
    assert rows(healthy) == []
    # The percentile panel: the slow disk's p99 is above the threshold, the healthy one's far below.
    p99 = {d: stack.influx(f"SELECT max(\"p99_ms\") FROM \"block_latency\" WHERE \"device\" = '{d}' "
                           f"AND time >= {since}ms")[0]["values"][0][1] for d in (slow, healthy)}
    assert p99[slow] >= THRESHOLD_MS and p99[healthy] < THRESHOLD_MS, p99


# ---------------------------------------------------------------- on the dashboard, as Grafana 12 sends it

@needs_probe
def test_the_live_dashboard_lists_the_slow_disk_as_outliers_and_not_the_healthy_one(stack, workload):
    """The live dashboard opened with both disks picked, as Grafana 12 sends
    its queries: every disk panel has data, the outliers table lists the
    slow disk only, and the graphs draw each disk under its own name."""
    from sparkscope_testkit.grafana12 import series_names

    slow = next(d.name for d in workload.disks if d.role == "slow")
    healthy = next(d.name for d in workload.disks if d.role == "healthy")
    # The probe's last period must be stored before the dashboard asks.
    stack.wait_for(f"SELECT count(\"latency_ms\") FROM \"block_outlier\" WHERE \"device\" = '{slow}' "
                   f"AND time >= {workload.probed_from_ms}ms", lambda s: bool(s), deadline_s=45)
    board = json.loads((DASHBOARDS_DIR / "spark-executors.json").read_text())
    dash = stack.open_dashboard(board, workload.probed_from_ms - 30_000, int(time.time() * 1000) + 15_000,
                                url_vars={"device": [slow, healthy]})
    by_title = {p["title"]: p for top in board["panels"] for p in [top, *top.get("panels", [])]}
    disk_panels = ["Disk busy", "Disk IOPS: read and write", "Disk await: read and write",
                   "Block I/O latency: p50, p99, max", "Block I/O latency heatmap", "Block I/O outliers"]
    results = {title: dash.run_panel(by_title[title]) for title in disk_panels}
    for title, got in results.items():
        assert any(row[1:] != [None] * (len(row) - 1) for series in got.values() for one in series
                   for row in one["values"]), title
    outliers = [dict(zip(one["columns"], row)) for one in results["Block I/O outliers"]["A"] for row in one["values"]]
    assert {row["device"] for row in outliers} == {slow}, outliers[:5]
    # Both devices are drawn on the graphs, each under its own name.
    panel = by_title["Disk await: read and write"]
    names = {name for target in panel["targets"] for name in series_names(target, results[panel["title"]][target["refId"]])}
    assert {f"{slow} read", f"{healthy} read"} <= names, names


# ---------------------------------------------------------------- Spark on a slow disk

@needs_probe
@pytest.mark.skipif(shutil.which("mkfs.ext4") is None, reason="needs mkfs.ext4 (e2fsprogs) for the local dir")
def test_a_spark_job_whose_local_dir_is_on_a_slow_disk_has_its_slow_ios_stored_beside_its_stages(
        stack, tmp_path_factory, monkeypatch):
    from conftest import run_spark_job
    from sparkscope.provision.annotator_jar import ensure_annotator_jar
    from sparkscope.spark.conf import LISTENER_PLUGIN_CLASS, annotator_properties
    from sparkscope.settings import ROOT

    base = tmp_path_factory.mktemp("slow-local-dir")
    under, mnt, local_dir = base / "under", base / "mnt", base / "local"
    for d in (under, mnt, local_dir):
        d.mkdir()
    image = under / "local.img"
    image.write_bytes(b"")
    os.truncate(image, 64 << 20)
    # Made on the plain file, at full speed; the loop device then goes through the slow mirror.
    done = subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    jar = ensure_annotator_jar(ROOT, progress=lambda _: None)
    with slow_fs_mounted(under, mnt, base / "fs.log"):
        device = attach_loop(mnt / "local.img")
        try:
            # sync: every shuffle and spill write reaches the disk while its task runs,
            # submitted by the executor's task thread (not by writeback later).
            done = subprocess.run(["mount", "-o", "sync", device, str(local_dir)], capture_output=True, text=True)
            assert done.returncode == 0, done.stderr
            try:
                # Workers and executors take their local dirs from here (standalone and local-cluster).
                monkeypatch.setenv("SPARK_LOCAL_DIRS", str(local_dir))
                # The listener alone, without the executors' plugins. The jar is on the
                # class path, as shipped: with spark.jars, each executor first copied
                # the 1 MB jar onto the slow disk (2 minutes of 150 ms writes) before
                # its first task.
                conf = {**annotator_properties(stack.settings, jar), "spark.plugins": LISTENER_PLUGIN_CLASS}
                assert "spark.jars" not in conf
                run = run_spark_job(stack, "slow_local_dir_job.py", base, conf=conf)
            finally:
                subprocess.run(["umount", str(local_dir)], capture_output=True)
        finally:
            subprocess.run(["losetup", "-d", device], capture_output=True)
    name = Path(device).name
    window = f"time >= {run.started_ms}ms AND time <= {run.ended_ms}ms"
    series = stack.wait_for(f"SELECT \"latency_ms\", \"comm\", \"pid\" FROM \"block_outlier\" WHERE "
                            f"\"device\" = '{name}' AND {window}", lambda s: bool(s), deadline_s=45)
    outliers = [dict(zip(series[0]["columns"], row)) for row in series[0]["values"]]
    assert all(o["latency_ms"] >= SLOW_MS for o in outliers), outliers[:3]
    # Submitted by executor task threads ("Executor task launch worker", cut to 15 characters).
    assert any(o["comm"].startswith("Executor task") for o in outliers), {o["comm"] for o in outliers}
    # The stages the annotator stored cover those slow I/Os: one screen shows both.
    stages = stack.wait_for(f"SELECT \"end_time_ms\" FROM \"sparkscope_stage\" WHERE \"applicationid\" = "
                            f"'{run.app_id}' AND \"status\" <> 'RUNNING'", lambda s: bool(s))
    spans = [(row[0], row[1]) for row in stages[0]["values"]]
    by_tasks_in_a_stage = [o for o in outliers if o["comm"].startswith("Executor task")
                           and any(start <= o["time"] <= end + 1000 for start, end in spans)]
    assert by_tasks_in_a_stage, (spans, [(o["time"], o["comm"]) for o in outliers][:10])
