"""A fake `docker` (and `docker-compose`) for testing the compose backend on a
machine without a Docker engine.

Stricter than the real one: it accepts only the commands, flags and services
it knows and fails loudly on anything else, so a wrong argument in sparkscope
fails a test instead of passing. It records every call (argv and the
variables compose would read) in calls.jsonl, keeps its containers in
state.json, and answers in the real formats: `docker compose ps --format json`
prints one JSON object per line (compose v2.21+) or one JSON array (older v2);
compose v1 has no --format, so its containers are read with `docker inspect`.
A "container" is a fake_services.py process listening where compose would
publish the service; `stop` and `down` end it by its pid.

Use FakeDocker(tmp_path) from tests: it writes the wrapper scripts, and its
.path goes first on PATH.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
COMPOSE_ENV = ("GRAFANA_ADMIN_USER", "GRAFANA_ADMIN_PASSWORD", "SPARKSCOPE_HTTP_BIND", "GRAFANA_PORT",
               "INFLUXDB_PORT", "GRAPHITE_BIND", "GRAPHITE_PORT", "EVENTS_PORT", "SPARKSCOPE_DB",
               "SPARKSCOPE_RETENTION")


class FakeDocker:
    """The test side: configure, install on PATH, read calls, stop what it started."""

    def __init__(self, directory: Path, engine: bool = True, plugin: bool = True, ps_format: str = "lines",
                 fail_up: str = ""):
        self.dir = directory
        self.path = directory / "bin"
        self.path.mkdir(parents=True, exist_ok=True)
        self.configure(engine=engine, plugin=plugin, ps_format=ps_format, fail_up=fail_up)
        for name in ("docker", "docker-compose"):
            script = self.path / name
            script.write_text(f"#!/bin/sh\nexec {sys.executable} {HERE / 'fake_docker.py'} {directory} {name} \"$@\"\n")
            script.chmod(0o755)

    def configure(self, **config) -> None:
        (self.dir / "config.json").write_text(json.dumps(config))

    def calls(self) -> list[list[str]]:
        path = self.dir / "calls.jsonl"
        return [json.loads(line)["argv"] for line in path.read_text().splitlines()] if path.exists() else []

    def call_env(self) -> list[dict[str, str]]:
        path = self.dir / "calls.jsonl"
        return [json.loads(line)["env"] for line in path.read_text().splitlines()] if path.exists() else []

    def stop_all(self) -> None:
        """Stop every fake container still running, by the pid it recorded."""
        for container in _load(self.dir)["containers"].values():
            _stop(container)


# --- the fake executable ---------------------------------------------------------------

def _load(directory: Path) -> dict:
    path = directory / "state.json"
    return json.loads(path.read_text()) if path.exists() else {"containers": {}}


def _save(directory: Path, state: dict) -> None:
    (directory / "state.json").write_text(json.dumps(state))


def _stop(container: dict) -> None:
    pid = container.get("pid")
    if not pid:
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    for _ in range(50):
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    container["pid"] = None


def fail(message: str, code: int = 1) -> None:
    print(message, file=sys.stderr)
    sys.exit(code)


def compose_services(compose_file: Path) -> dict[str, str]:
    """service -> image, from the real docker-compose.yml: the services compose
    starts without --profile (a service with profiles is left out, as compose does)."""
    services = yaml.safe_load(compose_file.read_text())["services"]
    return {name: svc["image"] for name, svc in services.items() if not svc.get("profiles")}


def ps_object(service: str, image: str, container: dict) -> dict:
    running = container["state"] == "running"
    name = f"sparkscope-{service}-1"
    return {"Command": '"/entrypoint.sh"', "CreatedAt": "2026-11-23 15:00:00 +0000 UTC",
            "ExitCode": 0, "Health": "healthy" if running else "", "ID": container["id"], "Image": image,
            "Labels": f"com.docker.compose.project=sparkscope,com.docker.compose.service={service}",
            "LocalVolumes": "1", "Mounts": "", "Name": name, "Names": name, "Networks": "sparkscope_default",
            "Ports": "", "Project": "sparkscope", "Publishers": [], "RunningFor": "2 minutes ago",
            "Service": service, "Size": "0B", "State": "running" if running else "exited",
            "Status": "Up 2 minutes (healthy)" if running else "Exited (0) 3 seconds ago"}


def inspect_object(service: str, image: str, container: dict) -> dict:
    running = container["state"] == "running"
    state = {"Status": "running" if running else "exited", "Running": running, "Pid": container.get("pid") or 0}
    if running:
        state["Health"] = {"Status": "healthy", "FailingStreak": 0, "Log": []}
    return {"Id": container["id"], "Name": f"/sparkscope_{service}_1", "State": state,
            "Config": {"Image": image, "Labels": {"com.docker.compose.project": "sparkscope",
                                                  "com.docker.compose.service": service}}}


def compose(directory: Path, config: dict, args: list[str], v1: bool) -> None:
    if args == ["version"]:
        print("docker-compose version 1.29.2, build unknown" if v1 else "Docker Compose version v2.29.1")
        return
    if len(args) < 5 or args[0] != "--project-directory" or args[2] != "-f":
        fail(f"fake compose: expected --project-directory DIR -f FILE first, got {args[:4]}")
    project, compose_file = Path(args[1]), Path(args[3])
    if compose_file != project / "docker-compose.yml" or not compose_file.is_file():
        fail(f"fake compose: {compose_file} is not the project's docker-compose.yml")
    if not config["engine"]:
        fail("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?")
    if not os.environ.get("GRAFANA_ADMIN_PASSWORD"):
        fail('error while interpolating services.grafana.environment.GF_SECURITY_ADMIN_PASSWORD: required '
             'variable GRAFANA_ADMIN_PASSWORD is missing a value: set GRAFANA_ADMIN_PASSWORD in .env (see .env.example)')
    images = compose_services(compose_file)
    command, rest = args[4], args[5:]
    state = _load(directory)
    containers = state["containers"]

    def services_of(names: list[str]) -> list[str]:
        for name in names:
            if name.startswith("-"):
                fail(f"unknown flag: {name}")
            if name not in images:
                fail(f"no such service: {name}")
        return names or list(images)

    if command == "up":
        if not rest or rest[0] != "-d":
            fail("fake compose: up without -d would attach to the containers' logs")
        if config.get("fail_up"):
            fail(config["fail_up"])
        for service in services_of(rest[1:]):
            container = containers.setdefault(service, {"id": os.urandom(32).hex(), "state": "exited"})
            if container["state"] != "running":
                log = open(directory / f"{service}.log", "ab")
                # The container's image, so that it answers the version compose pins.
                proc = subprocess.Popen([sys.executable, str(HERE / "fake_services.py"), service],
                                        stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True,
                                        env={**os.environ, "FAKE_IMAGE": images[service]})
                container.update(state="running", pid=proc.pid)
                print(f" Container sparkscope-{service}-1  Started", file=sys.stderr)
    elif command == "stop":
        for service in services_of(rest):
            if service in containers:
                _stop(containers[service])
                containers[service]["state"] = "exited"
    elif command == "down":
        if rest:
            fail(f"fake compose: down takes no arguments here, got {rest} (-v would delete the data volumes)")
        for container in containers.values():
            _stop(container)
        containers.clear()
    elif command == "ps":
        if v1:
            if rest != ["-q"]:
                fail(f"docker-compose ps: only -q is expected, got {rest}")
            for container in containers.values():
                print(container["id"])
        else:
            if rest != ["--all", "--format", "json"]:
                fail(f"fake compose ps: expected --all --format json, got {rest}")
            objects = [ps_object(s, images[s], c) for s, c in containers.items()]
            if config["ps_format"] == "array":
                print(json.dumps(objects))
            else:
                for obj in objects:
                    print(json.dumps(obj))
    elif command == "logs":
        if len(rest) != 3 or rest[0] != "--tail" or not rest[1].isdigit():
            fail(f"fake compose logs: expected --tail N SERVICE, got {rest}")
        services_of(rest[2:])
        print(f"{rest[2]}-1  | fake log line")
    else:
        fail(f"fake compose: unknown command {command!r}")
    _save(directory, state)


def main(argv: list[str]) -> None:
    directory, program, args = Path(argv[1]), argv[2], argv[3:]
    config = json.loads((directory / "config.json").read_text())
    with open(directory / "calls.jsonl", "a") as calls:
        calls.write(json.dumps({"argv": [program, *args],
                                "env": {k: os.environ[k] for k in COMPOSE_ENV if k in os.environ}}) + "\n")
    if program == "docker-compose":
        if config["plugin"] and args != ["version"]:
            fail("fake: docker-compose (v1) used although the compose plugin answers")
        compose(directory, config, args, v1=True)
    elif args == ["info"]:
        if not config["engine"]:
            fail("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?")
        print("Server Version: 27.3.1")
    elif args[:1] == ["compose"]:
        if not config["plugin"]:
            fail("docker: 'compose' is not a docker command.\nSee 'docker --help'")
        compose(directory, config, args[1:], v1=False)
    elif args[:1] == ["inspect"] and len(args) > 1:
        state = _load(directory)
        by_id = {c["id"]: (s, c) for s, c in state["containers"].items()}
        images = compose_services(Path(__file__).resolve().parents[2] / "docker-compose.yml")
        missing = [i for i in args[1:] if i not in by_id]
        if missing:
            print("[]")
            fail(f"Error: No such object: {missing[0]}")
        print(json.dumps([inspect_object(by_id[i][0], images[by_id[i][0]], by_id[i][1]) for i in args[1:]]))
    else:
        fail(f"fake docker: unexpected command {args}", 125)


if __name__ == "__main__":
    main(sys.argv)
