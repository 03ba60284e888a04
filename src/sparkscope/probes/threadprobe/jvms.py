"""Which processes on this host are Spark JVMs, and whose: application id
and executor id, the two tags the Graphite metrics carry, so that the thread
panels line up with every other panel of the same executor.

- Executors (standalone, local-cluster, YARN, Kubernetes) have both on the
  command line: `...ExecutorBackend --executor-id 1 --app-id app-2026...`.
- A driver (`org.apache.spark.deploy.SparkSubmit`) does not: spark.app.id is
  chosen inside the JVM after it starts. It is found, in order,
  1. from an executor on this host whose --driver-url names a port this
     driver listens on (local-cluster, or a client-mode driver beside its
     executors): no network request at all;
  2. from the driver's own web UI (/api/v1/applications; local mode, where
     the driver runs the tasks), asked only on the UI's ports it listens on:
     4040-4139 (spark.ui.port's default and its retries) or the
     spark.ui.port given on its command line. Other ports are never asked:
     they speak Py4J or Spark RPC, not HTTP.
  Until one answers (the UI starts a second or two after the JVM; with
  spark.ui.enabled=false and no executors here, never), the driver is not
  sampled, and the sampler says so once.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Callable, Optional

from sparkscope.store import http
from sparkscope.probes import procstat
from sparkscope.probes.threadprobe import procfs

SUBMIT_CLASS = "org.apache.spark.deploy.SparkSubmit"
UI_TIMEOUT_S = 0.5
UI_PORTS = range(4040, 4140)
NAME_GRACE_S = 30.0
TCP_LISTEN = "0A"


@dataclass
class SparkJvm:
    pid: int
    start: int  # starttime in ticks: a reused pid is another process
    executor_id: str  # "driver" or the executor's id
    app_id: Optional[str]  # None: a driver whose id is not known yet
    driver_port: Optional[int] = None  # executors: the port of --driver-url
    ui_port: Optional[int] = None  # drivers: spark.ui.port when the command line sets it


def _flag(argv: list[str], name: str) -> Optional[str]:
    for i, arg in enumerate(argv[:-1]):
        if arg == name:
            return argv[i + 1]
    return None


def from_cmdline(pid: int, start: int, argv: list[str]) -> Optional[SparkJvm]:
    """A SparkJvm for a Spark executor or driver command line, else None."""
    if not argv or not os.path.basename(argv[0]).startswith("java"):
        return None
    if any(arg.endswith("ExecutorBackend") for arg in argv):
        executor_id, app_id = _flag(argv, "--executor-id"), _flag(argv, "--app-id")
        if executor_id is None or app_id is None:
            return None
        url = _flag(argv, "--driver-url") or ""
        port = url.rpartition(":")[2]
        return SparkJvm(pid, start, executor_id, app_id, int(port) if port.isdigit() else None)
    if SUBMIT_CLASS in argv:
        ui = next((a.split("=", 1)[1] for a in argv if a.startswith("spark.ui.port=")), "")
        return SparkJvm(pid, start, "driver", None, ui_port=int(ui) if ui.isdigit() and int(ui) else None)
    return None


def listening_ports(pid: int) -> set[int]:
    """TCP ports this process listens on: its socket inodes matched against
    its network namespace's LISTEN rows."""
    inodes = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except PermissionError:
        raise
    except OSError:
        return set()
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        text = procfs.read_all(f"/proc/{pid}/net/{table}") or ""
        for line in text.splitlines()[1:]:
            cols = line.split()
            if len(cols) > 9 and cols[3] == TCP_LISTEN and cols[9] in inodes:
                ports.add(int(cols[1].rpartition(":")[2], 16))
    return ports


def ui_app_id(port: int, timeout_s: float = UI_TIMEOUT_S) -> Optional[str]:
    """The application id a Spark UI on this port serves, else None."""
    try:
        with http.urlopen(f"http://127.0.0.1:{port}/api/v1/applications", timeout=timeout_s) as resp:
            apps = json.loads(resp.read(65536))
    except Exception:  # noqa: BLE001 (whatever answers there, it is not a Spark UI)
        return None
    if isinstance(apps, list) and apps and isinstance(apps[0], dict) and isinstance(apps[0].get("id"), str):
        return apps[0]["id"]
    return None


def resolve_driver(driver: SparkJvm, executors: list[SparkJvm],
                   ask_ui: Callable[[int], Optional[str]] = ui_app_id,
                   ports_of: Callable[[int], set[int]] = listening_ports) -> Optional[str]:
    ports = ports_of(driver.pid)
    for executor in executors:
        if executor.driver_port in ports:
            return executor.app_id
    for port in sorted(p for p in ports if p in UI_PORTS or p == driver.ui_port):
        found = ask_ui(port)
        if found:
            return found
    return None


class Discovery:
    """The Spark JVMs now running, kept from one pass to the next: each
    process's command line is read once, when its pid first shows, processes
    that exited are forgotten, so a month-long host with thousands of
    executors come and gone keeps only what runs."""

    def __init__(self, proc: str = "/proc"):
        self.proc = proc
        # pid -> (start, jvm or None: not Spark, and then its name: a launcher script
        # that execs java keeps its pid and start time, and only its name changes)
        self.known: dict[int, tuple[int, Optional[SparkJvm], str]] = {}
        self.unresolved_said: set[tuple[int, int]] = set()
        self.unresolved_since: dict[tuple[int, int], float] = {}
        self.messages: list[str] = []

    def scan(self) -> list[SparkJvm]:
        try:
            pids = [int(p) for p in os.listdir(self.proc) if p.isdigit()]
        except OSError:
            return []
        seen: dict[int, tuple[int, Optional[SparkJvm], str]] = {}
        for pid in pids:
            # A pid still listed is the process we read before: for it to be
            # another, pids would have to wrap around (pid_max, up to 4 million)
            # between two scans a couple of seconds apart. But it may have
            # exec'd since, and its name (comm) tells: spark-submit and
            # spark-class are bash scripts that exec java in the same process,
            # so a scan that lands before the exec saw bash; and a JVM's child
            # caught before its exec (below) becomes pgrep or python.
            cached = self.known.get(pid)
            name = self._name(pid)
            if cached and name == cached[2]:
                seen[pid] = cached
                continue
            stat = procfs.read_text(f"{self.proc}/{pid}/stat")
            start = procstat.start_ticks(stat) if stat else None
            if start is None:
                continue
            argv = procfs.cmdline(pid, self.proc)
            if argv is None:
                continue
            jvm = from_cmdline(pid, start, argv)
            if jvm is not None and self._is_fork_of_parent(stat, argv):
                jvm = None
            seen[pid] = (start, jvm, name)
        self.known = seen
        jvms = [jvm for _, jvm, _ in seen.values() if jvm is not None]
        executors = [j for j in jvms if j.executor_id != "driver"]
        for jvm in jvms:
            if jvm.app_id is None:
                why = ("its UI at /api/v1/applications does not answer and no executor on this host names it; "
                       "it is sampled once one does")
                try:
                    jvm.app_id = resolve_driver(jvm, executors)
                except PermissionError:
                    why = ("its sockets are not ours to read (another user's process): run the sampler as root "
                           "or as the user running Spark to sample drivers; executors are sampled all the same")
                key = (jvm.pid, jvm.start)
                since = self.unresolved_since.setdefault(key, time.monotonic())
                # A driver is nameless for its first seconds (UI and executors start after it): say so
                # only when it stays so.
                if jvm.app_id is None and key not in self.unresolved_said and time.monotonic() - since > NAME_GRACE_S:
                    self.unresolved_said.add(key)
                    self.messages.append(f"driver pid {jvm.pid}: application id not known: {why}")
                elif jvm.app_id is not None and key in self.unresolved_said:
                    self.messages.append(f"driver pid {jvm.pid}: application {jvm.app_id}, sampled from now on")
        alive = {(j.pid, j.start) for j in jvms}
        self.unresolved_said &= alive
        self.unresolved_since = {k: v for k, v in self.unresolved_since.items() if k in alive}
        return [j for j in jvms if j.app_id is not None]

    def _is_fork_of_parent(self, stat: str, argv: list[str]) -> bool:
        """A process with its parent's very command line is the parent's fork
        caught before it exec'd: a Spark JVM starts children all the time
        (Spark's process-tree metrics run pgrep every poll, PySpark starts its
        workers), and each is a copy of the JVM for a moment. Taken for the
        JVM, it would be sampled under the same executor and its period's
        point, written at the same time, would overwrite the JVM's."""
        ppid = procstat.ppid(stat)
        return ppid is not None and ppid > 1 and procfs.cmdline(ppid, self.proc) == argv

    def _name(self, pid: int) -> str:
        """The process name (comm): exec changes it, and it is a 16-byte read."""
        return (procfs.read_text(f"{self.proc}/{pid}/comm", 64) or "").rstrip("\n")
