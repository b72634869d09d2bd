# Sourced by tools/test: Apple's own App Store verifier (the Python `app-store-server-library`,
# from PyPI), `standardwebhooks` (the webhook tests' receiver verifies with it) and
# `schemathesis` (OpenAPITests fuzzes the server from docs/openapi.yaml with it), in a
# virtual environment under .build/, for the tests that compare the server's
# verdicts with Apple's. Exports PURCHASE_LEDGER_APPLE_VERIFIER_PYTHON (that environment's
# python) and PURCHASE_LEDGER_REQUIRE_APPLE_VERIFIER=1, so that those tests fail, rather than
# skip, when the library is missing.
ensure_apple_verifier() {
    local venv=.build/apple-verifier
    if ! "$venv/bin/python" -c "import appstoreserverlibrary, standardwebhooks, schemathesis" >/dev/null 2>&1; then
        echo "installing Apple's app-store-server-library, standardwebhooks and schemathesis (pip) into $venv" >&2
        if ! python3 -m venv "$venv" >/dev/null 2>&1; then
            # Debian's python3 keeps venv in a package of its own.
            export DEBIAN_FRONTEND=noninteractive
            apt-get install -y --no-install-recommends python3-venv >/dev/null 2>&1 \
                || { apt-get update >/dev/null && apt-get install -y --no-install-recommends python3-venv >/dev/null; }
            python3 -m venv "$venv" >/dev/null
        fi
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check app-store-server-library standardwebhooks schemathesis >&2
    fi
    export PURCHASE_LEDGER_APPLE_VERIFIER_PYTHON="$PWD/$venv/bin/python"
    export PURCHASE_LEDGER_REQUIRE_APPLE_VERIFIER=1
}
