# Sourced by tools/test (and tools/bench): a throwaway PostgreSQL cluster for the PostgreSQL
# backend's tests. `start_throwaway_postgres` installs Debian's postgresql when it is missing,
# creates a cluster in a temporary directory, starts it on a free loopback port (trust
# authentication: nothing but this machine reaches it), creates the database `ledger`, and
# exports PURCHASE_LEDGER_TEST_POSTGRES with its URL. `stop_throwaway_postgres` stops it and
# removes the directory. When PostgreSQL cannot be installed or started, it says so and
# returns 1; the caller runs the rest of the suite without it.
#
# `start_throwaway_postgres DIR` keeps the cluster in DIR instead (created on the first call,
# reused after, left in place by `stop_throwaway_postgres`): tools/bench keeps its fixtures so.

postgres_bin() {
    local dir
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
    [ -n "$dir" ] && [ -x "$dir/initdb" ] && echo "$dir"
}

ensure_postgres() {
    if [ -n "$(postgres_bin)" ]; then return 0; fi
    echo "PostgreSQL is missing: installing Debian's postgresql with apt-get" >&2
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || { echo "not root and no sudo: cannot install PostgreSQL" >&2; return 1; }
        sudo="sudo"
    fi
    export DEBIAN_FRONTEND=noninteractive
    # Debian's package creates and starts a default cluster; this suite uses its own.
    $sudo apt-get install -y --no-install-recommends postgresql >/dev/null 2>&1 \
        || { $sudo apt-get update >/dev/null && $sudo apt-get install -y --no-install-recommends postgresql >/dev/null; } \
        || return 1
    [ -n "$(postgres_bin)" ]
}

# Runs a command as the cluster's owner: PostgreSQL refuses to run as root.
as_postgres_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

start_throwaway_postgres() {
    ensure_postgres || { echo "PostgreSQL unavailable: its suite is skipped" >&2; return 1; }
    local bin port
    bin=$(postgres_bin)
    if [ -n "${1:-}" ]; then
        PURCHASE_LEDGER_PG_DIR=$1
        PURCHASE_LEDGER_PG_KEEP=1
        mkdir -p "$PURCHASE_LEDGER_PG_DIR"
    else
        PURCHASE_LEDGER_PG_DIR=$(mktemp -d /tmp/purchase-ledger-pg.XXXXXX)
        PURCHASE_LEDGER_PG_KEEP=
    fi
    [ "$(id -u)" -eq 0 ] && chown postgres "$PURCHASE_LEDGER_PG_DIR"
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    if [ ! -f "$PURCHASE_LEDGER_PG_DIR/data/PG_VERSION" ]; then
        as_postgres_owner "$bin/initdb" -D "$PURCHASE_LEDGER_PG_DIR/data" -U ledger --auth=trust -E UTF8 >/dev/null \
            || { echo "initdb failed: the PostgreSQL suite is skipped" >&2; return 1; }
    fi
    as_postgres_owner "$bin/pg_ctl" -D "$PURCHASE_LEDGER_PG_DIR/data" -l "$PURCHASE_LEDGER_PG_DIR/log" -w \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $PURCHASE_LEDGER_PG_DIR -c max_connections=300" start >/dev/null \
        || { echo "PostgreSQL did not start (see $PURCHASE_LEDGER_PG_DIR/log): its suite is skipped" >&2; return 1; }
    if ! as_postgres_owner "$bin/psql" -h 127.0.0.1 -p "$port" -U ledger -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'ledger'" | grep -q 1 \
        && ! as_postgres_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U ledger ledger; then
        echo "creating the database failed: the PostgreSQL suite is skipped" >&2
        stop_throwaway_postgres
        return 1
    fi
    export PURCHASE_LEDGER_TEST_POSTGRES="postgres://ledger@127.0.0.1:$port/ledger"
    echo "throwaway PostgreSQL at $PURCHASE_LEDGER_TEST_POSTGRES" >&2
}

stop_throwaway_postgres() {
    [ -n "${PURCHASE_LEDGER_PG_DIR:-}" ] || return 0
    as_postgres_owner "$(postgres_bin)/pg_ctl" -D "$PURCHASE_LEDGER_PG_DIR/data" -m fast stop >/dev/null 2>&1 || true
    [ -n "${PURCHASE_LEDGER_PG_KEEP:-}" ] || rm -rf "$PURCHASE_LEDGER_PG_DIR"
    unset PURCHASE_LEDGER_PG_DIR PURCHASE_LEDGER_PG_KEEP PURCHASE_LEDGER_TEST_POSTGRES
}
