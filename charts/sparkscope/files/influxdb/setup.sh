#!/bin/sh
# InfluxDB's users and database for `docker compose up` (the influxdb-setup
# service runs it on every start; it changes only what differs). The native
# runner does the same from Python (src/sparkscope/store/influx.py,
# ensure_users); tests/test_auth.py runs both against a real InfluxDB and
# compares what they leave.
#
# Authentication is on (influxdb.conf). On a server without users (new, or one
# that ran without authentication before: its data stay) InfluxDB lets the
# first admin be created without credentials; after that everything goes as
# that admin. Passwords come from the environment (.env), travel to curl on
# stdin (never in its argv, which `ps` shows) and are never printed.
set -eu

url="${INFLUX_URL:-http://influxdb:8086}"
db="${SPARKSCOPE_DB:-spark}"
retention="${SPARKSCOPE_RETENTION:-30d}"
admin="${INFLUXDB_ADMIN_USER:-sparkscope_admin}"
writer="${INFLUXDB_WRITE_USER:-sparkscope_writer}"
reader="${INFLUXDB_READ_USER:-sparkscope_reader}"
out="$(mktemp)"
qfile="$(mktemp)"  # mode 0600: statements carry passwords, kept out of curl's argv
trap 'rm -f "$out" "$qfile"' EXIT

fail() { echo "influxdb-setup: $*" >&2; exit 1; }

# Names and passwords go into InfluxQL and curl's config as they are: the
# same characters the CLI accepts (settings.py), nothing that could quote out.
for name in "$db" "$admin" "$writer" "$reader"; do
  case "$name" in ''|*[!A-Za-z0-9_-]*) fail "$name: use letters, digits, '_' or '-'" ;; esac
done
for key in INFLUXDB_ADMIN_PASSWORD INFLUXDB_WRITE_PASSWORD INFLUXDB_READ_PASSWORD; do
  eval "value=\${$key:-}"
  case "$value" in
    ''|*[!A-Za-z0-9._~-]*) fail "$key: set it in .env, at least 12 of A-Z a-z 0-9 . _ ~ - (./sparkscope up writes one)" ;;
  esac
  [ "${#value}" -ge 12 ] || fail "$key: at least 12 characters"
done
case "$retention" in ''|*[!0-9A-Za-z]*) fail "SPARKSCOPE_RETENTION=$retention: an InfluxQL duration (30d, 52w, INF)" ;; esac

# q AS STATEMENT: run one statement as AS (admin | none); 0 when InfluxDB took it.
q() {
  if [ "$1" = admin ]; then
    printf 'user = "%s:%s"\n' "$admin" "$INFLUXDB_ADMIN_PASSWORD"
  fi | {
    printf '%s' "$2" > "$qfile"
    code="$(curl -sS -K - -o "$out" -w '%{http_code}' "$url/query" --data-urlencode "q@$qfile")" || return 1
    [ "$code" = 200 ] && ! grep -q '"error"' "$out"
  }
}

tries=0
until curl -sf -o /dev/null "$url/ping"; do
  tries=$((tries + 1))
  [ "$tries" -lt 60 ] || fail "InfluxDB does not answer at $url/ping after 60 s"
  sleep 1
done

# InfluxDB 1.12+ refuses writes dated more than 10 min ahead or older than the
# policy keeps (FUTURE/PAST LIMIT; influx.write_limits): a point dated years ahead
# would make a shard that outlives the retention. Older servers know no such clause.
version="$(curl -sI "$url/ping" | tr -d '\r' | sed -n 's/^[Xx]-[Ii]nfluxdb-[Vv]ersion: *v\{0,1\}//p')"
limits() {
  case "$version" in 1.1[2-9].*|1.[2-9][0-9].*) ;; *) return 0 ;; esac
  printf ' FUTURE LIMIT 10m'
  [ "$1" = INF ] || printf ' PAST LIMIT %s' "$1"
}

if q admin "SHOW USERS"; then
  :
elif q none "CREATE USER \"$admin\" WITH PASSWORD '$INFLUXDB_ADMIN_PASSWORD' WITH ALL PRIVILEGES"; then
  echo "influxdb-setup: created admin user $admin"
  q admin "SHOW USERS" || fail "the new admin $admin is refused: $(cat "$out")"
else
  fail "InfluxDB has users, but refuses $admin with INFLUXDB_ADMIN_PASSWORD from .env: $(cat "$out")"
fi
users="$(cat "$out")"

if ! q admin "CREATE DATABASE \"$db\" WITH DURATION $retention REPLICATION 1$(limits "$retention") NAME \"sparkscope\""; then
  grep -q conflict "$out" || fail "CREATE DATABASE $db: $(cat "$out")"
  q admin "ALTER RETENTION POLICY \"sparkscope\" ON \"$db\" DURATION $retention DEFAULT$(limits "$retention")" \
    || fail "ALTER RETENTION POLICY on $db: $(cat "$out")"
fi

for pair in "$writer:WRITE:INFLUXDB_WRITE_PASSWORD" "$reader:READ:INFLUXDB_READ_PASSWORD"; do
  user="${pair%%:*}"; rest="${pair#*:}"; privilege="${rest%%:*}"; key="${rest#*:}"
  eval "password=\$$key"
  if printf '%s' "$users" | grep -q "\[\"$user\","; then
    q admin "SET PASSWORD FOR \"$user\" = '$password'" || fail "SET PASSWORD FOR $user: $(cat "$out")"
  else
    q admin "CREATE USER \"$user\" WITH PASSWORD '$password'" || fail "CREATE USER $user: $(cat "$out")"
    echo "influxdb-setup: created $user ($privilege on $db)"
  fi
  q admin "REVOKE ALL PRIVILEGES ON \"$db\" FROM \"$user\"" || fail "REVOKE on $user: $(cat "$out")"
  q admin "GRANT $privilege ON \"$db\" TO \"$user\"" || fail "GRANT $privilege to $user: $(cat "$out")"
done
# The rollups (retention policies, continuous queries, the dashboards' lookup),
# as ./sparkscope up makes them: influxdb/rollups.setup is generated from
# src/sparkscope/stack/rollups.py. A query is dropped and created again; its
# next run recomputes its whole lag window, so nothing is missed.
rollups="${ROLLUPS_FILE:-$(dirname "$0")/rollups.setup}"
[ -r "$rollups" ] || fail "no $rollups (it comes with the repository: influxdb/rollups.setup)"
lookup="$(mktemp)"
trap 'rm -f "$out" "$qfile" "$lookup"' EXIT
while IFS= read -r line; do
  line="$(printf '%s' "$line" | sed "s/__DB__/$db/g; s/__RETENTION__/$retention/g")"
  kind="${line%% *}"; rest="${line#* }"
  case "$kind" in
    policy)
      name="${rest%% *}"; duration="${rest#* }"
      if ! q admin "CREATE RETENTION POLICY \"$name\" ON \"$db\" DURATION $duration REPLICATION 1$(limits "$duration")"; then
        grep -q conflict "$out" || fail "policy $name: $(cat "$out")"
        q admin "ALTER RETENTION POLICY \"$name\" ON \"$db\" DURATION $duration$(limits "$duration")" || fail "policy $name: $(cat "$out")"
      fi ;;
    query)
      name="${rest%% *}"; statement="${rest#* }"
      q admin "DROP CONTINUOUS QUERY \"$name\" ON \"$db\"" || true
      q admin "$statement" || fail "continuous query $name: $(cat "$out")" ;;
    drop) q admin "DROP CONTINUOUS QUERY \"$rest\" ON \"$db\"" || true ;;
    lookup) printf '%s\n' "$rest" >> "$lookup" ;;
  esac
done < "$rollups"
code="$(printf 'user = "%s:%s"\n' "$admin" "$INFLUXDB_ADMIN_PASSWORD" | curl -sS -K - -o "$out" -w '%{http_code}' \
  "$url/write?db=$db&rp=sparkscope_meta&precision=ns" --data-binary "@$lookup")" || fail "lookup write: curl failed"
[ "$code" = 204 ] || fail "lookup write: $code $(cat "$out")"

echo "influxdb-setup: users $admin, $writer (write), $reader (read) on database $db; rollups"
