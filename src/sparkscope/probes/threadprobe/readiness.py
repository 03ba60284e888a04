"""What this process may read, and if not, why, in words a user can act on.
Thread states (/proc/<pid>/task/<tid>/stat) are readable by anyone; the
extras are not."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Optional

from sparkscope.probes.privilege import why_untrusted

CAP_SYS_PTRACE = 19


def why_no_kernel_stacks(probe: str = "/proc/self/stack") -> Optional[str]:
    """None when kernel stacks can be read here. The kernel lets only
    CAP_SYS_ADMIN read /proc/<pid>/stack, its own included, so reading our
    own is the test."""
    try:
        with open(probe, "rb") as f:
            f.read(64)
        return None
    except PermissionError:
        return ("reading /proc/<pid>/task/<tid>/stack needs root (CAP_SYS_ADMIN): run ./sparkscope up as root, "
                "or the compose service threadprobe (privileged); thread states and wait channels are sampled "
                "all the same")
    except OSError as err:
        return f"this kernel has no /proc/<pid>/stack ({err.strerror}: CONFIG_STACKTRACE is off)"


def effective_capabilities(status: str = "/proc/self/status") -> int:
    try:
        for line in Path(status).read_text().splitlines():
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    except (OSError, ValueError, IndexError):
        pass
    return 0


def py_spy_path() -> Optional[str]:
    """py-spy from the project's environment (pyproject installs it beside
    this Python), else from PATH."""
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.is_file() else shutil.which("py-spy")


def why_no_py_spy() -> Optional[str]:
    """None when py-spy is here and may attach to other processes (ptrace)."""
    if py_spy_path() is None:
        return ("py-spy is not installed: ./sparkscope installs it in .venv (pip install 'py-spy>=0.4,<0.5' "
                "for another Python)")
    untrusted = why_untrusted(Path(py_spy_path()))
    if untrusted:
        return f"py-spy at {py_spy_path()} is not root's alone ({untrusted}): root will not run it"
    scope = Path("/proc/sys/kernel/yama/ptrace_scope")
    try:
        level = int(scope.read_text())
    except (OSError, ValueError):
        level = 0
    has_ptrace = bool(effective_capabilities() >> CAP_SYS_PTRACE & 1)
    if level >= 3:
        return "ptrace is disabled on this host (kernel.yama.ptrace_scope=3): py-spy cannot attach"
    if not has_ptrace and level >= 1:
        return (f"py-spy needs ptrace on the PySpark workers: run as root or grant CAP_SYS_PTRACE "
                f"(kernel.yama.ptrace_scope={level}); in a container add cap_add: SYS_PTRACE")
    return None
