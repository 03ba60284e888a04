"""A Grafana the user installed, for the native backend.

sparkscope never builds Grafana: natively it starts the user's own
installation with the provisioning files of grafana/ and dashboards/, as the
compose image mounts them. Where it looks, first hit wins:

1. GRAFANA_HOME (.env or the environment): a Grafana home directory, as
   unpacked from Grafana's tarball (bin/grafana, conf/defaults.ini);
2. `grafana` or `grafana-server` on PATH: Grafana's .deb/.rpm packages put
   them in /usr/sbin with the home in /usr/share/grafana; Homebrew and the
   tarball put them in <home>/bin or <prefix>/bin with <prefix>/share/grafana.

A home is a directory holding conf/defaults.ini: Grafana refuses to start
without it, so it is the test of a real installation.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from sparkscope.errors import SparkscopeError

BINARIES = ("grafana", "grafana-server")
HOW_TO_GET = ("Grafana is not installed here. Install it from Grafana's own packages "
              "(https://grafana.com/docs/grafana/latest/setup-grafana/installation/: apt, yum, brew or the "
              "tarball) and run ./sparkscope up again (set GRAFANA_HOME in .env if it is not on PATH), or run "
              "the whole stack with Docker: ./sparkscope up --backend compose. An existing Grafana elsewhere "
              "can read this stack too: docs/stack.md, \"Your own Grafana\".")


class GrafanaNotFound(SparkscopeError):
    """GRAFANA_HOME points at no Grafana; the message says what is missing."""


@dataclass(frozen=True)
class LocalGrafana:
    binary: Path
    home: Path

    def argv(self, config: Path) -> list[str]:
        """The server command: `grafana server` (Grafana 9.x and later; 13 has no grafana-server), or
        the older `grafana-server` when that is all the installation has."""
        head = [str(self.binary)] + (["server"] if self.binary.name == "grafana" else [])
        return head + ["--homepath", str(self.home), "--config", str(config.absolute())]


def is_home(path: Path) -> bool:
    return (path / "conf" / "defaults.ini").is_file()


def _binary_in(directory: Path) -> Optional[Path]:
    for name in BINARIES:
        if (directory / name).is_file():
            return directory / name
    return None


def _home_of(binary: Path) -> Optional[Path]:
    """The home of a Grafana binary found on PATH: its bin/'s parent
    (tarball), or <prefix>/share/grafana (packages, Homebrew)."""
    for candidate in (binary.parent.parent, binary.parent.parent / "share" / "grafana",
                      Path("/usr/share/grafana")):
        if is_home(candidate):
            return candidate
    return None


def find_grafana(grafana_home: str = "", path: Optional[str] = None) -> Optional[LocalGrafana]:
    """The user's Grafana, or None when there is none. A GRAFANA_HOME that is
    set but holds no Grafana is an error, not a silent fallback to PATH."""
    if grafana_home:
        home = Path(grafana_home).expanduser()
        binary = _binary_in(home / "bin")
        if not is_home(home) or binary is None:
            raise GrafanaNotFound(f"GRAFANA_HOME={grafana_home} is not a Grafana home directory (it needs "
                                  "bin/grafana and conf/defaults.ini, as Grafana's tarball unpacks): fix it in "
                                  ".env, or remove it to use the grafana on PATH")
        return LocalGrafana(binary, home)
    for name in BINARIES:
        found = shutil.which(name, path=path)
        if found:
            binary = Path(found).resolve()
            home = _home_of(binary)
            if home is not None:
                # Run the binary of the home found: /usr/sbin/grafana-server is a wrapper on some systems.
                return LocalGrafana(_binary_in(home / "bin") or binary, home)
    return None


def is_installed(grafana_home: str = "") -> bool:
    """Whether a Grafana would be found; a GRAFANA_HOME holding none counts as not installed."""
    try:
        return find_grafana(grafana_home) is not None
    except GrafanaNotFound:
        return False
