"""sparkscope_testkit: the one home of what tests/ and bench/ share, a
package beside the product that both import by name."""

from __future__ import annotations

import ast
import socket
import subprocess
import sys
import threading

import pytest

from sparkscope.process import wait_until
from sparkscope.settings import ROOT
from sparkscope_testkit.graphite_tap import GraphiteTap

BENCH_SCRIPTS = sorted(p.name for p in (ROOT / "bench").glob("*.py"))


def imported_modules(path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names = set()
    for node in ast.walk(tree):  # function-level imports included
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


# Beside the product, never imported by it: what the tests share, and the developers' tools.
NOT_THE_PRODUCT = ("sparkscope_testkit", "sparkscope_dev")


def importing_the_tooling(package) -> list[str]:
    """Each module of the package that imports one of NOT_THE_PRODUCT (inside a function too), with which."""
    return [f"{p.relative_to(package.parent)} imports {m}" for p in sorted(package.rglob("*.py"))
            for m in sorted(imported_modules(p)) if m.split(".")[0] in NOT_THE_PRODUCT]


def test_the_product_never_imports_the_testkit_or_the_developers_tools():
    importing = importing_the_tooling(ROOT / "src" / "sparkscope")
    assert not importing, f"the product imports test or developer support: {importing}"


def test_a_product_module_importing_the_testkit_or_the_developers_tools_is_found(tmp_path):
    package = tmp_path / "sparkscope"
    (package / "report").mkdir(parents=True)
    (package / "cli.py").write_text("import json\nfrom sparkscope_dev.suite import run_suite\n")
    (package / "report" / "page.py").write_text("def later():\n    import sparkscope_testkit.sandbox\n")
    (package / "report" / "advice.py").write_text("from sparkscope.errors import SparkscopeError\n")
    assert importing_the_tooling(package) == ["sparkscope/cli.py imports sparkscope_dev.suite",
                                              "sparkscope/report/page.py imports sparkscope_testkit.sandbox"]


def test_no_test_or_bench_script_edits_sys_path():
    editing = [str(p.relative_to(ROOT)) for d in ("tests", "bench", "src/sparkscope_testkit")
               for p in (ROOT / d).rglob("*.py") if "sys.path.insert" in p.read_text()
               and p.name != "test_testkit.py"]
    assert not editing, f"these find their imports by editing sys.path: {editing}"


@pytest.mark.parametrize("script", BENCH_SCRIPTS)
def test_every_bench_script_imports_and_answers_help(script):
    done = subprocess.run([sys.executable, str(ROOT / "bench" / script), "--help"], cwd="/",
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("usage:"), done.stderr[-2000:]


KILLED_MIDWAY = """
import sys, time
from sparkscope_testkit.sandbox import terminated_as_exit
with terminated_as_exit():
    try:
        print("ready", flush=True)
        time.sleep(60)
    finally:
        print("stopped what it started", flush=True)
"""


@pytest.mark.parametrize("guarded", [True, False])
def test_a_bench_killed_midway_still_runs_its_cleanup(guarded):
    """`kill PID` on a bench inside throwaway_stack stops its stack: within
    terminated_as_exit SIGTERM exits through the finally blocks; without it
    (the check fails), Python dies with them unrun."""
    code = KILLED_MIDWAY if guarded else KILLED_MIDWAY.replace("with terminated_as_exit():", "if True:")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd="/")
    assert proc.stdout.readline().strip() == "ready"
    proc.terminate()
    out, _ = proc.communicate(timeout=30)
    if guarded:
        assert proc.returncode == 143 and "stopped what it started" in out, (proc.returncode, out)
    else:
        assert proc.returncode == -15 and out == "", (proc.returncode, out)


def test_the_graphite_tap_counts_every_line_a_sender_wrote_before_it_exited():
    """The fault tests compare the tap's count with InfluxDB's the moment Spark
    exits: the tap must have read each connection to its end by then, and
    must never forward a line it has not yet counted."""
    received = bytearray()
    upstream = socket.create_server(("127.0.0.1", 0))

    def sink() -> None:
        conn, _ = upstream.accept()
        with conn:
            while chunk := conn.recv(65536):
                received.extend(chunk)

    threading.Thread(target=sink, daemon=True).start()
    tap = GraphiteTap(upstream.getsockname())
    try:
        lines = "".join(f"spark.app-1.{i % 7}.jvm.heap.used {i} {1_700_000_000 + i}\n" for i in range(200_000))
        with socket.create_connection(("127.0.0.1", tap.port)) as sender:
            sender.sendall(lines.encode())
        sent = tap.points("app-1")  # at once, as a test does when spark-submit returns
        assert len(sent) == 200_000
        assert wait_until(lambda: len(received) == len(lines), 10, 0.05)
    finally:
        tap.close()
        upstream.close()


def test_thanos_port_blocks_stay_below_the_kernels_ephemeral_ports(monkeypatch):
    """A port the kernel may hand to any socket of a test beside this one is never
    part of a Thanos block (the compactor's port was taken that way once)."""
    from sparkscope.stack import thanos
    from sparkscope_testkit import sandbox

    start = sandbox.ephemeral_ports_start()
    for pick in (lambda n: 0, lambda n: n - 1):  # the first and the last block the search may start at
        monkeypatch.setattr(sandbox.secrets, "randbelow", pick)
        base = sandbox.free_base_port(5)
        ports = [p for proc in thanos.layout(base, 5, replication_factor=1).processes for p in proc.ports()]
        assert max(ports) < start, (base, max(ports), start)
