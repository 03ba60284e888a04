"""The host probes: agents that run beside Spark, on its hosts, and post line
protocol to Telegraf's events listener. blockprobe/ (block I/O latency, eBPF)
and threadprobe/ (thread states and stacks from /proc), with what they share
(cli.py, procstat.py, privilege.py).

Standard library only, importing nothing of sparkscope but this package,
sparkscope.store and sparkscope.errors (tests/test_layers.py holds it): they
ship as container images that copy those three alone.
"""
