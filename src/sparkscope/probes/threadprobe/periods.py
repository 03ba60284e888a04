"""One report period of one JVM: what the samples saw, turned into line
protocol at the period's end.

Written per period (Telegraf adds the tag host):
- sparkscope_threads (tags applicationid, executorid, class = task | gc |
  jit | other): the average number of threads of that class in each state
  over the period's samples: running (R: on a CPU or in the run queue),
  disk (D: uninterruptible wait: a disk, a FUSE or NFS mount, a page fault),
  sleeping (S: a futex (lock, idle pool), a socket, a timer), other (stopped,
  exiting); threads (all of them); and, from the kernel's own accounting
  (schedstat, not sampled), on_cpu and cpu_wait: CPU-seconds run and
  seconds waited in the run queue per second, i.e. threads on a CPU and
  threads waiting for one, on average; samples. Task threads also have
  io, network, lock and other_wait: the off-CPU ones (disk + sleeping) by
  what their wait channel says they wait for (wait_kind).
- sparkscope_thread_waits (tags applicationid, executorid, state = disk |
  sleeping, wchan): for task threads off CPU, the TOP_WAITS kernel functions
  they waited in most, each with the average number of task threads
  waiting there. wchan is a kernel function name: a set fixed by the
  kernel (a few dozen for a JVM), not one that grows with the application.
  seconds: thread-seconds waited there in the period (threads x period).
- the off-CPU kernel stacks of task threads as one flame profile
  (sparkscope.store.profiles, kind "offcpu"), when the sampler may read them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence

from sparkscope.store import nested_set, profiles as store
from sparkscope.store.profiles import escape_tag
from sparkscope.store.schema import THREAD_WAITS_MEASUREMENT, THREADS_MEASUREMENT

CLASSES = ("task", "gc", "jit", "other")
STATE_FIELDS = ("running", "disk", "sleeping", "other")
TOP_WAITS = 5
THREADS = THREADS_MEASUREMENT
WAITS = THREAD_WAITS_MEASUREMENT
# Thread names as /proc shows them: the JVM's name cut to 15 characters.
TASK_PREFIX = "Executor task l"  # "Executor task launch worker for task 12.0 in stage 3.0"
GC_PREFIXES = ("GC Thread", "G1 ", "VM Thread", "ParGC", "Shenandoah", "ZWorker", "ZDirector", "ZDriver")
JIT_PREFIXES = ("C1 CompilerThre", "C2 CompilerThre", "JVMCI")
WAIT_KINDS = ("io", "network", "lock", "other_wait")
# Wait channels (kernel functions, Linux 5.x-6.x names) by what a task waits
# for. A FUSE request waits interruptibly (S, not D) in request_wait_answer,
# so the channel, not the state letter alone, tells I/O from a lock.
IO_CHANNELS = ("request_wait_answer", "fuse_", "nfs_", "rpc_wait_bit", "folio_wait", "wait_on_page", "io_schedule",
               "blk_", "rq_qos_wait", "bit_wait_io", "jbd2_", "ext4_", "xfs_", "btrfs_", "__lock_page", "filemap_",
               "wait_on_buffer", "__wait_on_buffer", "ovl_", "cifs_", "ceph_")
NETWORK_CHANNELS = ("sk_wait_data", "wait_woken", "inet_csk_accept", "tcp_", "unix_stream", "sock_", "ep_poll",
                    "do_epoll_wait", "do_sys_poll", "do_select", "core_sys_select")
LOCK_CHANNELS = ("futex_",)
STATE_FRAME = {"disk": "D: uninterruptible wait (disk, FUSE, NFS)", "sleeping": "S: sleeping (lock, socket, timer)"}


def wait_kind(state: str, wchan: str) -> str:
    """What an off-CPU task thread waits for: io (D, or a file system's wait
    channel), network (a socket: shuffle fetch, a Python worker's answer),
    lock (a futex: a Java lock, or an idle thread of the task pool), or
    other_wait (a timer, or a channel not known here)."""
    if state == "disk" or wchan.startswith(IO_CHANNELS):
        return "io"
    if wchan.startswith(NETWORK_CHANNELS):
        return "network"
    if wchan.startswith(LOCK_CHANNELS):
        return "lock"
    return "other_wait"


def thread_class(comm: str) -> str:
    if comm.startswith(TASK_PREFIX):
        return "task"
    if comm.startswith(GC_PREFIXES):
        return "gc"
    if comm.startswith(JIT_PREFIXES):
        return "jit"
    return "other"


@dataclass
class JvmPeriod:
    samples: int = 0
    states: Counter = field(default_factory=Counter)  # (class, state) -> threads seen, summed over samples
    threads: Counter = field(default_factory=Counter)  # class -> threads seen, summed over samples
    cpu_ns: Counter = field(default_factory=Counter)  # class -> ns on a CPU (schedstat)
    wait_ns: Counter = field(default_factory=Counter)  # class -> ns in the run queue (schedstat)
    waits: Counter = field(default_factory=Counter)  # (state, wchan) of off-CPU task threads -> samples
    kinds: Counter = field(default_factory=Counter)  # wait_kind of off-CPU task threads -> samples
    stacks: Counter = field(default_factory=Counter)  # kernel stack (state frame first) -> samples

    def add(self, cls: str, state: str) -> None:
        self.states[cls, state] += 1
        self.threads[cls] += 1


def lines(app_id: str, executor_id: str, period: JvmPeriod, end_ns: int, seconds: float,
          sample_interval_s: float) -> list[str]:
    if not period.samples:
        return []
    tags = f"applicationid={escape_tag(app_id)},executorid={escape_tag(executor_id)}"
    out = []
    for cls in CLASSES:
        fields = [f"{name}={period.states[cls, name] / period.samples}" for name in STATE_FIELDS]
        fields.append(f"threads={period.threads[cls] / period.samples}")
        fields.append(f"on_cpu={period.cpu_ns[cls] / 1e9 / seconds}")
        fields.append(f"cpu_wait={period.wait_ns[cls] / 1e9 / seconds}")
        if cls == "task":  # wait channels are read for task threads only
            fields += [f"{kind}={period.kinds[kind] / period.samples}" for kind in WAIT_KINDS]
        out.append(f"{THREADS},{tags},class={cls} {','.join(fields)},samples={period.samples}i {end_ns}")
    for (state, wchan), n in top_waits(period.waits):
        out.append(f"{WAITS},{tags},state={state},wchan={escape_tag(wchan)} threads={n / period.samples},"
                   f"seconds={n / period.samples * seconds} {end_ns}")
    if period.stacks:
        start_ms = (end_ns // 1_000_000) - int(seconds * 1000)
        # The profile's name shows whole seconds; its rows carry the exact time.
        profile = store.Profile(app_id, executor_id, "offcpu", start_ms, float(max(round(seconds), 1)))
        rows = nested_set.rows(period.stacks, f"exec {executor_id} task threads off CPU",
                               scale=int(sample_interval_s * 1e9))
        out += store.lines(profile, rows, sum(period.stacks.values()))
    return out


def top_waits(waits: Counter, n: int = TOP_WAITS) -> Sequence[tuple[tuple[str, str], int]]:
    return sorted(waits.items(), key=lambda item: (-item[1], item[0]))[:n]
