"""Garbage on the Graphite port never takes Telegraf down or loses good lines."""

from __future__ import annotations

import socket
import time

from sparkscope.stack import tcp_open
from sparkscope.stack.native import PidFile


def test_garbage_and_half_lines_leave_telegraf_up_and_good_lines_stored(stack):
    now = int(time.time())
    good = [f"spark.app-20991231235959-0900.{i}.executor.threadpool.activeTasks {i} {now}\n" for i in range(4)]
    bad = [
        "this is not graphite\n",
        "spark.app-20991231235959-0900.9.executor.threadpool.activeTasks\n",  # no value
        "spark.app-20991231235959-0900.9.executor.threadpool.activeTasks notanumber 1\n",
        "spark.app-20991231235959-0900.9.executor.threadpool.activeTasks 1 notatime\n",
        "spark.app-20991231235959-0900.9.executor.threadpool.activeTasks NaN " + str(now) + "\n",
        "\x00\xff\xfe binary \n",
        "x" * 70000 + " 1 " + str(now) + "\n",
        "\n\n   \n",
    ]
    # good and bad interleaved on one connection, then a connection cut mid-line
    stack.send_graphite("".join(b + g for b, g in zip(bad, good + good)).encode("utf-8", "surrogateescape"))
    with socket.create_connection((stack.settings.graphite_host, stack.settings.graphite_port), 5) as s:
        s.sendall(b"spark.app-20991231235959-0900.8.executor.threadpool.act")
    stack.send_graphite(f"spark.app-20991231235959-0900.5.executor.threadpool.activeTasks 5 {now}\n")

    series = stack.wait_for(
        "SELECT \"value\" FROM \"threadpool.activeTasks\" WHERE \"applicationid\" = "
        "'app-20991231235959-0900' GROUP BY \"executorid\"",
        lambda s: {x["tags"]["executorid"] for x in s} >= {"0", "1", "2", "3", "5"},
    )
    stored = {x["tags"]["executorid"]: x["values"][0][1] for x in series}
    assert stored == {"0": 0, "1": 1, "2": 2, "3": 3, "5": 5}  # nothing from the bad lines
    assert PidFile(stack.settings.state_dir, "telegraf").running_pid() is not None
    assert tcp_open(stack.settings.graphite_host, stack.settings.graphite_port)
