#!/bin/sh
# Run once by the official influxdb:1.8 image on an empty data volume
# (/docker-entrypoint-initdb.d). The native runner sends the same
# statements over HTTP (src/sparkscope/influx.py: database_statements).
set -e
db="${SPARKSCOPE_DB:-spark}"
retention="${SPARKSCOPE_RETENTION:-30d}"
influx -execute "CREATE DATABASE \"$db\" WITH DURATION $retention REPLICATION 1 NAME \"sparkscope\""
