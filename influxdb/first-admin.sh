#!/bin/sh
# InfluxDB's first admin, before anyone else can reach it (compose's and the
# chart's influxdb container: their entrypoint, ahead of the image's own).
#
# A fresh InfluxDB with authentication on and no users takes an anonymous
# CREATE USER ... WITH ALL PRIVILEGES from whoever comes first: until setup
# ran, anyone reaching the published port could make themselves admin. So on
# a data directory without meta.db, InfluxDB is first started with its HTTP
# API on the container's own loopback only (the published port forwards to
# the container's network address, where nothing listens then), the admin is
# created there, and InfluxDB is stopped; then the image's command runs as
# usual, already with its admin. The password goes to curl on stdin, never in
# argv, and is not passed on to the final InfluxDB.
#
#   first-admin.sh COMMAND...    (COMMAND: the image's, e.g. /entrypoint.sh influxd)
#
# SPARKSCOPE_FIRST_ADMIN_USER, SPARKSCOPE_FIRST_ADMIN_PASSWORD: the admin.
# INFLUXDB_META_DIR: where meta.db lives (the image's default below).
# SPARKSCOPE_FIRST_START_ADDRESS: the first start's HTTP address (loopback).
set -eu

meta="${INFLUXDB_META_DIR:-/var/lib/influxdb/meta}"
address="${SPARKSCOPE_FIRST_START_ADDRESS:-127.0.0.1:8086}"
user="${SPARKSCOPE_FIRST_ADMIN_USER:-sparkscope_admin}"
password="${SPARKSCOPE_FIRST_ADMIN_PASSWORD:-}"
unset SPARKSCOPE_FIRST_ADMIN_PASSWORD

fail() { echo "first-admin: $*" >&2; exit 1; }

if [ ! -e "$meta/meta.db" ]; then
  [ -n "$password" ] || fail "SPARKSCOPE_FIRST_ADMIN_PASSWORD is empty: set INFLUXDB_ADMIN_PASSWORD in .env (./sparkscope up writes one)"
  # A password that could end the InfluxQL string is refused by sparkscope's
  # settings; refuse it here too rather than build a statement from it.
  case "$password$user" in *"'"*|*'\'*|*'"'*) fail "the admin's name or password holds a quote or backslash" ;; esac
  echo "first-admin: a new InfluxDB: creating its admin on $address before it serves anyone else" >&2
  INFLUXDB_HTTP_BIND_ADDRESS="$address" INFLUXDB_HTTP_UNIX_SOCKET_ENABLED=false "$@" &
  first=$!
  tries=0
  until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$address/ping" || true)" = 204 ]; do
    kill -0 "$first" 2>/dev/null || fail "InfluxDB exited during its first start"
    tries=$((tries + 1))
    [ "$tries" -lt 600 ] || { kill "$first"; fail "InfluxDB did not answer on $address within 60 s"; }
    sleep 0.1
  done
  answer=$(printf "CREATE USER \"%s\" WITH PASSWORD '%s' WITH ALL PRIVILEGES" "$user" "$password" |
    curl -s -w ' %{http_code}' --data-urlencode q@- "http://$address/query") || true
  kill "$first"
  wait "$first" || true
  case "$answer" in *'"error"'*) fail "creating the admin failed: $answer" ;; *" 200") ;; *) fail "creating the admin failed: $answer" ;; esac
  echo "first-admin: admin $user created; starting InfluxDB" >&2
fi
exec "$@"
