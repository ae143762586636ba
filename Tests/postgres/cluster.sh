#!/usr/bin/env bash
# A throwaway PostgreSQL 15 cluster for the tests, listening only on a Unix socket in DIR.
#
#   cluster.sh start DIR [OWNER_PID]   initdb into DIR/data (first time only) and start it;
#                                      prints the connection URL. With OWNER_PID, a watcher
#                                      stops the cluster and removes DIR once that process is
#                                      gone, even if it died without stopping it.
#   cluster.sh bouncer DIR             start PgBouncer in transaction mode before the running
#                                      cluster (socket in DIR, port 6432, two server
#                                      connections per database, so clients share them);
#                                      prints its URL.
#   cluster.sh stop DIR [immediate]    stop both (fast shutdown); DIR stays. With immediate,
#                                      no shutdown checkpoint: for a cluster that is removed
#                                      next (its data is never read again).
#
# The server refuses to run as root: as root, it runs as the `postgres` user (runuser), and
# DIR is given to that user. fsync stays on: the tests check durability.
set -euo pipefail

BIN=${POSTGRES_BIN:-/usr/lib/postgresql/15/bin}
PORT=5432  # names the socket file only (DIR/.s.PGSQL.5432): there is no TCP listener
BOUNCER_PORT=6432

usage() { echo "usage: $0 start DIR [OWNER_PID] | bouncer DIR | stop DIR [immediate]" >&2; exit 2; }
[ $# -ge 2 ] || usage
command=$1
dir=$(realpath -m "$2")

as_server() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# The server and the watcher outlive this script: they must not inherit the caller's other
# descriptors (a test process's pipes and sockets), which they would hold open for good.
close_inherited() {
    local fd
    for fd in /proc/$$/fd/*; do
        fd=${fd##*/}
        case $fd in
        0 | 1 | 2 | 255) ;;  # 255: bash reads this script through it
        *) eval "exec $fd>&-" 2>/dev/null || true ;;
        esac
    done
}

case $command in
start)
    close_inherited
    [ -x "$BIN/initdb" ] || { echo "PostgreSQL 15 is not installed ($BIN/initdb is missing): run make test-deps (postgresql-15)" >&2; exit 1; }
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres: "$dir"
    if [ ! -s "$dir/data/PG_VERSION" ]; then
        as_server "$BIN/initdb" -D "$dir/data" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
            || { cat "$dir/initdb.log" >&2; exit 1; }
    fi
    as_server "$BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-c listen_addresses='' -c unix_socket_directories='$dir' -c port=$PORT -c fsync=on -c max_connections=300" \
        start >"$dir/pg_ctl.log" 2>&1 \
        || { cat "$dir/pg_ctl.log" "$dir/server.log" >&2; exit 1; }
    if [ $# -ge 3 ]; then
        owner=$3
        script=$(realpath "$0")
        setsid bash -c "while kill -0 $owner 2>/dev/null; do sleep 1; done; '$script' stop '$dir' immediate; rm -rf '$dir'" \
            </dev/null >/dev/null 2>&1 &
    fi
    echo "postgresql:///postgres?host=$dir&port=$PORT&user=postgres"
    ;;
bouncer)
    close_inherited
    command -v pgbouncer >/dev/null || { echo "PgBouncer is not installed: run make test-deps (pgbouncer)" >&2; exit 1; }
    cat >"$dir/pgbouncer.ini" <<INI
[databases]
* = host=$dir port=$PORT
[pgbouncer]
listen_addr =
unix_socket_dir = $dir
listen_port = $BOUNCER_PORT
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = transaction
default_pool_size = 2
max_client_conn = 200
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI
    echo '"postgres" ""' >"$dir/userlist.txt"
    [ "$(id -u)" = 0 ] && chown postgres: "$dir/pgbouncer.ini" "$dir/userlist.txt"
    as_server pgbouncer -d -q "$dir/pgbouncer.ini" || { cat "$dir/pgbouncer.log" >&2; exit 1; }
    echo "postgresql:///postgres?host=$dir&port=$BOUNCER_PORT&user=postgres"
    ;;
stop)
    if [ -s "$dir/pgbouncer.pid" ]; then
        kill "$(cat "$dir/pgbouncer.pid")" 2>/dev/null || true
        rm -f "$dir/pgbouncer.pid"
    fi
    if [ -s "$dir/data/postmaster.pid" ]; then
        as_server "$BIN/pg_ctl" -D "$dir/data" -m "${3:-fast}" -w -t 60 stop >/dev/null
    fi
    ;;
*)
    usage
    ;;
esac
