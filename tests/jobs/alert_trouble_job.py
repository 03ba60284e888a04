"""Every problem sparkscope's alert rules look for that Spark can cause here,
in one local-cluster run (tests/test_alerts.py). Executor 1 runs inside a
memory cgroup with a limit (the java wrapper of tests/test_containers.py);
HeapHog (tests/jobs/java/HeapHog.java) is on the classpath.

1. straggler: one stage whose partition 0 sleeps 4.5 s and the others 0.3 s;
2. for HOLD_S seconds at once:
   - executor 0 fills its heap as far as its collector lets it and keeps
     the collector busy;
   - a Python worker of executor 1 holds the container's working set at
     about 93 % of its limit;
3. a Python worker of executor 1 allocates past the limit: the kernel's OOM
   killer kills it, the executor lives on and the task is retried;
4. executor 1's heap grows past the limit: the kernel kills the JVM (exit
   137) and Spark replaces the executor.

Prints APP_ID and `MARK <phase> <json>` with each phase's start and end (ms)
and what the tasks said."""

import json
import os
import sys
import threading
import time

from pyspark.sql import SparkSession
from pyspark.sql.types import StringType

HOLD_S = int(sys.argv[1]) if len(sys.argv) > 1 else 30
SHARE = 0.93  # the container's working set; the heap is filled as far as it goes (0.97)
CHUNK = 8 << 20

spark = SparkSession.builder.appName("sparkscope-test-alert-trouble").getOrCreate()
sc = spark.sparkContext
print("APP_ID", sc.applicationId, flush=True)
spark.udf.registerJavaFunction("heap_hog", "HeapHog", StringType())


def now_ms():
    return int(time.time() * 1000)


def mark(phase, started, **facts):
    print("MARK", phase, json.dumps({"start": started, "end": now_ms(), **facts}), flush=True)


def wait_executors(n, deadline_s=60):
    end = time.time() + deadline_s
    while time.time() < end and sc._jsc.sc().getExecutorMemoryStatus().size() < n + 1:
        time.sleep(0.2)


def executor_id():
    return os.path.basename(os.getcwd())  # Spark's worker runs each executor in work/<app>/<id>


def memory_cgroup():
    for line in open("/proc/self/cgroup"):
        _, controllers, path = line.rstrip("\n").split(":", 2)
        if "memory" in controllers.split(","):
            return "/sys/fs/cgroup/memory" + path
    raise RuntimeError("no memory cgroup")


def working_set_and_limit(cgroup):
    """As ContainerMemoryPlugin reads cgroup v1: usage minus inactive file cache, and the limit."""
    usage = int(open(cgroup + "/memory.usage_in_bytes").read())
    stat = dict(line.split() for line in open(cgroup + "/memory.stat"))
    return usage - int(stat.get("total_inactive_file", 0)), int(open(cgroup + "/memory.limit_in_bytes").read())


def first_time(name):
    """True once per executor (a marker in its work dir): retried tasks do nothing."""
    marker = os.path.join(os.getcwd(), f"alert-trouble-{name}")
    if os.path.exists(marker):
        return False
    open(marker, "w").close()
    return True


def hold_container(index, rows):
    if executor_id() != "1" or not first_time("hold"):
        yield (executor_id(), 0)
        return
    cgroup, held = memory_cgroup(), []
    end = time.time() + HOLD_S
    while time.time() < end:
        ws, limit = working_set_and_limit(cgroup)
        if ws < SHARE * limit - CHUNK:
            held.append(b"\x01" * CHUNK)  # written, so resident
        elif ws > (SHARE + 0.03) * limit and held:
            held.pop()
        else:
            time.sleep(0.2)
    yield (executor_id(), sum(len(h) for h in held))


def past_the_limit(index, rows):
    if executor_id() == "1":
        if first_time("oom"):
            _, limit = working_set_and_limit(memory_cgroup())
            held = b"\x01" * int(limit * 1.2)  # the kernel kills this worker on the way
            yield (executor_id(), len(held))
            return
        yield (executor_id(), -1)  # tried before: killed
        return
    yield (executor_id(), 0)


def until(done, action, tries=4):
    """Run a job again until a task landed where it should (Spark places tasks where a slot is free)."""
    for _ in range(tries):
        out = action()
        if done(out):
            return out
    return out


def executors_alive():
    ids = sc._jsc.sc().getExecutorIds()  # a Scala Seq
    return {str(i) for i in sc._jvm.scala.collection.JavaConverters.seqAsJavaList(ids)}


wait_executors(2)
time.sleep(2)  # a few samples of every JVM before anything happens

started = now_ms()
sc.setJobDescription("a straggler stage")


def slow_first(index, rows):
    time.sleep(4.5 if index == 0 else 0.3)
    yield sum(1 for _ in rows)


sc.parallelize(range(80), 8).mapPartitionsWithIndex(slow_first).collect()
mark("straggler", started)

started = now_ms()
said = {}


def heap():
    sc.setJobDescription("executor 0 holds its heap")
    said["heap"] = until(lambda out: any(r.startswith("0:") and "MiB" in r for r in out),
                         lambda: [r[0] for r in spark.range(0, 2, 1, 2)
                                  .selectExpr(f"heap_hog('0', 0.95D, {HOLD_S})").collect()])


def container():
    sc.setJobDescription("executor 1's container near its limit")
    said["container"] = until(lambda out: any(e == "1" and held > 0 for e, held in out),
                              lambda: sc.parallelize(range(2), 2).mapPartitionsWithIndex(hold_container).collect())


threads = [threading.Thread(target=heap), threading.Thread(target=container)]
threads[0].start()
time.sleep(0.5)  # the heap job takes executor 0 first; executor 1 is then free for the container
threads[1].start()
for t in threads:
    t.join()
mark("hold", started, **said)

started = now_ms()
sc.setJobDescription("a Python worker past the container's limit")


def python_past_the_limit():
    try:
        return sc.parallelize(range(2), 2).mapPartitionsWithIndex(past_the_limit).collect()
    except Exception as err:  # noqa: BLE001 - a retry that failed too is still a kill
        return [("error", str(err)[:200])]


oom = until(lambda out: any(e == "1" and n == -1 for e, n in out), python_past_the_limit)
time.sleep(3)  # the container's oom_kill count is sampled
mark("oom_kill", started, said=oom)

started = now_ms()
sc.setJobDescription("executor 1's heap past the container's limit")
lost = until(lambda _: "1" not in executors_alive(),
             lambda: [r[0] for r in spark.range(0, 2, 1, 2).selectExpr("heap_hog('1', 0.95D, 20)").collect()])
mark("executor_lost", started, said=lost, alive=sorted(executors_alive()))
time.sleep(3)  # the last reports leave every JVM
spark.stop()
