"""Flame graphs stored in InfluxDB in the nested-set form Grafana's flame graph
panel reads (level, value, self, label, one row per frame in depth-first
order), written by every profiler sparkscope runs: the JVM profiler plugin
(async-profiler in the executors), the thread sampler's kernel stacks and
py-spy for Python workers. Rendered again as a standalone HTML page by
`./sparkscope profile`."""
