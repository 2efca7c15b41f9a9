#!/usr/bin/env bash
# Runs every test of the workspace against real databases, creating what
# they need (the test database, one schema or database per test).
#
# Databases come from QUEUE_TEST_POSTGRES_URL, QUEUE_TEST_MYSQL_URL,
# QUEUE_TEST_REDIS_URL, QUEUE_TEST_REDIS_CLUSTER_URL, QUEUE_TEST_PGBOUNCER_URL
# and QUEUE_TEST_PGBOUNCER_SESSION_URL; when unset they default to the local
# servers below (the Redis Cluster is started by scripts/redis-cluster.sh,
# PgBouncer by scripts/pgbouncer.sh, the Galera nodes of
# QUEUE_TEST_GALERA_URLS by scripts/galera.sh; the failover test's two
# clusters by scripts/pg-ha.sh, when QUEUE_TEST_PG_HA=1; the Redis failover
# test's cluster by scripts/redis-ha.sh, when QUEUE_TEST_REDIS_HA=1). Extra arguments go to
# `cargo test`.
#
# The restart tests stop and start the database servers, and the browser
# tests need Chromium, so `cargo test` lists them as ignored; without extra
# arguments this script then runs the browser tests where `chromium` and
# `chromedriver` are installed, and the restart tests
# with the commands in QUEUE_TEST_{POSTGRES,MYSQL}_{STOP,START} (and
# QUEUE_TEST_POSTGRES_CRASH, a stop without a checkpoint), which it
# sets itself for servers on this machine that it knows how to restart
# (Debian's pg_ctlcluster; mariadbd through start-stop-daemon).
set -euo pipefail
cd "$(dirname "$0")/.."

export QUEUE_TEST_POSTGRES_URL="${QUEUE_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/queue_test}"
export QUEUE_TEST_MYSQL_URL="${QUEUE_TEST_MYSQL_URL:-mysql://root@127.0.0.1:3306/}"
export QUEUE_TEST_REDIS_URL="${QUEUE_TEST_REDIS_URL:-redis://127.0.0.1:6379}"
# The Redis Cluster tests: a local three-master cluster unless one is named.
if [ -z "${QUEUE_TEST_REDIS_CLUSTER_URL:-}" ]; then
    export QUEUE_TEST_REDIS_CLUSTER_URL=redis://127.0.0.1:7001
    scripts/redis-cluster.sh start || echo "no local Redis Cluster: the queue-redis cluster tests will fail naming it"
fi

# The PgBouncer tests (queue-postgres/tests/pgbouncer*.rs,
# queue-worker/tests/pgbouncer_transaction.rs): two local instances in front
# of the local PostgreSQL unless they are named. `cargo test` runs test
# binaries one at a time, as these need (docs/high-availability.md).
if [ -z "${QUEUE_TEST_PGBOUNCER_URL:-}" ] || [ -z "${QUEUE_TEST_PGBOUNCER_SESSION_URL:-}" ]; then
    export QUEUE_TEST_PGBOUNCER_URL="${QUEUE_TEST_PGBOUNCER_URL:-postgres://postgres@127.0.0.1:6432/queue_test}"
    export QUEUE_TEST_PGBOUNCER_SESSION_URL="${QUEUE_TEST_PGBOUNCER_SESSION_URL:-postgres://postgres@127.0.0.1:6433/queue_test}"
    scripts/pgbouncer.sh start || echo "no local PgBouncer: the queue-postgres PgBouncer tests will fail naming it"
fi

# The Galera tests (queue-mysql/tests/galera.rs, galera_node_kill.rs): a local three-node
# cluster unless its nodes are named.
# It is stopped again after `cargo test`: its nodes are mariadbd processes
# too, and the restart commands below find the test server's by that name.
local_galera=
if [ -z "${QUEUE_TEST_GALERA_URLS:-}" ]; then
    export QUEUE_TEST_GALERA_URLS="mysql://root@127.0.0.1:3311/,mysql://root@127.0.0.1:3312/,mysql://root@127.0.0.1:3313/"
    local_galera=1
    scripts/galera.sh start || echo "no local Galera cluster: the queue-mysql Galera tests will fail naming it"
fi

# The failover test (queue-postgres/tests/failover.rs) builds a primary and a
# standby of its own with scripts/pg-ha.sh, which needs Debian's
# postgresql-common and root: on by default where both are there.
if [ -z "${QUEUE_TEST_PG_HA:-}" ] && command -v pg_createcluster >/dev/null && [ "$(id -u)" = 0 ]; then
    export QUEUE_TEST_PG_HA=1
fi
# The Redis failover test (queue-redis/tests/failover.rs) builds a six-node
# cluster of its own with scripts/redis-ha.sh (127.0.0.1:7011-7016).
if [ -z "${QUEUE_TEST_REDIS_HA:-}" ] && command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
    export QUEUE_TEST_REDIS_HA=1
fi

is_local() { [[ $1 =~ ://([^@/]*@)?(127\.0\.0\.1|localhost)([:/?]|$) ]]; }

if [ -z "${QUEUE_TEST_POSTGRES_STOP:-}" ] && is_local "$QUEUE_TEST_POSTGRES_URL" \
    && command -v pg_ctlcluster >/dev/null && [ -d /etc/postgresql ]; then
    pg_version=$(ls /etc/postgresql | sort -V | tail -n 1)
    export QUEUE_TEST_POSTGRES_STOP="pg_ctlcluster --skip-systemctl-redirect $pg_version main stop -m fast"
    export QUEUE_TEST_POSTGRES_START="pg_ctlcluster --skip-systemctl-redirect $pg_version main start"
    # A crash rather than a shutdown: no checkpoint, unflushed WAL lost.
    export QUEUE_TEST_POSTGRES_CRASH="pg_ctlcluster --skip-systemctl-redirect $pg_version main stop -m immediate"
fi
if [ -z "${QUEUE_TEST_MYSQL_STOP:-}" ] && is_local "$QUEUE_TEST_MYSQL_URL" \
    && command -v mariadbd >/dev/null && command -v start-stop-daemon >/dev/null; then
    # `mariadb-admin shutdown` returns before mariadbd has exited: wait for it,
    # or the start below is a no-op and the server stays down.
    export QUEUE_TEST_MYSQL_STOP='mariadb-admin -h 127.0.0.1 -u root shutdown; for i in $(seq 1 120); do start-stop-daemon --status --exec "$(command -v mariadbd)" || exit 0; sleep 0.5; done; exit 1'
    export QUEUE_TEST_MYSQL_START='start-stop-daemon --start --oknodo --background --exec "$(command -v mariadbd)" -- --user=mysql; for i in $(seq 1 120); do mariadb-admin -h 127.0.0.1 -u root ping >/dev/null 2>&1 && exit 0; sleep 0.5; done; exit 1'
fi

echo "PostgreSQL: ${QUEUE_TEST_POSTGRES_URL}"
echo "MySQL:      ${QUEUE_TEST_MYSQL_URL}"
echo "Redis:      ${QUEUE_TEST_REDIS_URL} (cluster: ${QUEUE_TEST_REDIS_CLUSTER_URL})"
echo "PgBouncer:  ${QUEUE_TEST_PGBOUNCER_URL} (session: ${QUEUE_TEST_PGBOUNCER_SESSION_URL})"
echo "Galera:     ${QUEUE_TEST_GALERA_URLS}"
echo "Failover:   QUEUE_TEST_PG_HA=${QUEUE_TEST_PG_HA:-unset} (scripts/pg-ha.sh, ports 5441 and 5442)"
echo "            QUEUE_TEST_REDIS_HA=${QUEUE_TEST_REDIS_HA:-unset} (scripts/redis-ha.sh, ports 7011-7016)"
tests_status=0
# --no-fail-fast: one failing test binary does not hide the other binaries'
# results; cargo lists every failed binary at the end.
cargo test --workspace --all-features --no-fail-fast "$@" || tests_status=$?
if [ -n "$local_galera" ]; then
    scripts/galera.sh stop
fi
[ "$tests_status" -eq 0 ] || exit "$tests_status"

[ $# -eq 0 ] || exit 0

# The dashboard's browser tests are ignored too: run them where Chromium is.
if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
    echo "browser tests: chromium $(chromium --version 2>/dev/null | awk '{print $2}')"
    cargo test -p queue-cli --all-features --test browser -- --ignored
else
    echo "browser tests not run (listed as ignored above): apt-get install chromium chromium-driver"
fi

# The chaos runs (queue-chaos): kills, freezes and cuts on every backend;
# with the restart commands, also a server restart mid-run.
chaos_tests=(postgres_survives_kills_freezes_and_cuts_in_plain_mode mysql_survives_kills_freezes_and_cuts_in_plain_mode sqlite_survives_kills_and_freezes_in_both_modes)
restart_tests=()
if [ -n "${QUEUE_TEST_POSTGRES_STOP:-}" ]; then
    restart_tests+=(postgres_restart_mid_run_loses_nothing)
    if [ -n "${QUEUE_TEST_POSTGRES_CRASH:-}" ]; then
        restart_tests+=(postgres_crash_mid_run_with_async_claims_loses_nothing)
    fi
    chaos_tests+=(postgres_survives_the_ci_schedule_transactionally)
fi
if [ -n "${QUEUE_TEST_MYSQL_STOP:-}" ]; then
    restart_tests+=(mysql_restart_mid_run_loses_nothing)
    chaos_tests+=(mysql_survives_the_ci_schedule_transactionally)
fi
if [ "${QUEUE_TEST_PG_HA:-}" = 1 ]; then
    chaos_tests+=(postgres_survives_a_failover_to_a_synchronous_standby)
fi
echo "chaos tests: ${chaos_tests[*]}"
cargo test -p queue-chaos --all-features --test chaos -- --ignored --exact --test-threads=1 --nocapture "${chaos_tests[@]}"
if [ ${#restart_tests[@]} -eq 0 ]; then
    echo "restart tests and restarting chaos runs not run (listed as ignored above): no QUEUE_TEST_*_STOP/START commands and no local server this script can restart"
    exit 0
fi
echo "restart tests: ${restart_tests[*]}"
cargo test -p queue-worker --all-features --test restart -- --ignored --exact "${restart_tests[@]}"
