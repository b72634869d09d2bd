"""Fuzzes a running ledger-server from docs/openapi.yaml with schemathesis (OpenAPITests).

usage: openapi_fuzz.py DOCUMENT URL KEY WORK_DIR

Two parameters are designed to make a request wait seconds, so the document is fuzzed without
them (their bounds and answers are tested in ChangeFeedRouteTests): the long poll's `wait`, and
`minPosition` (beyond the ledger's head the server waits five seconds, then answers 503).
Everything else is the document as it is. A request refused for its size (413) is as rejected
as one refused for its content. Exits with schemathesis's status.
"""
import json
import os
import subprocess
import sys

import yaml

document, url, key, work = sys.argv[1:5]
schema = yaml.safe_load(open(document))


waiting = {"wait", "minPosition"}
for item in schema["paths"].values():
    for operation in item.values():
        if isinstance(operation, dict) and "parameters" in operation:
            operation["parameters"] = [p for p in operation["parameters"] if not (isinstance(p, dict) and p.get("name") in waiting)]

fuzzed = os.path.join(work, "openapi.json")
with open(fuzzed, "w") as output:
    json.dump(schema, output)
configuration = os.path.join(work, "schemathesis.toml")
with open(configuration, "w") as output:
    output.write("[checks.negative_data_rejection]\nexpected-statuses = [400, 401, 403, 404, 413, 415]\n")

environment = dict(os.environ, SCHEMATHESIS_HOOKS="schemathesis_hooks", NO_COLOR="1")
environment["PYTHONPATH"] = os.path.dirname(os.path.abspath(__file__))
sys.exit(subprocess.call([
    sys.executable, "-m", "schemathesis.cli", "--config-file", configuration, "run", fuzzed, "--url", url,
    "--header", f"Authorization: Bearer {key}",
    "--checks", "all",
    # The server answers 404 to a method it does not route, as the document says; and a body
    # that fits the App Store routes' schemas is still refused unless Apple signed it.
    "--exclude-checks", "unsupported_method,positive_data_acceptance",
    # It never ends by design; its answers are tested in ChangeFeedRouteTests.
    "--exclude-path", "/v1/changes/stream",
    # Generous bounds: the server shares two cores with the rest of the suite.
    "--max-examples", "25", "--seed", "26", "--workers", "1", "--request-timeout", "60", "--max-response-time", "30",
    "--report-dir", os.path.join(work, "report"),
], env=environment, cwd=work))  # its cache goes in the work directory, not the checkout
