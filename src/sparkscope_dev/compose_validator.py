"""A docker compose that can check docker-compose.yml offline (`config -q`
needs no engine): the compose plugin, docker-compose, or Debian's package."""

from __future__ import annotations

import shutil
import subprocess

from sparkscope.provision import refuse_when_builds_are_off
from sparkscope.provision.apt import apt_install
from sparkscope.process import Progress


def ensure_compose_validator(progress: Progress = print) -> list[str]:
    for candidate in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(candidate[0]) is None:
            continue
        probe = subprocess.run(candidate + ["version"], capture_output=True)
        if probe.returncode == 0:
            return candidate
    refuse_when_builds_are_off("docker compose (to validate docker-compose.yml)")
    progress("installing Debian's docker-compose (to validate docker-compose.yml offline)")
    apt_install(["docker-compose"], progress)
    return ["docker-compose"]
