#!/usr/bin/env bash
# Builds local PostgreSQL 15 and MariaDB test images from Debian's packages,
# for testcontainers where no image registry is reachable: debootstrap a
# minimal bookworm, install the server, add an entrypoint, `docker import`.
# An image is rebuilt only when its recipe (this script's package list and
# the entrypoint file) changed: the recipe's hash is kept as an image label.
#
#   scripts/build-test-images.sh            # both
#   scripts/build-test-images.sh postgres   # one
#
# Then point the test harness at them:
#   QUEUE_TEST_POSTGRES_IMAGE=queue-test/postgres:15
#   QUEUE_TEST_MYSQL_IMAGE=queue-test/mariadb:10.11
set -euo pipefail
cd "$(dirname "$0")"

MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
POSTGRES_IMAGE="${QUEUE_TEST_POSTGRES_IMAGE:-queue-test/postgres:15}"
MYSQL_IMAGE="${QUEUE_TEST_MYSQL_IMAGE:-queue-test/mariadb:10.11}"

build() { # build IMAGE PACKAGES ENTRYPOINT PORT
    local image=$1 packages=$2 entrypoint=$3 port=$4
    local recipe
    recipe=$( (echo "$packages $port"; cat "test-images/$entrypoint") | sha256sum | cut -c1-16)
    if [ "$(docker image inspect -f '{{index .Config.Labels "queue.recipe"}}' "$image" 2>/dev/null)" = "$recipe" ]; then
        echo "$image: present with recipe $recipe, kept"
        return
    fi
    command -v debootstrap >/dev/null || {
        echo "debootstrap is missing: apt-get install -y debootstrap" >&2
        exit 1
    }
    local root
    root=$(mktemp -d)
    trap 'rm -rf "$root"' RETURN
    echo "$image: debootstrap bookworm with $packages"
    debootstrap --variant=minbase --include="$packages" bookworm "$root" "$MIRROR" >/dev/null
    install -m 0755 "test-images/$entrypoint" "$root/usr/local/bin/entrypoint"
    # Debian starts nothing inside a chroot; no service is running to stop.
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb \
        "$root"/var/lib/postgresql/15/main "$root"/var/lib/mysql/*
    tar -C "$root" -c . | docker import \
        --change 'ENTRYPOINT ["/usr/local/bin/entrypoint"]' \
        --change "EXPOSE $port" \
        --change 'ENV LANG=C.UTF-8' \
        --change "LABEL queue.recipe=$recipe" \
        - "$image" >/dev/null
    echo "$image: built"
}

want=${1:-all}
if [ "$want" = all ] || [ "$want" = postgres ]; then
    build "$POSTGRES_IMAGE" postgresql-15 postgres-entrypoint.sh 5432
fi
if [ "$want" = all ] || [ "$want" = mysql ]; then
    build "$MYSQL_IMAGE" mariadb-server mariadb-entrypoint.sh 3306
fi
