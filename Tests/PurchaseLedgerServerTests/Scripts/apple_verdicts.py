#!/usr/bin/env python3
"""Asks Apple's own verifier (the app-store-server-library package, online checks off) for its
verdict on each case of a JSON file the Swift tests write, and prints them as one JSON object:
{"<case name>": "accepted" | "refused: <VerificationStatus>"}.

The file: {"bundleId": ..., "appAppleId": ..., "environment": "Sandbox", "cases": [
  {"name": ..., "kind": "notification" | "transaction", "root": "<base64 DER>", "jws": ...}]}
"""
import base64
import json
import sys

from appstoreserverlibrary.models.Environment import Environment
from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier, VerificationException


def verdict(spec, case):
    verifier = SignedDataVerifier(
        [base64.b64decode(case["root"])], False, Environment(spec["environment"]), spec["bundleId"], spec.get("appAppleId"))
    try:
        if case["kind"] == "notification":
            verifier.verify_and_decode_notification(case["jws"])
        else:
            verifier.verify_and_decode_signed_transaction(case["jws"])
        return "accepted"
    except VerificationException as error:
        return "refused: " + error.status.name
    except Exception as error:  # cattrs and friends, after verification
        return "refused: " + type(error).__name__


def main():
    with open(sys.argv[1]) as file:
        spec = json.load(file)
    print(json.dumps({case["name"]: verdict(spec, case) for case in spec["cases"]}))


if __name__ == "__main__":
    main()
