#!/usr/bin/env bash
# A PostgreSQL primary and a streaming standby on this machine, for the
# failover tests: two Debian clusters of the installed major version,
# `qha_a` on 127.0.0.1:5441 (the primary when started) and `qha_b` on
# 127.0.0.1:5442 (its standby, cloned with pg_basebackup). Trust
# authentication on loopback only. A failover is driven by the caller:
# `kill-primary` stops the primary with `-m immediate` (a crash), `promote`
# makes the standby the primary. Nothing here decides on its own (no
# Patroni): the tests need to say exactly when each step happens.
#
#   scripts/pg-ha.sh start [sync|async]  # (re)creates both, streaming;
#                                        # sync: synchronous_commit waits for
#                                        # the standby (synchronous_standby_names)
#   scripts/pg-ha.sh status              # role of each cluster, or down
#   scripts/pg-ha.sh kill-primary        # qha_a stopped with -m immediate
#   scripts/pg-ha.sh promote             # qha_b promoted, waits until it writes
#   scripts/pg-ha.sh stop-standby        # qha_b stopped (-m fast): it receives
#                                        # nothing until start-standby
#   scripts/pg-ha.sh start-standby       # qha_b started again (still a standby
#                                        # until promoted)
#   scripts/pg-ha.sh stop                # both stopped and dropped
#
# The tests reach them through QUEUE_TEST_PG_HA_URL
# (postgres://postgres@127.0.0.1:5441,127.0.0.1:5442/queue_test).
set -euo pipefail

VERSION=${QUEUE_PG_HA_VERSION:-$(ls /etc/postgresql | sort -n | tail -1)}
PRIMARY=qha_a
STANDBY=qha_b
declare -A PORTS=([$PRIMARY]=5441 [$STANDBY]=5442)

as_postgres() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

exists() { pg_lsclusters -h | awk '{print $2}' | grep -qx "$1"; }

data_dir() { pg_lsclusters -h | awk -v c="$1" '$2 == c {print $6}'; }

sql() { psql -h 127.0.0.1 -p "${PORTS[$1]}" -U postgres -d postgres -XAtq -c "$2"; }

# Waits up to 30 s for a cluster to answer, and, with a second argument,
# for `pg_is_in_recovery()` to be that value (t or f).
wait_for() {
    local cluster=$1 recovery=${2:-}
    for _ in $(seq 1 300); do
        if pg_isready -q -h 127.0.0.1 -p "${PORTS[$cluster]}" -t 1; then
            if [ -z "$recovery" ] || [ "$(sql "$cluster" 'SELECT pg_is_in_recovery()' 2>/dev/null)" = "$recovery" ]; then
                return 0
            fi
        fi
        sleep 0.1
    done
    echo "pg-ha: $cluster did not become ready${recovery:+ (pg_is_in_recovery = $recovery)} within 30 s" >&2
    return 1
}

drop() {
    for cluster in $STANDBY $PRIMARY; do
        if exists "$cluster"; then
            pg_dropcluster --stop "$VERSION" "$cluster"
        fi
    done
}

create() {
    local cluster=$1
    pg_createcluster "$VERSION" "$cluster" -p "${PORTS[$cluster]}" \
        -o listen_addresses=localhost -o wal_keep_size=256MB -o shared_buffers=64MB \
        -o max_wal_senders=4 -o hot_standby=on \
        -- --auth-local=trust --auth-host=trust >/dev/null
    # The replication connection from loopback.
    echo "host replication all 127.0.0.1/32 trust" >>"/etc/postgresql/$VERSION/$cluster/pg_hba.conf"
}

start() {
    local mode=${1:-sync}
    case $mode in sync | async) ;; *)
        echo "pg-ha: unknown mode '$mode' (sync or async)" >&2
        exit 2
        ;;
    esac
    drop
    create $PRIMARY
    pg_ctlcluster "$VERSION" $PRIMARY start
    wait_for $PRIMARY f
    create $STANDBY
    local dir
    dir=$(data_dir $STANDBY)
    as_postgres find "$dir" -mindepth 1 -delete
    as_postgres pg_basebackup -h 127.0.0.1 -p "${PORTS[$PRIMARY]}" -U postgres -D "$dir" \
        -X stream -R -c fast
    # The standby names itself, so that the primary can wait for it by name
    # (the last setting in postgresql.auto.conf wins over what -R wrote).
    echo "primary_conninfo = 'host=127.0.0.1 port=${PORTS[$PRIMARY]} user=postgres application_name=$STANDBY'" |
        as_postgres tee -a "$dir/postgresql.auto.conf" >/dev/null
    pg_ctlcluster "$VERSION" $STANDBY start
    wait_for $STANDBY t
    if [ "$mode" = sync ]; then
        sql $PRIMARY "ALTER SYSTEM SET synchronous_standby_names = '$STANDBY'"
        sql $PRIMARY "SELECT pg_reload_conf()" >/dev/null
    fi
    # Streaming, and (sync) counted as synchronous, before anyone writes.
    for _ in $(seq 1 300); do
        state=$(sql $PRIMARY "SELECT sync_state FROM pg_stat_replication WHERE application_name = '$STANDBY'")
        if { [ "$mode" = sync ] && [ "$state" = sync ]; } || { [ "$mode" = async ] && [ -n "$state" ]; }; then
            echo "pg-ha: $PRIMARY on ${PORTS[$PRIMARY]} (primary), $STANDBY on ${PORTS[$STANDBY]} (standby, $state)"
            return 0
        fi
        sleep 0.1
    done
    echo "pg-ha: the standby did not reach the primary as $mode within 30 s" >&2
    exit 1
}

status() {
    for cluster in $PRIMARY $STANDBY; do
        if exists "$cluster" && pg_isready -q -h 127.0.0.1 -p "${PORTS[$cluster]}" -t 1; then
            if [ "$(sql "$cluster" 'SELECT pg_is_in_recovery()')" = t ]; then role=standby; else role=primary; fi
            echo "$cluster ${PORTS[$cluster]} $role"
        else
            echo "$cluster ${PORTS[$cluster]} down"
        fi
    done
}

case ${1:-} in
start) start "${2:-sync}" ;;
stop) drop ;;
status) status ;;
kill-primary) pg_ctlcluster "$VERSION" $PRIMARY stop -m immediate ;;
stop-standby) pg_ctlcluster "$VERSION" $STANDBY stop -m fast ;;
start-standby)
    pg_ctlcluster "$VERSION" $STANDBY start
    wait_for $STANDBY t
    ;;
promote)
    pg_ctlcluster "$VERSION" $STANDBY promote
    wait_for $STANDBY f
    ;;
*)
    echo "usage: $0 start [sync|async] | status | kill-primary | promote | stop-standby | start-standby | stop" >&2
    exit 2
    ;;
esac
