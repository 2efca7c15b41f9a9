#!/bin/sh
# Entrypoint of the local PostgreSQL test image: initialise the data
# directory on first start (trust auth from anywhere: a test image only),
# then run postgres in the foreground, forwarding our arguments
# (e.g. `-c fsync=off`).
set -eu
BIN=/usr/lib/postgresql/15/bin
DATA=/var/lib/postgresql/data
mkdir -p "$DATA" /var/run/postgresql
chown postgres:postgres "$DATA" /var/run/postgresql
if [ ! -s "$DATA/PG_VERSION" ]; then
    runuser -u postgres -- "$BIN/initdb" -D "$DATA" --username=postgres \
        --auth=trust --encoding=UTF8 --locale=C.UTF-8 >/dev/null
    printf 'host all all 0.0.0.0/0 trust\nhost all all ::/0 trust\n' >>"$DATA/pg_hba.conf"
fi
exec runuser -u postgres -- "$BIN/postgres" -D "$DATA" -c listen_addresses='*' "$@"
