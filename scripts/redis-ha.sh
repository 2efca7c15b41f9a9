#!/usr/bin/env bash
# A Redis Cluster of three masters, each with one replica, on
# 127.0.0.1:7011-7016, for the failover tests (the plain three-master
# cluster of scripts/redis-cluster.sh stays on 7001-7003). Nodes time out
# after 1 s, so a killed master's replica takes over within a few seconds.
# Data under /tmp/queue-redis-ha; no persistence (replication only).
#
#   scripts/redis-ha.sh start               # (re)creates the six nodes
#   scripts/redis-ha.sh status              # each node's role and slots
#   scripts/redis-ha.sh master-of KEY       # the port of the master serving KEY
#   scripts/redis-ha.sh replica-of PORT     # the port of PORT's replica
#   scripts/redis-ha.sh kill PORT           # SIGKILLs that node
#   scripts/redis-ha.sh stall PORT          # SIGSTOPs replica PORT and cuts its link
#                                           # (its master goes on without it; what is
#                                           # already in the socket still arrives)
#   scripts/redis-ha.sh resume PORT         # SIGCONTs it
#   scripts/redis-ha.sh restart PORT        # starts a killed node again (it rejoins
#                                           # as a replica and syncs)
#   scripts/redis-ha.sh wait-ok             # until cluster_state is ok everywhere alive
#   scripts/redis-ha.sh wait-master KEY     # until KEY's master answers (a failover done)
#   scripts/redis-ha.sh stop                # every node shut down, data removed
set -euo pipefail

PORTS=(7011 7012 7013 7014 7015 7016)
DIR=${QUEUE_REDIS_HA_DIR:-/tmp/queue-redis-ha}

up() { redis-cli -p "$1" ping >/dev/null 2>&1; }
pid_of() { cat "$DIR/$1/redis.pid" 2>/dev/null; }

launch() {
    redis-server --port "$1" --bind 127.0.0.1 --cluster-enabled yes \
        --cluster-config-file "$DIR/$1/nodes.conf" --cluster-node-timeout 1000 \
        --cluster-replica-validity-factor 0 \
        --dir "$DIR/$1" --appendonly no --save '' --pidfile "$DIR/$1/redis.pid" \
        --logfile "$DIR/$1/redis.log" --daemonize yes
}

# A killed node started again: it rejoins, as a replica of whoever took its
# slots, and syncs from it.
restart() {
    launch "$1"
    for _ in $(seq 1 300); do
        if up "$1" && redis-cli -p "$1" info replication | grep -q 'master_link_status:up'; then
            return 0
        fi
        sleep 0.1
    done
    echo "redis-ha: $1 did not rejoin as a synced replica within 30 s" >&2
    return 1
}

stop() {
    for port in "${PORTS[@]}"; do
        pid=$(pid_of "$port" || true)
        if [ -n "$pid" ]; then
            kill -CONT "$pid" 2>/dev/null || true
            kill -9 "$pid" 2>/dev/null || true
        fi
    done
    rm -rf "$DIR"
}

start() {
    stop
    for port in "${PORTS[@]}"; do
        mkdir -p "$DIR/$port"
        launch "$port"
    done
    for port in "${PORTS[@]}"; do
        for _ in $(seq 1 50); do up "$port" && break; sleep 0.1; done
        up "$port" || { echo "redis-ha: node $port did not start; see $DIR/$port/redis.log" >&2; exit 1; }
    done
    redis-cli --cluster create "${PORTS[@]/#/127.0.0.1:}" --cluster-replicas 1 --cluster-yes >/dev/null
    wait_ok
    # Every replica linked to its master before anyone writes.
    for _ in $(seq 1 100); do
        linked=0
        for port in "${PORTS[@]}"; do
            if redis-cli -p "$port" info replication | grep -q 'master_link_status:up'; then
                linked=$((linked + 1))
            fi
        done
        [ "$linked" -eq 3 ] && break
        sleep 0.1
    done
    [ "$linked" -eq 3 ] || { echo "redis-ha: replicas not linked ($linked of 3)" >&2; exit 1; }
    echo "redis-ha: three masters with a replica each on 127.0.0.1:${PORTS[0]}-${PORTS[-1]}"
}

# Until every node that answers says cluster_state:ok (30 s at most).
wait_ok() {
    for _ in $(seq 1 300); do
        ok=1
        for port in "${PORTS[@]}"; do
            if up "$port" && ! redis-cli -p "$port" cluster info | grep -q 'cluster_state:ok'; then ok=0; fi
        done
        [ "$ok" = 1 ] && return 0
        sleep 0.1
    done
    echo "redis-ha: the cluster did not reach state ok within 30 s" >&2
    return 1
}

# Any node that answers.
alive() {
    for port in "${PORTS[@]}"; do
        if up "$port"; then echo "$port"; return 0; fi
    done
    echo "redis-ha: no node answers" >&2
    return 1
}

master_of() {
    local node slot
    node=$(alive)
    slot=$(redis-cli -p "$node" cluster keyslot "$1")
    redis-cli -p "$node" cluster shards >/dev/null 2>&1 || true
    redis-cli -p "$node" cluster nodes | awk -v slot="$slot" '
        $3 ~ /master/ && $3 !~ /fail/ {
            for (i = 9; i <= NF; i++) {
                n = split($i, r, "-");
                lo = r[1]; hi = (n == 2) ? r[2] : r[1];
                if (slot >= lo && slot <= hi) { split($2, a, "[:@]"); print a[2]; exit }
            }
        }'
}

replica_of() {
    local node id
    node=$(alive)
    id=$(redis-cli -p "$node" cluster nodes | awk -v p="127.0.0.1:$1@" 'index($2, p) == 1 {print $1}')
    redis-cli -p "$node" cluster nodes | awk -v id="$id" '$4 == id && $3 !~ /fail/ {split($2, a, "[:@]"); print a[2]; exit}'
}

wait_master() {
    for _ in $(seq 1 300); do
        port=$(master_of "$1" || true)
        if [ -n "$port" ] && up "$port"; then
            wait_ok
            echo "$port"
            return 0
        fi
        sleep 0.1
    done
    echo "redis-ha: no master answers for $1 within 30 s" >&2
    return 1
}

status() {
    for port in "${PORTS[@]}"; do
        if up "$port"; then
            echo "$port $(redis-cli -p "$port" info replication | awk -F: '/^role/ {print $2}' | tr -d '\r')"
        else
            echo "$port down"
        fi
    done
}

case "${1:-}" in
start) start ;;
stop) stop ;;
status) status ;;
wait-ok) wait_ok ;;
wait-master) wait_master "${2:?a key}" ;;
master-of) master_of "${2:?a key}" ;;
replica-of) replica_of "${2:?a port}" ;;
kill) kill -9 "$(pid_of "${2:?a port}")" ;;
stall)
    master=$(redis-cli -p "${2:?a port}" info replication | awk -F: '/^master_port/ {print $2}' | tr -d '\r')
    [ -n "$master" ] || { echo "redis-ha: ${2} is not a replica" >&2; exit 1; }
    kill -STOP "$(pid_of "$2")"
    redis-cli -p "$master" client kill type replica >/dev/null
    ;;
resume) kill -CONT "$(pid_of "${2:?a port}")" ;;
restart) restart "${2:?a port}" ;;
*)
    echo "usage: $0 start|status|master-of KEY|replica-of PORT|kill PORT|stall PORT|resume PORT|restart PORT|wait-ok|wait-master KEY|stop" >&2
    exit 2
    ;;
esac
