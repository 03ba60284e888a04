"""Whether this machine lets the probe trace block I/O, and if not, why, in
words a user can act on. Standard library only (see probe.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Optional

from sparkscope.probes.privilege import why_untrusted

TRACEFS = Path("/sys/kernel/tracing")
BTF = Path("/sys/kernel/btf/vmlinux")
TRACEPOINTS = ("block/block_rq_issue", "block/block_rq_complete", "block/block_io_start")
# Capability bits (linux/capability.h): loading BPF and attaching to
# tracepoints needs CAP_BPF + CAP_PERFMON, or CAP_SYS_ADMIN on older kernels.
CAP_SYS_ADMIN, CAP_PERFMON, CAP_BPF = 21, 38, 39


def effective_capabilities(status: Path = Path("/proc/self/status")) -> int:
    for line in status.read_text().splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return 0


def may_load_bpf(caps: Optional[int] = None) -> bool:
    caps = effective_capabilities() if caps is None else caps
    has = lambda bit: bool(caps >> bit & 1)  # noqa: E731
    return has(CAP_SYS_ADMIN) or (has(CAP_BPF) and has(CAP_PERFMON))


def why_not_traceable(mount: bool = False) -> Optional[str]:
    """None when bpftrace can attach to the block tracepoints here, else why not.
    mount: mount tracefs at /sys/kernel/tracing when it is missing (needs root)."""
    if not Path("/proc/self/status").exists():
        return "not Linux: the probe uses eBPF on Linux block tracepoints"
    if not may_load_bpf():
        return ("no privilege to load eBPF programs: run as root, or grant CAP_BPF and CAP_PERFMON "
                "(e.g. setcap cap_bpf,cap_perfmon+ep on bpftrace); the disk panels from /proc/diskstats "
                "work without it")
    if shutil.which("bpftrace") is None:
        return "bpftrace is not installed: apt-get install bpftrace (Debian/Ubuntu) or dnf install bpftrace"
    untrusted = why_untrusted(Path(shutil.which("bpftrace")))
    if untrusted:
        return f"bpftrace at {shutil.which('bpftrace')} is not root's alone ({untrusted}): root will not run it"
    if not BTF.exists():
        return f"the kernel has no BTF ({BTF} missing): the probe needs a kernel built with CONFIG_DEBUG_INFO_BTF"
    if not (TRACEFS / "events").is_dir() and mount:
        subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACEFS)], capture_output=True)
    if not (TRACEFS / "events").is_dir():
        return (f"tracefs is not mounted at {TRACEFS}: mount -t tracefs nodev {TRACEFS} (as root), "
                "or in a container mount the host's /sys/kernel/tracing")
    missing = [tp for tp in TRACEPOINTS if not (TRACEFS / "events" / tp).is_dir()]
    if missing:
        return f"the kernel lacks the tracepoints {', '.join(missing)} (block_io_start needs Linux 6.5+)"
    return None
