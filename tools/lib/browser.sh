# Sourced by tools/test: Debian's Chromium and its driver, and Selenium (PyPI) in tools/test's
# virtual environment (tools/lib/apple-verifier.sh), for DashboardBrowserTests, which reads the
# server's /dashboard in a real browser. Installs them when missing; where that cannot be done
# (no apt, no network), says so and leaves the test to skip. When they are there, exports
# PURCHASE_LEDGER_REQUIRE_BROWSER=1, so that the test fails rather than skips.
ensure_browser() {
    local venv=.build/apple-verifier
    if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
        echo "installing Chromium and chromedriver (apt) for the dashboard's browser test" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y --no-install-recommends chromium chromium-driver >/dev/null 2>&1 \
            || { apt-get update >/dev/null 2>&1 && apt-get install -y --no-install-recommends chromium chromium-driver >/dev/null 2>&1; } \
            || true
    fi
    if ! "$venv/bin/python" -c "import selenium" >/dev/null 2>&1; then
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check selenium >&2 || true
    fi
    if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 \
        && "$venv/bin/python" -c "import selenium" >/dev/null 2>&1; then
        export PURCHASE_LEDGER_REQUIRE_BROWSER=1
        PURCHASE_LEDGER_CHROMIUM="$(command -v chromium)"
        PURCHASE_LEDGER_CHROMEDRIVER="$(command -v chromedriver)"
        export PURCHASE_LEDGER_CHROMIUM PURCHASE_LEDGER_CHROMEDRIVER
    else
        echo "the dashboard's browser test will be skipped: Chromium, chromedriver or Selenium could not be installed" >&2
    fi
}
