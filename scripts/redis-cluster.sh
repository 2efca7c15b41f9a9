#!/usr/bin/env bash
# Starts or stops a local three-master Redis Cluster on 127.0.0.1:7001-7003
# (no replicas), its data under /tmp/queue-redis-cluster. The Redis tests
# reach it through QUEUE_TEST_REDIS_CLUSTER_URL (default redis://127.0.0.1:7001).
#
#   scripts/redis-cluster.sh start   # idempotent: a running cluster is kept
#   scripts/redis-cluster.sh stop    # shuts the three servers down, removes the data
set -euo pipefail

PORTS=(7001 7002 7003)
DIR=${QUEUE_REDIS_CLUSTER_DIR:-/tmp/queue-redis-cluster}

up() { redis-cli -p "$1" ping >/dev/null 2>&1; }

start() {
    for port in "${PORTS[@]}"; do
        if up "$port"; then continue; fi
        mkdir -p "$DIR/$port"
        redis-server --port "$port" --bind 127.0.0.1 --cluster-enabled yes \
            --cluster-config-file "$DIR/$port/nodes.conf" --cluster-node-timeout 5000 \
            --dir "$DIR/$port" --appendonly no --save '' \
            --logfile "$DIR/$port/redis.log" --daemonize yes
    done
    for port in "${PORTS[@]}"; do
        for _ in $(seq 1 50); do up "$port" && break; sleep 0.1; done
        up "$port" || { echo "redis-server on port $port did not start; see $DIR/$port/redis.log" >&2; exit 1; }
    done
    if ! redis-cli -p "${PORTS[0]}" cluster info | grep -q 'cluster_state:ok'; then
        if [ "$(redis-cli -p "${PORTS[0]}" cluster info | awk -F: '/cluster_known_nodes/ {print $2}' | tr -d '\r')" = "1" ]; then
            redis-cli --cluster create "${PORTS[@]/#/127.0.0.1:}" --cluster-replicas 0 --cluster-yes >/dev/null
        fi
        for _ in $(seq 1 100); do
            redis-cli -p "${PORTS[0]}" cluster info | grep -q 'cluster_state:ok' && break
            sleep 0.1
        done
    fi
    redis-cli -p "${PORTS[0]}" cluster info | grep -q 'cluster_state:ok' \
        || { echo "the cluster on ports ${PORTS[*]} did not reach state ok" >&2; exit 1; }
    echo "Redis Cluster up on 127.0.0.1:${PORTS[0]}-${PORTS[-1]}"
}

stop() {
    for port in "${PORTS[@]}"; do
        if up "$port"; then redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; fi
    done
    rm -rf "$DIR"
    echo "Redis Cluster stopped"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
