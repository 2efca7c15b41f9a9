#!/usr/bin/env bash
# A three-node MariaDB Galera cluster on this machine, for the Galera tests:
# nodes 1, 2 and 3 answer SQL on 127.0.0.1:3311, 3312 and 3313 (root, no
# password), replicate with Galera on 4571-4573 (IST on 4581-4583, rsync SST
# on 4591-4593). Data and logs live under /var/lib/queue-galera (or
# QUEUE_GALERA_DIR), owned by mysql. Node 1 bootstraps the cluster; the
# others join it by state transfer.
#
#   scripts/galera.sh start       # idempotent: running nodes are kept
#   scripts/galera.sh status      # each node's wsrep state and cluster size
#   scripts/galera.sh kill N      # node N SIGKILLed (a crash)
#   scripts/galera.sh rejoin N    # node N started again, back in the cluster
#   scripts/galera.sh stop        # every node stopped, the data removed
#
# The tests reach it through QUEUE_TEST_GALERA_URLS
# (mysql://root@127.0.0.1:3311/,mysql://root@127.0.0.1:3312/,mysql://root@127.0.0.1:3313/).
set -euo pipefail

DIR=${QUEUE_GALERA_DIR:-/var/lib/queue-galera}
PROVIDER=${QUEUE_GALERA_PROVIDER:-/usr/lib/galera/libgalera_smm.so}
NODES=(1 2 3)

port() { echo $((3310 + $1)); }
gport() { echo $((4570 + $1)); }

pidfile() { echo "$DIR/node$1/mariadbd.pid"; }

up() { [ -f "$(pidfile "$1")" ] && kill -0 "$(cat "$(pidfile "$1")")" 2>/dev/null; }

sql() { mariadb -h 127.0.0.1 -P "$(port "$1")" -u root -N -B -e "$2"; }

config() {
    local n=$1 peers=""
    for m in "${NODES[@]}"; do peers+="${peers:+,}127.0.0.1:$(gport "$m")"; done
    cat <<CONF
[mariadbd]
datadir = $DIR/node$n/data
socket = $DIR/node$n/mariadbd.sock
pid-file = $(pidfile "$n")
log-error = $DIR/node$n/error.log
port = $(port "$n")
bind-address = 127.0.0.1
user = mysql
skip-name-resolve
innodb_buffer_pool_size = 128M
innodb_log_file_size = 64M
# Galera needs row events and interleaved auto-increment locks.
binlog_format = ROW
default_storage_engine = InnoDB
innodb_autoinc_lock_mode = 2
innodb_flush_log_at_trx_commit = 2
wsrep_on = ON
wsrep_provider = $PROVIDER
wsrep_cluster_name = queue_galera
wsrep_cluster_address = gcomm://$peers
wsrep_node_name = node$n
wsrep_node_address = 127.0.0.1:$(gport "$n")
wsrep_provider_options = "base_port=$(gport "$n");gmcast.listen_addr=tcp://127.0.0.1:$(gport "$n");ist.recv_addr=127.0.0.1:$((4580 + n))"
# Reads wait until this node has applied what the cluster committed before
# them: without it a read on one node can miss a write another node just
# committed (the model test sees a queue paused through one node still
# unpaused through another).
wsrep_sync_wait = 1
wsrep_sst_method = rsync
wsrep_sst_receive_address = 127.0.0.1:$((4590 + n))
CONF
}

# Waits up to 60 s for node N to be Synced in a cluster of the expected size.
wait_synced() {
    local n=$1 size=$2
    for _ in $(seq 1 600); do
        if up "$n" && [ "$(sql "$n" "SHOW STATUS LIKE 'wsrep_local_state_comment'" 2>/dev/null | awk '{print $2}')" = Synced ] &&
            [ "$(sql "$n" "SHOW STATUS LIKE 'wsrep_cluster_size'" 2>/dev/null | awk '{print $2}')" -ge "$size" ]; then
            return 0
        fi
        sleep 0.1
    done
    echo "galera: node $n did not reach Synced in a cluster of $size within 60 s; its log:" >&2
    tail -n 30 "$DIR/node$n/error.log" >&2 || true
    return 1
}

launch() {
    local n=$1
    shift
    # Not start-stop-daemon: it matches the test server's mariadbd by its
    # executable and would start nothing. The config's user=mysql drops root.
    setsid nohup "$(command -v mariadbd)" --defaults-file="$DIR/node$n/my.cnf" "$@" \
        >>"$DIR/node$n/stdout.log" 2>&1 </dev/null &
}

start_node() {
    local n=$1 size=$2
    up "$n" && return 0
    mkdir -p "$DIR/node$n"
    config "$n" >"$DIR/node$n/my.cnf"
    chown -R mysql:mysql "$DIR"
    if [ ! -d "$DIR/node$n/data/mysql" ]; then
        mariadb-install-db --defaults-file="$DIR/node$n/my.cnf" --user=mysql \
            --auth-root-authentication-method=normal >>"$DIR/node$n/install.log" 2>&1
    fi
    if [ "$n" = 1 ] && ! any_other_up 1; then
        # The first node of a cluster that is down: a new cluster, from
        # its own data (safe_to_bootstrap is ours to set: we stopped it).
        [ -f "$DIR/node$n/data/grastate.dat" ] &&
            sed -i 's/^safe_to_bootstrap: 0/safe_to_bootstrap: 1/' "$DIR/node$n/data/grastate.dat"
        launch "$n" --wsrep-new-cluster
    else
        launch "$n"
    fi
    wait_synced "$n" "$size"
    # Root from 127.0.0.1 without a password, as on the test server.
    if [ "$n" = 1 ]; then
        sql 1 "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'; GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION" 2>/dev/null ||
            mariadb --socket="$DIR/node1/mariadbd.sock" -u root -e \
                "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'; GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION"
    fi
}

any_other_up() {
    for m in "${NODES[@]}"; do
        [ "$m" = "$1" ] && continue
        up "$m" && return 0
    done
    return 1
}

stop_node() {
    local n=$1
    if up "$n"; then
        local pid
        pid=$(cat "$(pidfile "$n")")
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    fi
}

case ${1:-} in
start)
    size=0
    for n in "${NODES[@]}"; do
        size=$((size + 1))
        start_node "$n" "$size"
    done
    echo "galera: 3 nodes synced on 127.0.0.1:3311, 3312 and 3313"
    ;;
status)
    for n in "${NODES[@]}"; do
        if up "$n"; then
            echo "node$n $(port "$n") $(sql "$n" "SHOW STATUS LIKE 'wsrep_local_state_comment'" | awk '{print $2}') size=$(sql "$n" "SHOW STATUS LIKE 'wsrep_cluster_size'" | awk '{print $2}')"
        else
            echo "node$n $(port "$n") down"
        fi
    done
    ;;
kill)
    n=${2:?node number}
    up "$n" && kill -9 "$(cat "$(pidfile "$n")")"
    rm -f "$(pidfile "$n")"
    ;;
rejoin)
    n=${2:?node number}
    live=0
    for m in "${NODES[@]}"; do up "$m" && live=$((live + 1)); done
    start_node "$n" $((live + 1))
    ;;
stop)
    for n in 3 2 1; do stop_node "$n"; done
    rm -rf "$DIR"
    ;;
*)
    echo "usage: $0 start | status | kill N | rejoin N | stop" >&2
    exit 2
    ;;
esac
