#!/usr/bin/env bash
# The public benchmark's chaos phases, by hand, against `queue-bench
# portable` (bench/portable/queue-bench/): the adapter runs at 200 jobs/s
# with 16 handlers and 1 s ticks through
#   1. 20 rounds of pg_terminate_backend on all its connections, 0.5 s apart;
#   2. a PostgreSQL stop (fast) for 10 s, then a start;
#   3. a SIGKILL of the adapter, restarted 2 s later;
#   4. 110 idle connections held for 10 s (pool exhaustion);
# then a SIGTERM, and a consumer-only run drains what is left. It fails
# unless every job enqueued ended completed in history exactly once with
# none left live, every adapter exited 0 on SIGTERM, its ticks had no gap
# except around the SIGKILL, and the database holds at least the
# enqueues and completions the samples reported.
#
# The server is restarted, so by default it is a throwaway cluster of its
# own: initdb in a temporary directory, port 55433, run as the `postgres`
# user (Debian's PostgreSQL 15 binaries). To use another server, set
# PORTABLE_CHAOS_ADMIN_URL (a superuser URL to its `postgres` database)
# and PORTABLE_CHAOS_STOP / PORTABLE_CHAOS_START (shell commands).
#
# Usage: scripts/portable-chaos.sh   (builds the debug binary first)
set -euo pipefail
cd "$(dirname "$0")/.."

PGBIN="${PGBIN:-/usr/lib/postgresql/15/bin}"
WORK="$(mktemp -d /tmp/portable-chaos.XXXXXX)"
OWN_SERVER=0
if [ -z "${PORTABLE_CHAOS_ADMIN_URL:-}" ]; then
    OWN_SERVER=1
    PORT=55433
    DATA="$WORK/data"
    chown postgres "$WORK"
    as_pg() { if [ "$(id -un)" = postgres ]; then bash -c "$1"; else su postgres -c "$1"; fi; }
    as_pg "$PGBIN/initdb -D $DATA -U postgres --auth=trust >$WORK/initdb.log 2>&1"
    PORTABLE_CHAOS_START="$PGBIN/pg_ctl -D $DATA -w -o '-p $PORT -k $WORK -c max_connections=120' -l $WORK/server.log start >/dev/null"
    PORTABLE_CHAOS_STOP="$PGBIN/pg_ctl -D $DATA -w -m fast stop >/dev/null"
    PORTABLE_CHAOS_START="as_pg \"$PORTABLE_CHAOS_START\""
    PORTABLE_CHAOS_STOP="as_pg \"$PORTABLE_CHAOS_STOP\""
    PORTABLE_CHAOS_ADMIN_URL="postgres://postgres@127.0.0.1:$PORT/postgres"
    eval "$PORTABLE_CHAOS_START"
fi
: "${PORTABLE_CHAOS_STOP:?set PORTABLE_CHAOS_STOP with PORTABLE_CHAOS_ADMIN_URL}"
: "${PORTABLE_CHAOS_START:?set PORTABLE_CHAOS_START with PORTABLE_CHAOS_ADMIN_URL}"
ADMIN="$PORTABLE_CHAOS_ADMIN_URL"
DB_URL="${ADMIN%/*}/queue_rs_chaos"
URL="$DB_URL?application_name=queue_rs_chaos"

ADAPTER=""
cleanup() {
    [ -n "$ADAPTER" ] && kill -KILL "$ADAPTER" 2>/dev/null || true
    if [ "$OWN_SERVER" = 1 ]; then eval "$PORTABLE_CHAOS_STOP" || true; rm -rf "$WORK"; fi
}
trap cleanup EXIT

CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}" cargo build -q -p queue-bench
BIN="$PWD/target/debug/queue-bench"
psql -q "$ADMIN" -c "DROP DATABASE IF EXISTS queue_rs_chaos" 2>/dev/null

log() { echo "$(date -u +%T) $*"; }
run() { # run N RATE: an adapter in the background, its output in $WORK/out.N
    DATABASE_URL="$URL" SCENARIO=long_horizon PRODUCER_RATE="$2" WORKER_COUNT=16 \
        SAMPLE_EVERY_S=1 "$BIN" portable >"$WORK/out.$1" 2>"$WORK/err.$1" </dev/null &
    ADAPTER=$!
}
term() { # SIGTERM the adapter; it must exit 0
    kill -TERM "$ADAPTER"
    local rc=0
    wait "$ADAPTER" || rc=$?
    ADAPTER=""
    [ "$rc" = 0 ] || { echo "FAIL: adapter exited $rc on SIGTERM"; exit 1; }
}

run 1 200; log "adapter started"; sleep 8
log "pg_terminate_backend x20, 0.5 s apart"
for _ in $(seq 20); do
    psql -Atq "$ADMIN" -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
        WHERE datname = 'queue_rs_chaos' AND pid <> pg_backend_pid()" >/dev/null
    sleep 0.5
done
sleep 5
log "PostgreSQL stopped for 10 s"; eval "$PORTABLE_CHAOS_STOP"; sleep 10
eval "$PORTABLE_CHAOS_START"; log "PostgreSQL started"; sleep 10
log "SIGKILL, restart 2 s later"
kill -KILL "$ADAPTER"; wait "$ADAPTER" 2>/dev/null || true
sleep 2; run 2 200; sleep 10
log "110 idle connections for 10 s"
for _ in $(seq 110); do
    psql -Atq "$DB_URL" -c "SELECT pg_sleep(10)" >/dev/null 2>&1 &
done
sleep 12
log "SIGTERM"; term
log "draining with a consumer-only adapter for 60 s"; run 3 0; sleep 60; term

psql -Atq "$DB_URL" -F ' ' -c "SELECT (SELECT count(*) FROM queue_rs.job_queue), \
    (SELECT count(*) FROM queue_rs.job_history WHERE status_final = 'completed'), \
    (SELECT count(*) FROM queue_rs.job_history WHERE status_final <> 'completed'), \
    (SELECT count(DISTINCT (payload->>'enq_us', payload->>'seq')) FROM queue_rs.job_history), \
    (SELECT max(attempts) FROM queue_rs.job_history)" >"$WORK/counts"
read -r LIVE COMPLETED OTHER DISTINCT MAX_ATTEMPTS <"$WORK/counts"
echo "live=$LIVE completed=$COMPLETED other=$OTHER distinct=$DISTINCT max_attempts=$MAX_ATTEMPTS"
python3 - "$WORK" "$COMPLETED" <<'PY'
import json, sys, datetime
work, completed = sys.argv[1], int(sys.argv[2])
enq = comp = 0.0
for n in (1, 2, 3):
    ticks = []
    for line in open(f"{work}/out.{n}"):
        r = json.loads(line)
        if r.get("kind") != "adapter":
            continue
        if r["metric"] == "enqueue_rate":
            enq += r["value"] * r["window_s"]
            ticks.append(datetime.datetime.fromisoformat(r["t"].replace("Z", "+00:00")))
        elif r["metric"] == "completion_rate":
            comp += r["value"] * r["window_s"]
    gaps = [(b - a).total_seconds() for a, b in zip(ticks, ticks[1:]) if (b - a).total_seconds() != 1]
    print(f"run {n}: {len(ticks)} ticks, gaps {gaps}")
    if gaps:
        sys.exit(f"FAIL: run {n} missed ticks")
print(f"reported: enqueued {enq:.0f}, completed {comp:.0f}; in history {completed}")
if completed < round(enq) or completed < round(comp):
    sys.exit("FAIL: the samples report more jobs than the database holds")
PY
[ "$LIVE" = 0 ] && [ "$OTHER" = 0 ] && [ "$COMPLETED" = "$DISTINCT" ] \
    || { echo "FAIL: jobs left live, failed, or completed twice"; exit 1; }
echo "OK"
