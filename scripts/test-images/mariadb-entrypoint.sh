#!/bin/sh
# Entrypoint of the local MariaDB test image: initialise the data directory
# on first start with root reachable from anywhere without a password (a
# test image only), then run mariadbd in the foreground (Debian leaves its
# error log on stderr, where the "ready for connections" line is awaited),
# forwarding our arguments.
set -eu
mkdir -p /run/mysqld /var/lib/mysql
# The data directory may be a fresh tmpfs owned by root.
chown mysql:mysql /run/mysqld /var/lib/mysql
if [ ! -d /var/lib/mysql/mysql ]; then
    mariadb-install-db --user=mysql --datadir=/var/lib/mysql \
        --auth-root-authentication-method=normal --skip-test-db >/dev/null
    mariadbd --user=mysql --bootstrap --skip-grant-tables=0 <<'SQL'
FLUSH PRIVILEGES;
CREATE USER IF NOT EXISTS 'root'@'%' IDENTIFIED BY '';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION;
SQL
fi
exec mariadbd --user=mysql --bind-address=0.0.0.0 --skip-name-resolve \
    --character-set-server=utf8mb4 "$@"
