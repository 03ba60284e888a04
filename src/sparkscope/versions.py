"""Every version sparkscope pins, in one place.

The native runner builds these, docker-compose.yml and the Helm chart pin the
same images, the README and docs/upgrading.md name them, and the test suite
runs the Spark versions here. tests/test_versions.py fails when any of those
says another version: change one here, then the files it names.

Nothing floats: `influxdb:latest` has been InfluxDB 3 since May 2026, and a
floating Grafana tag would change the UI under users' feet.
"""

from __future__ import annotations

# InfluxDB OSS 1.x: the newest patch with an official image (`influxdb:1.13.1`,
# influxdata/influxdata-docker#917) and a Go module the native runner builds.
# 1.9 and later need cgo and Rust for Flux's libflux (provision/go.py).
INFLUXDB = "1.13.1"
# The InfluxDB the upgrade test writes a data directory with: what sparkscope
# pinned until November 2026, so what users upgrade from.
INFLUXDB_PREVIOUS = "1.8.10"
# InfluxData's pkg-config, which answers `pkg-config --cflags --libs flux` for
# cgo by building libflux with cargo (InfluxDB's own CONTRIBUTING.md way).
INFLUX_PKG_CONFIG = "0.3.0"
# The oldest rustc libflux builds with (flux v0.200.0's Cargo `rust-version`).
RUST_FOR_FLUX = (1, 83)

# Telegraf: the newest 1.37 patch. 1.38 and later (1.40.1 is served) refuse
# telegraf.conf as it is: their strict environment-variable handling rejects an
# unquoted ${VAR} where a number goes (metric_buffer_limit ...), and 1.40 needs
# Go 1.27; moving needs the config reworked and every Telegraf test run again.
TELEGRAF = "1.37.3"

# Thanos (Apache-2.0), the metrics store for more than one machine can hold
# (SPARKSCOPE_METRICS_STORE=thanos, docs/scale.md): Receive, Query, built from
# its module source. Its go.mod asks for Go 1.26.10 or newer and has replace
# directives, so it is built inside a writable copy of the module with the Go
# toolchain below, which the go command fetches from the module proxy.
THANOS = "0.42.5"
THANOS_GO = "1.27.3"

# Grafana: users run it (never built here). Compose and the chart pin the
# newest 13.x patch confirmed (13.2.2, 2026-09-15; never 13.0.0, a pulled tag);
# 12.4 (the last 12.x, supported until 2027-05-24) is the other line the
# dashboards are checked against and the native runner accepts. docs/grafana.md
# says where each number was confirmed.
GRAFANA = "13.2.2"
GRAFANA_12 = "12.4.11"

# Spark: pyproject.toml's pyspark, and the Spark 4 the same jar is tried on.
SPARK = "3.5.9"
SPARK_4 = "4.3.0"

# The chart's test tools (built with Go, cached by version).
HELM = "3.22.0"
KUBECONFORM = "0.8.0"
