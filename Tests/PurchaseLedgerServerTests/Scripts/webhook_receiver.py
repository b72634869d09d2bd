"""A webhook endpoint for the tests, on loopback: it verifies every delivery with the
`standardwebhooks` package (PyPI; not this project's code) and records it, one JSON line per
request, in RECORD. RULES (JSON, read at each request) says which deliveries to refuse:
{"failPositions": [5]} answers 500 to every attempt at the changes of those positions, and
{"flakyAccounts": {"fl": 2}} to the first two attempts at each change of account fl.
Misbehaving on purpose, for the first N attempts at each change of an account:
{"hangAccounts": {"h": N}} reads the request and never answers (for a minute), before any
other rule;
{"trickleAccounts": {"t": N}} answers 200 with a body of 1,000 bytes sent a byte every
200 ms; {"slowAccounts": {"s": SECONDS}} answers 204 after SECONDS (every attempt).
A request whose body ends before its Content-Length (its sender gone) is recorded as cut, not as
a delivery that does not verify.

usage: webhook_receiver.py SECRET RECORD RULES PORT_FILE [PORT]
"""
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook

secret, record_path, rules_path, port_path = sys.argv[1:5]
webhook = Webhook(secret)
attempts = {}
lock = threading.Lock()


def record(entry):
    with lock, open(record_path, "a") as output:
        output.write(json.dumps(entry) + "\n")


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        try:
            body = self.rfile.read(length)
        except ConnectionError:  # reset rather than closed
            body = b""
        if len(body) < length:
            # The sender closed the connection mid-body (killed, or its attempt cancelled when
            # its lease passed): no delivery, and nobody left to answer.
            record({"cut": f"{len(body)} of {length} bytes"})
            return
        headers = {name.lower(): value for name, value in self.headers.items()}
        try:
            payload = webhook.verify(body, headers)
        except Exception as error:  # a delivery that does not verify is answered 400
            record({"invalid": str(error)})
            self.answer(400)
            return
        with lock:
            attempt = attempts.get(payload["id"], 0) + 1
            attempts[payload["id"]] = attempt
        with open(rules_path) as file:
            rules = json.load(file)
        account = payload["account"]
        refuse = (payload["position"] in rules.get("failPositions", [])
                  or attempt <= rules.get("flakyAccounts", {}).get(account, 0))
        hang = attempt <= rules.get("hangAccounts", {}).get(account, 0)
        trickle = attempt <= rules.get("trickleAccounts", {}).get(account, 0)
        # A hanging attempt is recorded as one (status 0) whatever else the rules say of it.
        status = 0 if hang else 500 if refuse else 200 if trickle else 204
        record({"id": payload["id"], "webhookId": headers["webhook-id"], "account": account,
                "position": payload["position"], "attempt": attempt, "status": status,
                "body": body.decode("utf-8"), "at": time.time()})
        if hang:
            time.sleep(60)
            return
        if trickle:
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            for _ in range(1000):
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(0.2)
            return
        time.sleep(rules.get("slowAccounts", {}).get(account, 0))
        self.answer(status)

    def answer(self, status):
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *arguments):
        pass


ThreadingHTTPServer.allow_reuse_address = True
server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[5]) if len(sys.argv) > 5 else 0), Handler)
with open(port_path + ".tmp", "w") as file:
    file.write(str(server.server_address[1]))
import os  # noqa: E402
os.rename(port_path + ".tmp", port_path)
server.serve_forever()
