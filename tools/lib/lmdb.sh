# Sourced by tools/demo and tools/test: makes sure Debian's liblmdb-dev (and pkg-config, which
# SwiftPM uses to find it) are installed, installing them with apt-get when they are missing.
ensure_lmdb() {
    if [ -f /usr/include/lmdb.h ] && command -v pkg-config >/dev/null 2>&1 && pkg-config --exists lmdb; then
        return 0
    fi
    echo "liblmdb-dev is missing: installing it with apt-get" >&2
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then
            sudo="sudo"
        else
            echo "error: not root and no sudo; install liblmdb-dev and pkg-config, then run again" >&2
            return 1
        fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get install -y --no-install-recommends liblmdb-dev pkg-config >/dev/null 2>&1 \
        || { $sudo apt-get update >/dev/null && $sudo apt-get install -y --no-install-recommends liblmdb-dev pkg-config >/dev/null; }
    pkg-config --exists lmdb
}
