#!/usr/bin/env bash
# Starts or stops two local PgBouncer instances in front of the test
# PostgreSQL (127.0.0.1:5432 unless QUEUE_PGBOUNCER_UPSTREAM_PORT says
# otherwise): 127.0.0.1:6432 in transaction pooling mode and 127.0.0.1:6433
# in session pooling mode (server pools of 4 and 40 connections per database
# and user; see POOLS below). Config, pid and log files live under target/pgbouncer (or
# QUEUE_PGBOUNCER_DIR; as root in a checkout the postgres user cannot enter,
# /tmp/queue-pgbouncer-<hash of the checkout's path>). PgBouncer refuses to run as root: as root the script
# runs it as the postgres user.
#
#   scripts/pgbouncer.sh start   # idempotent: running instances are kept,
#                                # also ones another checkout started
#   scripts/pgbouncer.sh stop    # stops both instances
#
# The tests reach them through QUEUE_TEST_PGBOUNCER_URL
# (postgres://postgres@127.0.0.1:6432/queue_test) and
# QUEUE_TEST_PGBOUNCER_SESSION_URL (postgres://postgres@127.0.0.1:6433/queue_test).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${QUEUE_PGBOUNCER_DIR:-$ROOT/target/pgbouncer}
# As root, PgBouncer runs as postgres, which must read its files: a checkout
# postgres cannot enter (`mktemp -d` makes a 0700 directory) keeps them
# under /tmp instead, in a directory of its own named after the checkout.
if [ -z "${QUEUE_PGBOUNCER_DIR:-}" ] && [ "$(id -u)" = 0 ] \
    && ! runuser -u postgres -- test -x "$ROOT" 2>/dev/null; then
    DIR=/tmp/queue-pgbouncer-$(printf '%s' "$ROOT" | md5sum | cut -c1-12)
fi
UPSTREAM_PORT=${QUEUE_PGBOUNCER_UPSTREAM_PORT:-5432}
declare -A MODES=([6432]=transaction [6433]=session)
# Transaction pooling: few servers, so clients share them. Session pooling
# holds a server per client connection: enough for the tests run in parallel.
declare -A POOLS=([6432]=4 [6433]=40)

as_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

up() { [ -f "$DIR/$1/pgbouncer.pid" ] && kill -0 "$(cat "$DIR/$1/pgbouncer.pid")" 2>/dev/null; }

# Something already answers on the port: another checkout's instance of this
# script (its pid file lives in that checkout), kept as it is.
serving() { pg_isready -q -h 127.0.0.1 -p "$1" -t 2 2>/dev/null; }

config() {
    local port=$1 mode=$2 pool=$3
    cat <<CONF
[databases]
* = host=127.0.0.1 port=$UPSTREAM_PORT

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $DIR/$port/userlist.txt
pool_mode = $mode
default_pool_size = $pool
max_client_conn = 500
; sqlx sends extra_float_digits; the test harness sends options (search_path),
; which PgBouncer 1.18 cannot forward: it is ignored, and the storage's
; statements name their schema anyway.
ignore_startup_parameters = extra_float_digits,options
server_reset_query = DISCARD ALL
logfile = $DIR/$port/pgbouncer.log
pidfile = $DIR/$port/pgbouncer.pid
CONF
}

start() {
    command -v pgbouncer >/dev/null || { echo "pgbouncer is not installed (apt-get install pgbouncer)" >&2; exit 1; }
    for port in "${!MODES[@]}"; do
        if up "$port"; then continue; fi
        if serving "$port"; then
            echo "127.0.0.1:$port already serves (a PgBouncer started elsewhere): kept"
            continue
        fi
        mkdir -p "$DIR/$port"
        config "$port" "${MODES[$port]}" "${POOLS[$port]}" > "$DIR/$port/pgbouncer.ini"
        echo '"postgres" ""' > "$DIR/$port/userlist.txt"
        rm -f "$DIR/$port/pgbouncer.pid"
        if [ "$(id -u)" = 0 ]; then chown -R postgres "$DIR"; chmod o+x "$DIR" "$(dirname "$DIR")" 2>/dev/null || true; fi
        as_owner pgbouncer -d "$DIR/$port/pgbouncer.ini"
    done
    for port in "${!MODES[@]}"; do
        for _ in $(seq 1 50); do { up "$port" || serving "$port"; } && break; sleep 0.1; done
        up "$port" || serving "$port" || { echo "pgbouncer on port $port did not start; see $DIR/$port/pgbouncer.log" >&2; exit 1; }
    done
    echo "PgBouncer up on 127.0.0.1:6432 (transaction pooling) and 127.0.0.1:6433 (session pooling)"
}

stop() {
    for port in "${!MODES[@]}"; do
        if up "$port"; then
            pid=$(cat "$DIR/$port/pgbouncer.pid")
            kill "$pid"
            for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        fi
    done
    echo "PgBouncer stopped"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
