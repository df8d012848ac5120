#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests: `start DIR` runs initdb + pg_ctl in DIR on a Unix
# socket (no TCP port) and prints the DSN to export as TRIPWIRE_TEST_POSTGRES; `stop DIR` stops
# it. As root, the server runs as the `postgres` user (initdb refuses root). Debian 12 keeps the
# binaries in /usr/lib/postgresql/15/bin. `.ci/with-postgres CMD...` wraps a command in one.
set -euo pipefail
cmd=${1:?usage: postgres.sh start|stop DIR}
dir=${2:?usage: postgres.sh start|stop DIR}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$bin" ] || bin=$(dirname "$(command -v pg_ctl)")
as=()
if [ "$(id -u)" = 0 ]; then as=(runuser -u postgres --); fi
case "$cmd" in
start)
    mkdir -p "$dir"
    if [ "$(id -u)" = 0 ]; then chown postgres "$dir"; fi
    if ! "${as[@]}" "$bin/initdb" -D "$dir/data" -U tripwire --auth=trust -E UTF8 \
            >"$dir/initdb.log" 2>&1; then
        tail -3 "$dir/initdb.log" >&2
        echo "postgres.sh: initdb failed (as root, DIR and its parents must be traversable" \
             "by the postgres user)" >&2
        exit 1
    fi
    "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-k $dir -c listen_addresses='' -c max_connections=200" start >/dev/null
    echo "postgresql://tripwire@/postgres?host=$dir"
    ;;
stop)
    "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    ;;
*) echo "usage: postgres.sh start|stop DIR" >&2; exit 2 ;;
esac
