#!/usr/bin/env bash
# Postgres for the public benchmark's harness without containers: a Debian
# cluster of its own (`15/bench` by default) on the harness's port 15555,
# user and password `bench`, configured by the harness's postgres.conf.
# The harness calls it through BENCH_PG_CONTROL with one action:
#
#   up      a fresh cluster, running (an old one is dropped first)
#   stop    stopped, data kept (the postgres-restart chaos phase)
#   start   started again on the same data
#   down    stopped and dropped
#
# Settings: PG_VERSION (default: the only one in /etc/postgresql),
# BENCH_PG_CLUSTER (bench), BENCH_PG_PORT (15555), BENCH_PG_CONF (the
# harness's postgres.conf, found in the current directory).
set -euo pipefail
action=${1:?usage: pg-control.sh up|stop|start|down}
version=${PG_VERSION:-$(ls /etc/postgresql | sort -V | tail -1)}
cluster=${BENCH_PG_CLUSTER:-bench}
port=${BENCH_PG_PORT:-15555}
conf=${BENCH_PG_CONF:-$PWD/postgres.conf}

exists() { pg_lsclusters -h | awk -v v="$version" -v c="$cluster" '$1 == v && $2 == c { found = 1 } END { exit !found }'; }
ctl() { pg_ctlcluster --skip-systemctl-redirect "$version" "$cluster" "$@"; }
drop() { if exists; then pg_dropcluster --stop "$version" "$cluster"; fi; }

case "$action" in
up)
    drop
    [ -r "$conf" ] || { echo "pg-control.sh: no postgres.conf at $conf" >&2; exit 2; }
    pg_createcluster "$version" "$cluster" -p "$port" >/dev/null -- --auth-local=trust --auth-host=scram-sha-256
    confdir=/etc/postgresql/$version/$cluster
    install -o postgres -m 0644 "$conf" "$confdir/conf.d/harness.conf"
    # The harness's file listens on every address; this machine's tests stay on loopback.
    echo "listen_addresses = 'localhost'" > "$confdir/conf.d/zz-loopback.conf"
    chown postgres "$confdir/conf.d/zz-loopback.conf"
    ctl start
    su postgres -c "psql -q -p $port -c \"CREATE ROLE bench LOGIN SUPERUSER PASSWORD 'bench'\""
    ;;
stop) ctl stop -m fast ;;
start) ctl start ;;
down) drop ;;
*) echo "pg-control.sh: unknown action '$action' (up, stop, start or down)" >&2; exit 2 ;;
esac
