"""The compose backend: the stack as docker compose runs it (docker-compose.yml).

Works with the compose plugin (`docker compose`, v2) or the standalone
`docker-compose` (v1), whichever answers. Ports, binds and credentials go to
compose from the same settings the native runner uses, so both publish the
same addresses. Health is checked the same way as natively (the published
ports answer); compose's own view (`ps`) says which containers run.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any, Optional

from sparkscope.process import Progress
from sparkscope.stack import SERVICE_NAMES, Backend, StackError
from sparkscope.settings import Settings

TIMEOUT_S = 300.0  # pulling the images on a first up takes a while


def compose_command() -> list[str]:
    """`docker compose` (v2) when the plugin answers, else `docker-compose` (v1)."""
    for candidate in (["docker", "compose"], ["docker-compose"]):
        try:
            if subprocess.run([*candidate, "version"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=30).returncode == 0:
                return candidate
        except (OSError, subprocess.TimeoutExpired):
            continue
    raise StackError("neither `docker compose` nor `docker-compose` answers: install the compose plugin "
                     "(or docker-compose), or run the stack natively: ./sparkscope up --backend native")


def compose_env(settings: Settings) -> dict[str, str]:
    """The variables docker-compose.yml reads, from the one place settings come from."""
    user, password = settings.events_credentials or ("", "")
    # What the events listener asks for: empty when it asks for nothing (EVENTS_AUTH).
    return {**settings.as_env(), "EVENTS_LISTENER_USER": user, "EVENTS_LISTENER_PASSWORD": password}


def parse_ps_json(text: str) -> list[dict[str, Any]]:
    """`docker compose ps --format json`: one JSON object per line (v2.21+) or
    one JSON array (older v2)."""
    text = text.strip()
    if not text:
        return []
    if text.startswith("["):
        return json.loads(text)
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def containers_from_inspect(text: str) -> list[dict[str, Any]]:
    """`docker inspect` of compose v1's containers, in the fields of v2's ps."""
    out = []
    for c in json.loads(text or "[]"):
        state = c.get("State") or {}
        out.append({"Service": (c.get("Config") or {}).get("Labels", {}).get("com.docker.compose.service", ""),
                    "Name": c.get("Name", "").lstrip("/"), "State": state.get("Status", ""),
                    "Health": (state.get("Health") or {}).get("Status", ""),
                    "Image": (c.get("Config") or {}).get("Image", "")})
    return out


class ComposeBackend(Backend):
    name = "compose"
    starts_together = True  # compose orders them by depends_on

    def __init__(self, settings: Settings):
        super().__init__(settings)
        self._command: Optional[list[str]] = None

    @property
    def command(self) -> list[str]:
        if self._command is None:
            self._command = compose_command()
        return self._command

    def _run(self, *args: str, capture: bool = False) -> subprocess.CompletedProcess:
        root = self.settings.root
        argv = [*self.command, "--project-directory", str(root), "-f", str(root / "docker-compose.yml"), *args]
        try:
            result = subprocess.run(argv, env={**os.environ, **compose_env(self.settings)}, text=True,
                                    stdout=subprocess.PIPE if capture else None,
                                    stderr=subprocess.PIPE if capture else None, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise StackError(f"{' '.join(self.command)} {args[0]} did not finish within {TIMEOUT_S:.0f} s; "
                             "is the Docker engine busy? (docker info)") from None
        if result.returncode != 0:
            said = f": {result.stderr.strip()[-500:]}" if capture and result.stderr else " (see its messages above)"
            raise StackError(f"{' '.join(self.command)} {' '.join(args)} exited {result.returncode}{said}; "
                             "fix that, or run the stack natively: ./sparkscope up --backend native")
        return result

    def containers(self) -> list[dict[str, Any]]:
        if self.command == ["docker-compose"]:  # v1 has no ps --format
            ids = self._run("ps", "-q", capture=True).stdout.split()
            if not ids:
                return []
            inspected = subprocess.run(["docker", "inspect", *ids], capture_output=True, text=True, timeout=60)
            return containers_from_inspect(inspected.stdout) if inspected.returncode == 0 else []
        return parse_ps_json(self._run("ps", "--all", "--format", "json", capture=True).stdout)

    def processes(self) -> dict[str, Optional[str]]:
        running = {c.get("Service"): c for c in self.containers() if c.get("State") == "running"}
        return {name: f"container {running[name]['Name']}" if name in running else None for name in SERVICE_NAMES}

    def versions(self) -> dict[str, str]:
        # The image tag: what the container runs (influxdb:1.13.1 -> 1.13.1).
        return {c["Service"]: c.get("Image", "").rpartition(":")[2] or "-" for c in self.containers()
                if c.get("Service") in SERVICE_NAMES}

    def log_hint(self, name: str) -> str:
        return f"logs: {' '.join(self.command)} logs {name}"

    def log_excerpt(self, name: str) -> str:
        try:
            tail = self._run("logs", "--tail", "15", name, capture=True).stdout
        except StackError:
            return self.log_hint(name)
        return f"last log lines ({self.log_hint(name)}):\n" + "\n".join("    " + l for l in tail.splitlines())

    def recent_log(self, name: str, seconds: float) -> list[str]:
        try:
            return self._run("logs", "--since", f"{int(seconds) + 1}s", name, capture=True).stdout.splitlines()
        except StackError:
            return []

    def _start(self, names: tuple[str, ...], progress: Progress) -> dict[str, str]:
        progress(f"stack: {' '.join(self.command)} up -d {' '.join(names)} (the first run pulls the images)")
        self._run("up", "-d", *names)
        return {name: label or "" for name, label in self.processes().items() if name in names}

    def _stop(self, names: tuple[str, ...], progress: Progress, everything: bool = False) -> None:
        if everything:
            self._run("down")  # the containers and network go; the data volumes stay
        elif names:
            self._run("stop", *names)
