#!/usr/bin/env bash
# Runs every test of the workspace against real databases.
#
# Databases come from QUEUE_TEST_POSTGRES_URL and QUEUE_TEST_MYSQL_URL; when
# unset they default to the local servers below. QUEUE_TEST_REQUIRE_DB=1 (the
# default here) makes a missing or unreachable database a failure, never a
# skip. Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."

export QUEUE_TEST_POSTGRES_URL="${QUEUE_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/queue_test}"
export QUEUE_TEST_MYSQL_URL="${QUEUE_TEST_MYSQL_URL:-mysql://root@127.0.0.1:3306/}"
export QUEUE_TEST_REQUIRE_DB="${QUEUE_TEST_REQUIRE_DB:-1}"

echo "PostgreSQL: ${QUEUE_TEST_POSTGRES_URL}"
echo "MySQL:      ${QUEUE_TEST_MYSQL_URL}"
exec cargo test --workspace --all-features "$@"
