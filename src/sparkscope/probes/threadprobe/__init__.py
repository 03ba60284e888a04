"""The thread sampler: states, wait channels and off-CPU kernel stacks of
every Spark JVM thread on this host, read from /proc a few times a second,
and py-spy profiles of the PySpark workers; sent to Telegraf's events
listener. Standard library only (the compose image has python3 alone)."""
