"""Builds and installs: apt waits for a busy lock instead of failing, the
process helper stops what it started, Telegraf is built with the plugins its
config uses, and the package runs on the oldest Python it declares."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from sparkscope.provision import NO_BUILDS_ENV, BuildError, NotBuilt, apt, build_once
from sparkscope.provision import go
from sparkscope.provision.go import TELEGRAF_PLUGINS, plugins_in_config
from sparkscope.process import group_alive, run_logged, start_group, stop_group, wait_until
from sparkscope.settings import ROOT


# --- apt and its lock ------------------------------------------------------------------

@pytest.fixture
def fake_apt(tmp_path, monkeypatch):
    """An apt-get that reports the dpkg lock held for its first `busy` calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "apt-get"
    script.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        echo "$@" >> {tmp_path}/calls
        n=$(wc -l < {tmp_path}/calls)
        if [ "$n" -le "$(cat {tmp_path}/busy)" ]; then
          echo "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242 (apt-get)" >&2
          exit 100
        fi
        if [ -f {tmp_path}/broken ] && [ "$3" = install ]; then echo "E: Unable to locate package $7" >&2; exit 100; fi
        echo "Setting up docker-compose"
        """))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setattr(apt, "RETRY_S", 0.1)
    if os.geteuid() != 0:
        pytest.skip("apt_install runs only as root")
    return tmp_path


def test_apt_waits_for_a_busy_lock_and_says_so(fake_apt):
    (fake_apt / "busy").write_text("2")
    messages: list[str] = []
    apt.apt_install(["docker-compose"], messages.append, deadline_s=30, log=fake_apt / "apt.log")
    calls = (fake_apt / "calls").read_text().splitlines()
    assert [c.split()[2] for c in calls] == ["update", "update", "update", "install"]
    assert all(re.match(r"-o DPkg::Lock::Timeout=\d+ ", c) for c in calls)
    assert sum("apt is busy (another apt or dpkg runs); waiting for its lock" in m for m in messages) == 1


def test_apt_gives_up_at_the_deadline_with_the_next_step(fake_apt):
    (fake_apt / "busy").write_text("1000")
    started = time.monotonic()
    with pytest.raises(BuildError, match=r"still holds its lock after waiting; let it finish"):
        apt.apt_install(["docker-compose"], lambda _: None, deadline_s=1.5, log=fake_apt / "apt.log")
    assert time.monotonic() - started < 10


def test_apt_fails_at_once_for_anything_but_the_lock(fake_apt):
    (fake_apt / "busy").write_text("0")
    (fake_apt / "broken").touch()
    with pytest.raises(BuildError, match="Unable to locate package"):
        apt.apt_install(["no-such-package"], lambda _: None, deadline_s=60, log=fake_apt / "apt.log")
    assert len((fake_apt / "calls").read_text().splitlines()) == 2  # update, install: no retry


# --- processes ----------------------------------------------------------------------------

def test_stop_group_ends_the_children_too_and_sigkills_what_ignores_sigterm(tmp_path):
    # A leader that ignores SIGTERM, with a child that ignores it as well.
    script = f"trap '' TERM; sleep 300 & touch {tmp_path}/started; sleep 300"
    proc = start_group(["sh", "-c", script], tmp_path / "log")
    assert wait_until((tmp_path / "started").exists, 10), "the shell never started its child"
    started = time.monotonic()
    stop_group(proc.pid, deadline_s=1.0, proc=proc)
    assert not group_alive(proc.pid)
    assert 0.9 < time.monotonic() - started < 8
    assert proc.returncode == -9


def test_run_logged_reports_progress_and_keeps_the_output(tmp_path):
    messages: list[str] = []
    done = run_logged(["sh", "-c", "echo building; sleep 0.5; echo built"], tmp_path / "build.log", "make x",
                      messages.append, heartbeat_s=0.2)
    assert done.returncode == 0
    assert any(m.startswith("  make x: still working") for m in messages) and messages[-1].startswith("  make x: done")
    log = (tmp_path / "build.log").read_text()
    assert "building\nbuilt\n" in log and "# exit status 0" in log


def test_an_interrupted_build_leaves_no_process_behind(tmp_path):
    def interrupt(_line: str) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_logged(["sh", "-c", f"sleep 300 & echo $! > {tmp_path}/child; wait"], tmp_path / "log", "long",
                   interrupt, heartbeat_s=0.3)
    child = int((tmp_path / "child").read_text())
    assert wait_until(lambda: not Path(f"/proc/{child}").exists() or
                      "Z" in Path(f"/proc/{child}/stat").read_text().split()[2], 5), f"pid {child} outlived the build"


# --- Telegraf's plugins ------------------------------------------------------------------

def test_telegraf_is_built_with_exactly_the_plugins_its_config_uses():
    # telegraf.conf, and thanos.conf beside it for the Thanos store (one build runs both).
    needed = set().union(*(plugins_in_config((ROOT / "telegraf" / name).read_text())
                           for name in ("telegraf.conf", "thanos.conf")))
    assert needed == set(TELEGRAF_PLUGINS), (
        f"telegraf.conf and thanos.conf need {sorted(needed - set(TELEGRAF_PLUGINS))} that the build lacks, and the build has "
        f"{sorted(set(TELEGRAF_PLUGINS) - needed)} that the config does not use: edit TELEGRAF_PLUGINS in "
        "src/sparkscope/provision/go.py")


def test_plugins_are_read_from_sections_and_data_formats():
    conf = '[[inputs.socket_listener]]\n  data_format = "graphite"\n[[outputs.file]]\n#[[inputs.cpu]]\n'
    assert plugins_in_config(conf) == {"inputs.socket_listener", "parsers.graphite", "outputs.file"}


def test_an_outputs_data_format_is_a_serializer_and_an_inputs_a_parser():
    conf = ('[[outputs.http]]\n  data_format = "prometheusremotewrite"\n'
            '[[inputs.http_listener_v2]]\n  data_format = "json"\n')
    assert plugins_in_config(conf) == {"outputs.http", "serializers.prometheusremotewrite",
                                       "inputs.http_listener_v2", "parsers.json"}


# --- the oldest Python declared -------------------------------------------------------------

def oldest_python() -> str | None:
    declared = re.search(r'requires-python = ">=(\d+\.\d+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    candidates = [*sorted(str(p) for p in Path.home().glob(f".pyenv/versions/{declared}.*/bin/python{declared}")),
                  shutil.which(f"python{declared}")]
    for candidate in filter(None, candidates):  # a pyenv shim may exist without its version
        if subprocess.run([candidate, "--version"], capture_output=True).returncode == 0:
            return candidate
    return None


def test_the_cli_runs_on_the_oldest_python_declared(tmp_path):
    python = oldest_python()
    if python is None:
        pytest.skip("the oldest Python pyproject.toml declares is not installed here")
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT / "src"), "HOME": str(tmp_path),
           "GRAFANA_ADMIN_PASSWORD": "x-test", "SPARKSCOPE_STATE_DIR": str(tmp_path / "state")}
    # Every module imports (no third-party package needed) ...
    modules = sorted({".".join(p.relative_to(ROOT / "src").with_suffix("").parts).replace(".__init__", "")
                      for p in (ROOT / "src" / "sparkscope").rglob("*.py") if p.name not in ("__main__.py",)})
    modules = [m for m in modules if not m.endswith("tpcds_driver")  # runs inside spark-submit only
               and m != "sparkscope.report.page"  # draws with plotly, a declared dependency
               and not m.startswith("sparkscope.top.")]  # draws with rich, a declared dependency
    # ... and every file compiles on it, those two included.
    compiled = subprocess.run([python, "-m", "compileall", "-q", str(ROOT / "src" / "sparkscope")],
                              env=env, capture_output=True, text=True)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    script = "import importlib, sys\nfor m in sys.argv[1:]: importlib.import_module(m)\n"
    imported = subprocess.run([python, "-c", script, *modules, "sparkscope_testkit.sandbox"],
                              env=env, capture_output=True, text=True)
    assert imported.returncode == 0, imported.stderr
    # ... the CLI answers, and the process helper starts and stops a group on it.
    conf = subprocess.run([python, "-m", "sparkscope", "conf", "--no-annotator"], env=env, capture_output=True,
                          text=True)
    assert conf.returncode == 0 and "spark.metrics.conf.*.sink.graphite.class=" in conf.stdout, conf.stderr
    # Without rich (this Python has none) only `top` is unavailable, and it says why.
    top = subprocess.run([python, "-m", "sparkscope", "top"], env=env, capture_output=True, text=True)
    assert top.returncode == 1 and "needs the Python package rich" in top.stderr, top.stderr
    helper = ("from pathlib import Path; from sparkscope.process import run_logged, start_group, stop_group, group_alive\n"
              f"d = run_logged(['true'], Path('{tmp_path}/log'), 'true', print)\nassert d.returncode == 0\n"
              f"p = start_group(['sleep', '30'], Path('{tmp_path}/log'))\nstop_group(p.pid, 5, proc=p)\n"
              "assert not group_alive(p.pid)\n")
    ran = subprocess.run([python, "-c", helper], env=env, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr


BUILDER = """
import sys, time
from pathlib import Path
from sparkscope.provision import NO_BUILDS_ENV, NotBuilt, build_once
dest, mark = Path(sys.argv[1]), Path(sys.argv[2])
def build(staging):
    mark.open("a").write(f"{sys.argv[3]} built\\n")
    time.sleep(float(sys.argv[4]))
    (staging / "tool").write_text(sys.argv[3])
build_once(dest, build, waiting=lambda: mark.open("a").write(f"{sys.argv[3]} waited\\n"))
print((dest / "tool").read_text())
"""


def builds_on(**extra: str) -> dict[str, str]:
    """The environment with builds allowed (the fast tier turns them off): these
    builders make a file, which is what the tests look at."""
    return {**{k: v for k, v in os.environ.items() if k != NO_BUILDS_ENV}, **extra}


def test_where_builds_are_off_a_missing_tool_is_refused_and_nothing_is_made(tmp_path, monkeypatch):
    monkeypatch.setenv(NO_BUILDS_ENV, "1")
    dest = tmp_path / "cache" / "tool-v1"
    with pytest.raises(NotBuilt, match="tool-v1 is not on this machine yet"):
        build_once(dest, lambda staging: (staging / "tool").write_text("built"))
    assert not dest.exists()
    monkeypatch.delenv(NO_BUILDS_ENV)
    assert (build_once(dest, lambda staging: (staging / "tool").write_text("built")) / "tool").read_text() == "built"
    monkeypatch.setenv(NO_BUILDS_ENV, "1")
    assert build_once(dest, lambda staging: 1 / 0) == dest  # what is built is used; only building is off


def test_a_second_run_waits_for_the_build_in_progress_and_takes_its_result(tmp_path):
    """The launcher's prebuild beside pip and the command after it, or two test
    workers: one build, the other waits (and says so) instead of building again."""
    dest, mark = tmp_path / "cache" / "tool-v1", tmp_path / "mark"
    env = builds_on(PYTHONPATH=str(ROOT / "src"))
    first = subprocess.Popen([os.sys.executable, "-c", BUILDER, str(dest), str(mark), "first", "2"],
                             env=env, stdout=subprocess.PIPE, text=True)
    assert wait_until(lambda: mark.exists() and "first built" in mark.read_text(), 30, 0.05)
    second = subprocess.run([os.sys.executable, "-c", BUILDER, str(dest), str(mark), "second", "0"],
                            env=env, stdout=subprocess.PIPE, text=True, timeout=60)
    assert first.communicate(timeout=60)[0] == second.stdout == "first\n"
    assert mark.read_text().splitlines() == ["first built", "second waited"]


def test_a_killed_builder_leaves_the_lock_and_no_half_made_result(tmp_path):
    dest, mark = tmp_path / "cache" / "tool-v1", tmp_path / "mark"
    env = builds_on(PYTHONPATH=str(ROOT / "src"))
    first = subprocess.Popen([os.sys.executable, "-c", BUILDER, str(dest), str(mark), "first", "60"], env=env)
    assert wait_until(lambda: mark.exists() and "first built" in mark.read_text(), 30, 0.05)
    first.kill()
    first.wait(timeout=30)
    assert not dest.exists()
    second = subprocess.run([os.sys.executable, "-c", BUILDER, str(dest), str(mark), "second", "0"],
                            env=env, stdout=subprocess.PIPE, text=True, timeout=60)
    assert second.stdout == "second\n" and "second built" in mark.read_text()


@pytest.mark.parametrize("module, builds, packages", [
    ("sparkscope.provision.prebuild", "builds", "['sparkscope']"),  # ./sparkscope install's first run
    ("sparkscope_dev.prebuild", "suite_builds", "['sparkscope', 'sparkscope_dev']"),  # ./sparkscope test's
])
def test_the_prebuild_runs_on_the_standard_library_alone(module, builds, packages):
    """The launcher starts it with the system's Python before the venv exists:
    with no site-packages at all (-S), it and every module its builds use import."""
    script = (f"import sys, importlib; from pathlib import Path; prebuild = importlib.import_module('{module}');"
              f"steps = prebuild.{builds}(Path('/nonexistent'), Path('.'));"
              "print(sorted({m.split('.')[0] for m in sys.modules} - set(sys.stdlib_module_names)"
              " - set(sys.builtin_module_names) - {'__main__'}))")
    done = subprocess.run([os.sys.executable, "-S", "-c", script], env={"PYTHONPATH": str(ROOT / "src"),
                          "PATH": os.environ["PATH"]}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == packages, done.stdout


def test_the_launcher_runs_test_as_the_developers_package_and_the_rest_as_the_product(tmp_path):
    """./sparkscope test is sparkscope_dev, every argument after it pytest's (its first
    run's prebuild too); the product's CLI has no test command."""
    venv = tmp_path / "venv"  # a ready venv whose python is this one (a first run would pip install)
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text(f"#!/bin/sh\nexec {os.sys.executable} \"$@\"\n")
    (venv / "bin" / "python").chmod(0o755)
    (venv / ".sparkscope-ready").touch()
    os.utime(venv / ".sparkscope-ready", (time.time() + 3600,) * 2)  # newer than pyproject.toml
    env = {**os.environ, "SPARKSCOPE_VENV": str(venv), "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([str(ROOT / "sparkscope"), "test", "--fast", "--version"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "pytest" in done.stdout + done.stderr, done.stderr
    launcher = (ROOT / "sparkscope").read_text()
    assert "test) prebuild=sparkscope_dev.prebuild ;;" in launcher
    assert "install) prebuild=sparkscope.provision.prebuild ;;" in launcher
    from sparkscope.cli import build_parser
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["test"])
    assert exit_.value.code == 2


def fake_tools(folder: Path, **scripts: str) -> str:
    """A PATH of stand-in tools (name -> what it prints) beside Go and a shell."""
    folder.mkdir()
    for name, output in scripts.items():
        (folder / name).write_text(f"#!/bin/sh\necho '{output}'\n")
        (folder / name).chmod(0o755)
    for real in ("go", "sh", "gcc"):
        found = shutil.which(real)
        if found:
            (folder / real).symlink_to(found)
    return str(folder)


FAKE_GO_FOR_THANOS = """#!/bin/sh
# go mod download -json names the module's folder; go build -o OUT builds into OUT
case "$1" in
  version) echo "go version go1.27.3 linux/amd64"; exit 0 ;;
  mod) echo '{"Path": "github.com/thanos-io/thanos", "Dir": "MODULE"}'; exit 0 ;;
esac
out=""; prev=""
for arg; do [ "$prev" = "-o" ] && out="$arg"; prev="$arg"; done
echo "go $*" >> "$(dirname "$0")/calls"
[ -w go.mod ] || { echo "go.mod is read-only here" >&2; exit 1; }
[ -f cmd/sparkscope-bcrypt-hash/main.go ] || { echo "no bcrypt-hash source" >&2; exit 1; }
[ -n "$FAIL_BUILD" ] && { echo "compile: out of memory" >&2; exit 2; }
echo built > "$out"
"""


def fake_thanos_module(tmp_path: Path, fail: bool, monkeypatch) -> Path:
    """A read-only module folder (as Go's module cache keeps them) and a go that 'builds' it."""
    module = tmp_path / "modcache" / "thanos@v0"
    (module / "cmd" / "thanos").mkdir(parents=True)
    (module / "go.mod").write_text("module github.com/thanos-io/thanos\n")
    for path in (module / "go.mod", module / "cmd" / "thanos", module / "cmd", module):
        path.chmod(0o555 if path.is_dir() else 0o444)
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "go").write_text(FAKE_GO_FOR_THANOS.replace("MODULE", str(module)))
    (tools / "go").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
    monkeypatch.setenv("FAIL_BUILD", "1" if fail else "")
    return tools


def test_thanos_is_built_in_a_writable_copy_of_its_module_with_bcrypt_hash_beside_it(tmp_path, monkeypatch):
    tools = fake_thanos_module(tmp_path, fail=False, monkeypatch=monkeypatch)
    binary = go.ensure_thanos(tmp_path / "cache", progress=lambda _: None)
    assert binary == tmp_path / "cache" / "bin" / f"thanos-{go.THANOS_VERSION}" / "thanos"
    assert binary.read_text() == "built\n" and binary.with_name("bcrypt-hash").read_text() == "built\n"
    calls = (tools / "calls").read_text()
    assert "-tags netgo,slicelabels" in calls and "./cmd/thanos" in calls  # slicelabels: Receive panics without
    assert not (tmp_path / "cache" / "src").exists() or not any((tmp_path / "cache" / "src").iterdir())
    assert go.ensure_thanos(tmp_path / "cache", progress=lambda _: None) == binary  # cached: no second build
    assert (tools / "calls").read_text() == calls


def test_a_failed_thanos_build_says_why_and_leaves_no_half_binary(tmp_path, monkeypatch):
    fake_thanos_module(tmp_path, fail=True, monkeypatch=monkeypatch)
    with pytest.raises(BuildError, match=r"go build thanos failed \(exit 2\)[\s\S]*out of memory"):
        go.ensure_thanos(tmp_path / "cache", progress=lambda _: None)
    bin_dir = tmp_path / "cache" / "bin"
    assert sorted(p.name for p in bin_dir.iterdir() if not p.name.startswith(".thanos-v")) == [
        f"thanos-{go.THANOS_VERSION}.build.log"]
    assert not any(p.is_dir() for p in bin_dir.iterdir())  # no staging folder left either


def test_influxd_without_cargo_says_to_install_rust_before_building_anything(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", fake_tools(tmp_path / "bin"))
    with pytest.raises(BuildError, match=r"needs Rust \(cargo\).*rustup") as raised:
        go.ensure_influxd(tmp_path / "cache", progress=lambda _: None)
    assert "compose" in str(raised.value)
    assert not (tmp_path / "cache" / "bin").exists()  # nothing half-built, nothing fetched


def test_influxd_with_debians_old_rust_names_the_version_flux_needs(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", fake_tools(tmp_path / "bin", cargo="cargo 1.63.0", rustc="rustc 1.63.0 (4b91a6ea7 2022-08-08)"))
    with pytest.raises(BuildError, match=r"needs Rust 1\.83 or newer; this machine has rustc 1\.63\.0"):
        go.ensure_influxd(tmp_path / "cache", progress=lambda _: None)


def test_a_new_enough_rust_is_named_to_rustup_over_flux_s_pinned_toolchain(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", fake_tools(tmp_path / "bin", cargo="cargo 1.95.0", rustc="rustc 1.95.0 (59807616e 2026-04-14)",
                                          rustup="rustup 1.28.2"))
    assert go.rust_env() == {"RUSTFLAGS": "--cap-lints=warn", "RUSTUP_TOOLCHAIN": "1.95.0"}
