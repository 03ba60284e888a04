"""Thread states of Spark JVMs on this host, sampled from /proc and sent to Telegraf."""
from sparkscope.probes.threadprobe.sampler import main

raise SystemExit(main())
