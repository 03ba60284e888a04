"""Small soundness defaults: what `status` leaves behind, requests to this
machine and proxies, and the probe images holding what they import."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import socket
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from sparkscope.store import http
from sparkscope.store import influx
from sparkscope import cli
from sparkscope.stack.native import NativeBackend
from sparkscope.settings import ROOT
from sparkscope_testkit.sandbox import throwaway_stack


@pytest.fixture(scope="module")
def influx_only(tmp_path_factory):
    with throwaway_stack(tmp_path_factory.mktemp("soundness"), only=("influxdb",)) as settings:
        yield settings


def contents(settings) -> tuple:
    """Everything status could change: the series, and each measurement's points."""
    def rows(query: str) -> list:
        return [tuple(v) for s in influx.query(settings.influx_admin, query, settings.database) for v in s["values"]]
    counts = {m: rows(f'SELECT count(*) FROM "{m}"') for (m,) in rows("SHOW MEASUREMENTS")}
    return rows("SHOW SERIES"), counts


def test_status_reads_and_never_writes_and_a_stopped_telegraf_is_not_all_up(influx_only, monkeypatch, capsys):
    """status runs as often as a monitor likes against the user's own database:
    it leaves it as it was (no test write, no DROP), and still says the write
    path is broken when Telegraf, the writer, is not running."""
    influx.write(influx_only.influx_writer, influx_only.database, f"before_status ok=1i {int(time.time())}")
    before = contents(influx_only)
    monkeypatch.setattr(cli, "load_settings", lambda: influx_only)
    for _ in range(20):
        rows = NativeBackend(influx_only).status()
        assert next(r for r in rows if r.name == "influxdb").state == "up"
    assert cli.main(["status", "--backend", "native", "--json"]) == 3  # Telegraf is not running
    import json
    services = {s["name"]: s for s in json.loads(capsys.readouterr().out)["services"]}
    assert services["influxdb"]["state"] == "up" and services["telegraf"]["state"] == "down"
    assert contents(influx_only) == before


class Recorder(BaseHTTPRequestHandler):
    seen: list[str] = []

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        Recorder.seen.append(f"{self.server.server_address[1]} {self.path} {self.headers.get('Authorization')}")
        self.send_response(204)
        self.end_headers()


@pytest.fixture
def servers():
    started = []
    for _ in range(2):
        server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started.append(server)
    Recorder.seen = []
    yield [s.server_address[1] for s in started]
    for server in started:
        server.shutdown()


def test_requests_to_this_machine_never_go_through_the_proxy(servers, monkeypatch):
    """A proxy set for the internet (http_proxy) must not see the stack's own
    requests, the profiler plugin's bearer token among them."""
    target, proxy = servers
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{proxy}")
    monkeypatch.setenv("no_proxy", "")
    request = urllib.request.Request(f"http://127.0.0.1:{target}/api/status",
                                     headers={"Authorization": "Bearer secret"})
    with http.urlopen(request, timeout=5):
        pass
    assert influx.ping(f"http://localhost:{target}")
    assert Recorder.seen and all(line.startswith(f"{target} ") for line in Recorder.seen), Recorder.seen
    # The check fails where urllib's own default is used: the proxy gets the token.
    # (A fresh default opener: urlopen's global one read the environment when first used.)
    Recorder.seen = []
    with urllib.request.build_opener().open(request, timeout=5):
        pass
    assert any(line.startswith(f"{proxy} ") and "Bearer secret" in line for line in Recorder.seen), Recorder.seen


def own_address() -> str:
    """A non-loopback address of this machine (the one its default route leaves from)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("198.51.100.1", 9))  # no packet is sent: UDP connect only picks a route
        except OSError:
            pytest.skip("no route off this machine: it has no address but loopback")
        return s.getsockname()[0]


def test_requests_to_this_machines_own_address_skip_the_proxy_too(monkeypatch):
    """INFLUXDB_BIND or GRAPHITE_BIND set to the machine's own address: the
    CLI's and the probes' Basic-auth requests there must not reach a proxy."""
    address = own_address()
    server = ThreadingHTTPServer((address, 0), Recorder)
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    for s in (server, proxy):
        threading.Thread(target=s.serve_forever, daemon=True).start()
    try:
        Recorder.seen = []
        monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{proxy.server_address[1]}")
        monkeypatch.setenv("no_proxy", "")
        request = urllib.request.Request(f"http://{address}:{server.server_address[1]}/query",
                                         headers={"Authorization": "Basic c2VjcmV0"})
        with http.urlopen(request, timeout=5):
            pass
        assert Recorder.seen == [f"{server.server_address[1]} /query Basic c2VjcmV0"]
        assert http.is_this_machine(address) and not http.is_this_machine("192.0.2.254")
        assert not http.is_this_machine("example.com")  # a name is never resolved to decide
    finally:
        server.shutdown()
        proxy.shutdown()


@pytest.mark.parametrize("dockerfile", sorted(ROOT.glob("src/sparkscope/probes/*/Dockerfile")),
                         ids=lambda p: p.parent.name)
def test_each_probe_image_holds_every_module_its_entry_point_imports(dockerfile, tmp_path):
    """The compose probes copy parts of the package: the entry point must
    import from those parts alone (python -m <module> --help)."""
    text = dockerfile.read_text()
    for line in text.replace("\\\n", " ").splitlines():  # a line continued with a backslash is one instruction
        if line.startswith("COPY "):
            *sources, dest = line.split()[1:]
            target = tmp_path / dest.lstrip("/").replace("opt/sparkscope/", "", 1)
            for source in sources:
                if source.endswith("/"):
                    shutil.copytree(ROOT / source, target, dirs_exist_ok=True)
                else:  # files into a directory
                    target.mkdir(parents=True, exist_ok=True)
                    shutil.copy(ROOT / source, target)
    module = text.split('"-m", "', 1)[1].split('"', 1)[0]
    done = subprocess.run([sys.executable, "-m", module, "--help"], cwd=tmp_path, capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]


def control_file(directory: Path, app: str) -> Path:
    directory.mkdir(mode=0o700, exist_ok=True)
    path = directory / f"{app}.json"
    path.write_text(f'{{"application": "{app}", "url": "http://127.0.0.1:9", "token": "t", "pid": {os.getpid()}}}')
    path.chmod(0o600)
    return path


def test_profile_trusts_only_control_files_the_caller_owns(tmp_path):
    """Under a shared /tmp anyone can plant a control file naming their own
    endpoint; `sparkscope profile` would send it the bearer token."""
    from sparkscope.profiles import control

    ours = tmp_path / "ours"
    control_file(ours, "app-ours")
    assert [c.application_id for c in control.find_controls(ours)][:1] == ["app-ours"]
    open_dir = tmp_path / "open"
    control_file(open_dir, "app-open")
    open_dir.chmod(0o777)
    linked = tmp_path / "linked"
    linked.mkdir(mode=0o700)
    (linked / "app-link.json").symlink_to(control_file(tmp_path / "elsewhere", "app-link"))
    for planted in (open_dir, linked):
        assert "app-open" not in {c.application_id for c in control.find_controls(planted)}
        assert "app-link" not in {c.application_id for c in control.find_controls(planted)}
    if os.geteuid() == 0:  # only root can give a file away
        theirs = tmp_path / "theirs"
        os.chown(control_file(theirs, "app-theirs"), 65534, 65534)
        assert "app-theirs" not in {c.application_id for c in control.find_controls(theirs)}


def test_a_first_up_builds_before_any_start_deadline_runs(tmp_path, monkeypatch):
    """The README's first command on a machine where nothing is built yet: the
    build (here a slow one) must not eat the service's health deadline. It
    once did, and a Grafana that had finished its migrations was killed."""
    from sparkscope import stack as stack_module
    from sparkscope.process import quiet
    from sparkscope.stack import native
    from sparkscope_testkit.sandbox import isolated_settings

    real = native.ensure_influxd
    built: list[float] = []

    def slow_build(cache_dir, progress=print):
        if not built:
            time.sleep(4)  # a first build, longer than the deadline below; then it is cached
        built.append(time.monotonic())
        return real(cache_dir, progress)

    granted: list[float] = []
    real_wait = stack_module.wait_until

    def recorded_wait(condition, deadline_s, *args, **kwargs):
        granted.append(deadline_s)
        return real_wait(condition, deadline_s, *args, **kwargs)

    monkeypatch.setattr(native, "ensure_influxd", slow_build)
    monkeypatch.setattr(stack_module, "wait_until", recorded_wait)
    monkeypatch.setitem(stack_module.HEALTH_DEADLINE_S, "influxdb", 3.0)
    backend = native.NativeBackend(isolated_settings(tmp_path / "state"))
    try:
        backend.up(only=("influxdb",), progress=quiet)
        assert built and influx.ping(backend.settings.influx_url)
        # InfluxDB got its whole deadline after the build, not what the build left of it.
        assert granted and granted[0] > 2.5, granted
    finally:
        backend.down(progress=quiet)
