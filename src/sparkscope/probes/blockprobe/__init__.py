"""Block I/O latency per device, traced with eBPF (bpftrace): histograms,
percentiles and outliers, sent to Telegraf. Optional; needs root or CAP_BPF."""
