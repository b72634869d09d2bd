#!/usr/bin/env python3
"""Append latency of a running ledger-server, with and without hostile readers.

Builds a fixture ledger with `ledger import` (unless WORKDIR/ledger holds one already), starts
`ledger-server` on it (durable, default limits: `limits.expensiveReads` 2) on a free loopback
port, and measures single-event `POST /v1/events` appends (a new `paymentAdded` for a fresh
account each, one persistent HTTP/1.1 connection, sequential):

  quiet    the appends alone;
  hostile  the same number of appends while other processes read as badly as they can:
           2 clients looping GET /v1/accounts/longaccount?timeline=true,
           3 clients following GET /v1/changes page by page (limit 1000) from after=0,
             back to 0 at the end,
           3 clients reading pages at random deep cursors (behind the server's memory window),
           50 server-sent-event streams (GET /v1/changes/stream?after=0) read continuously,
           2 clients opening a timeline request and hanging up after 0.2 s, repeatedly.
           A reader answered 503 busy retries at once (Retry-After is ignored).

Prints a Markdown table (p50, p90, p99, max of each phase, hostile p99 / quiet p99, the
readers' answers by status) and, with --json, writes the figures. The server and every reader
are stopped at the end, whatever happens.

Standard library only.

  python3 Benchmarks/peers/hostile-readers.py \\
      --ledger-binary .build/release/ledger --server-binary .build/release/ledger-server \\
      --workdir /tmp/hostile-bench [--events 200000] [--long-account-renewals 10000] \\
      [--appends 2000] [--json out.json]
"""

import argparse
import collections
import datetime
import http.client
import json
import math
import multiprocessing
import os
import platform
import random
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time

HOST = "127.0.0.1"
APPEND_TIMEOUT = 30.0      # seconds, one append
READER_TIMEOUT = 120.0     # seconds, one reader request (a timeline of a long account is slow)
LIMIT = 1000               # feed page size

# The catalog of Samples/word-game (the products the fixture and the appends use).
CATALOG = {"products": [
    {"id": "com.example.tenhints", "type": "consumable", "grants": {"hints": 10}},
    {"id": "com.example.hundredhints", "type": "consumable", "grants": {"hints": 100}},
    {"id": "com.example.hardwords", "type": "nonConsumable"},
    {"id": "com.example.ioswords", "type": "nonConsumable"},
    {"id": "com.example.pro.month", "type": "autoRenewable", "group": "pro"},
]}

KEYS = {
    "writer": "bench-writer-key-0123456789abcdef0123456789",
    "reader": "bench-reader-key-0123456789abcdef0123456789",
    "feed": "bench-feed-key-0123456789abcdef012345678901",
}


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def rfc3339(dt):
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------------------------------------
# Fixture

def generate_events(path, n_events, renewals):
    """n_events device events over many accounts (3 per account: added, purchased, finished),
    with `longaccount`'s renewals spread evenly among them."""
    base = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    # Renewals are daily and end a month ago: store reports may not be dated in the future.
    today = datetime.datetime.now(datetime.timezone.utc).replace(hour=0, minute=0, second=0,
                                                                 microsecond=0)
    first_day = today - datetime.timedelta(days=renewals + 30)
    every = (n_events / renewals) if renewals else None
    written = 0
    next_renewal = 0

    def renewal(i):
        start = first_day + datetime.timedelta(days=i)
        ev = {"id": f"longaccount/renewal/{i}", "type": "storeTransaction",
              "account": "longaccount", "at": rfc3339(start), "transaction": f"L{i}",
              "originalTransaction": "L0", "product": "com.example.pro.month", "quantity": 1,
              "purchasedAt": rfc3339(start),
              "expiresAt": rfc3339(start + datetime.timedelta(days=1)),
              "ownership": "PURCHASED", "environment": "Production", "price": 4990,
              "currency": "USD", "storefront": "USA",
              "originalPurchasedAt": rfc3339(first_day),
              "transactionReason": "PURCHASE" if i == 0 else "RENEWAL",
              "source": "benchmark fixture"}
        return json.dumps(ev, separators=(",", ":"))

    with open(path, "w") as f:
        k = 0
        while written < n_events:
            while next_renewal < renewals and (next_renewal * every) <= written:
                f.write(renewal(next_renewal) + "\n")
                next_renewal += 1
            acct = f"user{k:07d}"
            at = rfc3339(base + datetime.timedelta(seconds=17 * k))
            product = "com.example.hardwords" if k % 10 == 0 else (
                "com.example.hundredhints" if k % 7 == 0 else "com.example.tenhints")
            evs = [
                {"id": f"fx/{k}/a", "type": "paymentAdded", "account": acct, "at": at,
                 "payment": "p1", "product": product},
                {"id": f"fx/{k}/b", "type": "transactionUpdated", "account": acct, "at": at,
                 "payment": "p1", "state": "purchased", "transaction": f"T{k}"},
                {"id": f"fx/{k}/c", "type": "transactionFinished", "account": acct, "at": at,
                 "payment": "p1"},
            ]
            for ev in evs:
                if written >= n_events:
                    break
                f.write(json.dumps(ev, separators=(",", ":")) + "\n")
                written += 1
            k += 1
        while next_renewal < renewals:
            f.write(renewal(next_renewal) + "\n")
            next_renewal += 1
    return written + renewals


def build_fixture(args, workdir):
    ledger = os.path.join(workdir, "ledger")
    catalog = os.path.join(workdir, "catalog.json")
    marker = os.path.join(workdir, "fixture.json")
    want = {"events": args.events, "longAccountRenewals": args.long_account_renewals}
    if os.path.exists(marker) and os.path.isdir(ledger):
        have = json.load(open(marker))
        if {k: have.get(k) for k in want} != want:
            sys.exit(f"{workdir} holds a fixture of {have}, not {want}: use another --workdir")
        log(f"reusing the fixture ledger {ledger} ({have})")
        return ledger, catalog, have
    with open(catalog, "w") as f:
        json.dump(CATALOG, f, indent=1)
    events = os.path.join(workdir, "events.jsonl")
    total = generate_events(events, args.events, args.long_account_renewals)
    log(f"importing {total} events into {ledger} (ledger import)")
    t = time.monotonic()
    out = subprocess.run([args.ledger_binary, "import", "--catalog", catalog, "--json", ledger,
                          events], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if out.returncode != 0:
        sys.exit(f"ledger import failed ({out.returncode}): {out.stderr[-2000:]}")
    try:
        summary = json.loads(out.stdout)
    except ValueError:
        summary = {"output": out.stdout[-2000:]}
    took = time.monotonic() - t
    log(f"imported in {took:.1f} s: {summary}")
    if summary.get("rejected"):
        sys.exit(f"the fixture import rejected events: {summary}")
    have = dict(want, lines=total, importSeconds=round(took, 1), importSummary=summary)
    with open(marker, "w") as f:
        json.dump(have, f, indent=1)
    os.remove(events)
    return ledger, catalog, have


# ---------------------------------------------------------------------------------------------
# Server

def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def die_with_parent():
    """preexec_fn: a new session (its own process group), and SIGTERM if this script dies."""
    os.setsid()
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def health(port, timeout=5.0):
    c = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        c.request("GET", "/v1/health")
        r = c.getresponse()
        body = r.read()
        return r.status, json.loads(body) if r.status == 200 else body
    finally:
        c.close()


def start_server(args, workdir, ledger, catalog):
    port = free_port()
    config = {
        "ledger": ledger,
        "catalog": catalog,
        "bind": {"host": HOST, "port": port},
        "keys": [
            {"name": "writer", "key": KEYS["writer"], "scopes": ["events:write"]},
            {"name": "reader", "key": KEYS["reader"], "scopes": ["accounts:read"]},
            {"name": "feed", "key": KEYS["feed"], "scopes": ["changes:read"]},
        ],
    }
    path = os.path.join(workdir, "server-config.json")
    with open(path, "w") as f:
        json.dump(config, f, indent=1)
    logf = open(os.path.join(workdir, "server.log"), "ab")
    logf.write(f"\n==== {time.ctime()} hostile-readers.py\n".encode())
    logf.flush()
    proc = subprocess.Popen([args.server_binary, "--config", path], stdin=subprocess.DEVNULL,
                            stdout=logf, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
    logf.close()
    deadline = time.monotonic() + args.startup_timeout
    t = time.monotonic()
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"ledger-server exited {proc.returncode} while starting; "
                               f"see {workdir}/server.log")
        try:
            st, body = health(port, timeout=2)
            if st == 200:
                log(f"server up on port {port} in {time.monotonic() - t:.1f} s: {body}")
                return proc, port
        except (OSError, http.client.HTTPException, ValueError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"ledger-server not healthy after {args.startup_timeout} s")
        time.sleep(0.2)


def stop_server(proc):
    if proc is None or proc.poll() is not None:
        return None if proc is None else proc.returncode
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        return proc.wait(60)
    except subprocess.TimeoutExpired:
        log("ledger-server did not stop within 60 s of SIGTERM: SIGKILL")
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return proc.wait(10)


def rss_mib(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


# ---------------------------------------------------------------------------------------------
# Appends

def percentile(sorted_values, p):
    """Nearest rank."""
    if not sorted_values:
        return None
    k = max(0, math.ceil(p / 100 * len(sorted_values)) - 1)
    return sorted_values[min(k, len(sorted_values) - 1)]


def run_appends(port, count, tag):
    headers = {"Authorization": "Bearer " + KEYS["writer"], "Content-Type": "application/json"}
    latencies, failures, slow = [], [], []
    conn = None
    t_phase = time.perf_counter()
    for i in range(count):
        ev = {"id": f"{tag}/{i}", "type": "paymentAdded", "account": f"{tag}/{i}",
              "at": rfc3339(datetime.datetime.now(datetime.timezone.utc)), "payment": "p1",
              "product": "com.example.tenhints"}
        body = json.dumps(ev).encode()
        if conn is None:
            conn = http.client.HTTPConnection(HOST, port, timeout=APPEND_TIMEOUT)
            try:
                conn.connect()
            except OSError as e:
                failures.append({"append": i, "error": f"connect: {type(e).__name__}: {e}",
                                 "seconds": 0.0})
                conn = None
                time.sleep(0.1)
                continue
        t0 = time.perf_counter()
        try:
            conn.request("POST", "/v1/events", body=body, headers=headers)
            r = conn.getresponse()
            data = r.read()
            dt = time.perf_counter() - t0
        except (OSError, http.client.HTTPException) as e:
            dt = time.perf_counter() - t0
            failures.append({"append": i, "error": f"{type(e).__name__}: {e}",
                             "seconds": round(dt, 3), "atSecond": round(t0 - t_phase, 2)})
            if dt >= 1:
                slow.append({"append": i, "seconds": round(dt, 3),
                             "atSecond": round(t0 - t_phase, 2)})
            conn.close()
            conn = None
            continue
        latencies.append(dt)
        if dt >= 1:
            slow.append({"append": i, "seconds": round(dt, 3), "atSecond": round(t0 - t_phase, 2)})
        outcome = None
        try:
            outcome = json.loads(data)[0].get("outcome")
        except (ValueError, LookupError, AttributeError):
            pass
        if r.status != 200 or outcome != "appended":
            failures.append({"append": i, "status": r.status, "outcome": outcome,
                             "body": data[:200].decode("utf-8", "replace"),
                             "seconds": round(dt, 3)})
    if conn is not None:
        conn.close()
    wall = time.perf_counter() - t_phase
    s = sorted(latencies)
    ms = lambda v: None if v is None else round(v * 1000, 2)
    return {
        "appends": count, "answered": len(latencies),
        "failed": len(failures), "failures": failures[:50],
        "timeouts": sum(1 for f in failures if "timed out" in f.get("error", "")),
        "p50_ms": ms(percentile(s, 50)), "p90_ms": ms(percentile(s, 90)),
        "p99_ms": ms(percentile(s, 99)), "max_ms": ms(s[-1] if s else None),
        "mean_ms": ms(sum(s) / len(s) if s else None),
        "over_1s": slow, "seconds": round(wall, 2),
        "appends_per_s": round(count / wall, 1) if wall else None,
    }


# ---------------------------------------------------------------------------------------------
# Hostile readers (each kind in a process of its own, its clients as threads)

def cursor_position(cursor):
    try:
        return int(str(cursor).split("@")[0].split(".")[0])
    except ValueError:
        return 0


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.status = collections.Counter()
        self.ok_seconds = []
        self.extra = collections.Counter()
        self.inflight = {}                            # client -> perf_counter at its request

    def begin(self, client):
        with self.lock:
            self.inflight[client] = time.perf_counter()

    def end(self, client):
        with self.lock:
            self.inflight.pop(client, None)

    def count(self, key, seconds=None):
        with self.lock:
            self.status[str(key)] += 1
            if seconds is not None and len(self.ok_seconds) < 200000:
                self.ok_seconds.append(seconds)

    def add(self, key, n=1):
        with self.lock:
            self.extra[key] += n

    def snapshot(self):
        with self.lock:
            s = sorted(self.ok_seconds)
            now = time.perf_counter()
            extra = dict(self.extra)
            if self.inflight:
                extra["in flight at stop"] = len(self.inflight)
                extra["oldest in flight s"] = round(now - min(self.inflight.values()), 1)
            return {"status": dict(self.status), "extra": extra,
                    "ok_p50_ms": None if not s else round(percentile(s, 50) * 1000, 1),
                    "ok_max_ms": None if not s else round(s[-1] * 1000, 1)}


def http_get_loop(port, key, next_path, on_ok, tally, stop):
    """GET next_path() again and again on a persistent connection; 503 is retried at once."""
    headers = {"Authorization": "Bearer " + KEYS[key]}
    conn = None
    me = threading.get_ident()
    while not stop.is_set():
        path = next_path()
        try:
            if conn is None:
                conn = http.client.HTTPConnection(HOST, port, timeout=READER_TIMEOUT)
            t0 = time.perf_counter()
            tally.begin(me)
            conn.request("GET", path, headers=headers)
            r = conn.getresponse()
            body = r.read()
            dt = time.perf_counter() - t0
            tally.end(me)
        except socket.timeout:
            tally.end(me)
            tally.count("timeout")
            conn.close()
            conn = None
            continue
        except (OSError, http.client.HTTPException) as e:
            tally.end(me)
            tally.count("error " + type(e).__name__)
            if conn is not None:
                conn.close()
            conn = None
            time.sleep(0.01)  # the server is gone or refusing: do not spin on connect
            continue
        tally.count(r.status, dt if r.status == 200 else None)
        if r.status == 200:
            on_ok(body)
        if r.will_close:
            conn.close()
            conn = None


def timeline_client(port, head, tally, stop, rng):
    http_get_loop(port, "reader", lambda: "/v1/accounts/longaccount?timeline=true",
                  lambda body: None, tally, stop)


def follow_client(port, head, tally, stop, rng):
    state = {"after": "0"}

    def on_ok(body):
        try:
            page = json.loads(body)
        except ValueError:
            tally.add("bad json")
            return
        changes = page.get("changes") or []
        nxt = page.get("next") or state["after"]
        tally.add("changes", len(changes))
        if len(changes) < LIMIT and cursor_position(nxt) >= head:
            state["after"] = "0"
            tally.add("restarts at 0")
        else:
            state["after"] = nxt

    http_get_loop(port, "feed", lambda: f"/v1/changes?after={state['after']}&limit={LIMIT}",
                  on_ok, tally, stop)


def deep_client(port, head, tally, stop, rng):
    # Behind the newest 20,000 changes the server keeps in memory when the log is long enough.
    top = head - 25000 if head > 30000 else max(1, head // 2)
    http_get_loop(port, "feed",
                  lambda: f"/v1/changes?after={rng.randint(1, max(1, top))}&limit={LIMIT}",
                  lambda body: tally.add("changes", len(json.loads(body).get("changes") or [])),
                  tally, stop)


def disconnect_client(port, head, tally, stop, rng):
    req = ("GET /v1/accounts/longaccount?timeline=true HTTP/1.1\r\nHost: bench\r\n"
           f"Authorization: Bearer {KEYS['reader']}\r\n\r\n").encode()
    while not stop.is_set():
        try:
            s = socket.create_connection((HOST, port), timeout=READER_TIMEOUT)
        except OSError as e:
            tally.count("error " + type(e).__name__)
            time.sleep(0.01)
            continue
        try:
            s.sendall(req)
            sel = selectors.DefaultSelector()
            sel.register(s, selectors.EVENT_READ)
            if sel.select(timeout=0.2):
                head_bytes = s.recv(64)
                parts = head_bytes.split(b" ", 2)
                tally.count(parts[1].decode() if len(parts) > 1 else "closed")
            else:
                tally.count("hung up after 0.2 s")
            sel.close()
        except OSError as e:
            tally.count("error " + type(e).__name__)
        finally:
            s.close()


def sse_streams(port, n, tally, stop):
    """n streams from after=0 in one thread; a stream the server ends is opened again."""
    req = ("GET /v1/changes/stream?after=0 HTTP/1.1\r\nHost: bench\r\n"
           f"Authorization: Bearer {KEYS['feed']}\r\nAccept: text/event-stream\r\n\r\n").encode()
    sel = selectors.DefaultSelector()
    state = {}

    def open_one():
        try:
            s = socket.create_connection((HOST, port), timeout=10)
            s.sendall(req)
            s.setblocking(False)
        except OSError as e:
            tally.count("error " + type(e).__name__)
            return False
        state[s] = {"head": b"", "seen_status": False, "changed": False}
        sel.register(s, selectors.EVENT_READ)
        tally.add("opened")
        return True

    missing = n
    while not stop.is_set():
        while missing and not stop.is_set():
            if open_one():
                missing -= 1
            else:
                time.sleep(0.05)
        for key, _ in sel.select(timeout=0.5):
            s = key.fileobj
            st = state[s]
            try:
                data = s.recv(1 << 16)
            except BlockingIOError:
                continue
            except OSError as e:
                data = b""
                tally.count("error " + type(e).__name__)
            if not data:
                sel.unregister(s)
                s.close()
                del state[s]
                tally.add("ended by server")
                missing += 1
                continue
            if not st["seen_status"]:
                st["head"] += data[:256]
                if b" " in st["head"] and len(st["head"]) >= 12:
                    tally.count(st["head"].split(b" ", 2)[1].decode("ascii", "replace"))
                    st["seen_status"] = True
            tally.add("bytes", len(data))
            changes = data.count(b"event: change")
            if changes:
                tally.add("change events", changes)
                if not st["changed"]:
                    st["changed"] = True
                    tally.add("streams that got a change")
    for s in list(state):
        s.close()
    sel.close()


KINDS = {
    "timeline": timeline_client,
    "feed-follow": follow_client,
    "feed-deep": deep_client,
    "timeline-hangup": disconnect_client,
}


def reader_process(kind, clients, port, head, stop, results):
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # the parent cleans up
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    parent = os.getppid()
    tally = Tally()
    if kind == "sse":
        threads = [threading.Thread(target=sse_streams, args=(port, clients, tally, stop),
                                    daemon=True)]
    else:
        threads = [threading.Thread(target=KINDS[kind],
                                    args=(port, head, tally, stop, random.Random(i * 7919 + 1)),
                                    daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    while not stop.wait(1.0):
        if os.getppid() != parent:                    # the script died: do not linger
            os._exit(1)
    results.put((kind, clients, tally.snapshot()))
    results.close()
    results.join_thread()
    os._exit(0)                                       # do not wait for clients mid-request


READERS = [("timeline", 2), ("feed-follow", 3), ("feed-deep", 3), ("sse", 50),
           ("timeline-hangup", 2)]


def start_readers(ctx, port, head):
    stop = ctx.Event()
    results = ctx.Queue()
    procs = []
    for kind, clients in READERS:
        p = ctx.Process(target=reader_process, args=(kind, clients, port, head, stop, results),
                        name=f"reader-{kind}", daemon=True)
        p.start()
        procs.append(p)
    return stop, results, procs


def stop_readers(stop, results, procs):
    stop.set()
    got = {}
    deadline = time.monotonic() + 10
    while len(got) < len(procs) and time.monotonic() < deadline:
        try:
            kind, clients, snap = results.get(timeout=max(0.1, deadline - time.monotonic()))
            got[kind] = dict(snap, clients=clients)
        except Exception:
            break
    for p in procs:
        p.join(2)
        if p.is_alive():
            p.terminate()
            p.join(2)
        if p.is_alive():
            p.kill()
            p.join(2)
    return got


# ---------------------------------------------------------------------------------------------
# Report

def fmt(v):
    return "–" if v is None else (f"{v:.1f}" if isinstance(v, float) else str(v))


def markdown(report):
    q, h = report["phases"]["quiet"], report["phases"].get("hostile")
    lines = [
        f"Append latency, {report['appends']} sequential single-event `POST /v1/events` per "
        f"phase, ledger of {report['fixture']['lines']} events "
        f"(`longaccount`: {report['fixture']['longAccountRenewals']} renewals), "
        f"server `{report['server_binary']}` ({report['build']}), "
        f"{report['cpus']} CPUs, default limits (expensiveReads 2).",
        "",
        "| phase | appends | failed | timeouts | p50 ms | p90 ms | p99 ms | max ms | ≥ 1 s | appends/s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, p in report["phases"].items():
        lines.append(f"| {name} | {p['appends']} | {p['failed']} | {p['timeouts']} | "
                     f"{fmt(p['p50_ms'])} | {fmt(p['p90_ms'])} | {fmt(p['p99_ms'])} | "
                     f"{fmt(p['max_ms'])} | {len(p['over_1s'])} | {fmt(p['appends_per_s'])} |")
    lines += ["", f"hostile p99 / quiet p99: **{fmt(report['p99_ratio'])}**", ""]
    if report.get("readers"):
        lines += ["| reader | clients | answers by status | 200: p50 / max ms | other |",
                  "|---|---|---|---|---|"]
        for kind, _ in READERS:
            r = report["readers"].get(kind)
            if r is None:
                lines.append(f"| {kind} | – | no report (process killed) | – | – |")
                continue
            st = ", ".join(f"{k}: {v}" for k, v in sorted(r["status"].items())) or "none"
            ex = ", ".join(f"{k}: {v}" for k, v in sorted(r["extra"].items())) or ""
            lines.append(f"| {kind} | {r['clients']} | {st} | {fmt(r['ok_p50_ms'])} / "
                         f"{fmt(r['ok_max_ms'])} | {ex} |")
        lines.append("")
    lines.append(f"server: {report['server_after']}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ledger-binary", required=True)
    ap.add_argument("--server-binary", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--events", type=int, default=200000)
    ap.add_argument("--long-account-renewals", type=int, default=10000)
    ap.add_argument("--appends", type=int, default=2000)
    ap.add_argument("--json", metavar="OUT.json")
    ap.add_argument("--warmup", type=int, default=20,
                    help="appends before each phase, not measured (default 20)")
    ap.add_argument("--settle", type=float, default=3.0,
                    help="seconds the readers run before the hostile appends (default 3)")
    ap.add_argument("--startup-timeout", type=float, default=300.0)
    args = ap.parse_args()
    for b in (args.ledger_binary, args.server_binary):
        if not os.access(b, os.X_OK):
            sys.exit(f"not an executable: {b}")
    args.ledger_binary = os.path.abspath(args.ledger_binary)
    args.server_binary = os.path.abspath(args.server_binary)
    workdir = os.path.abspath(args.workdir)
    os.makedirs(workdir, exist_ok=True)

    def on_signal(signum, frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    signal.signal(signal.SIGINT, signal.default_int_handler)   # even when started ignoring it

    ledger, catalog, fixture = build_fixture(args, workdir)
    ctx = multiprocessing.get_context("fork")
    run = f"bench-{int(time.time())}-{os.getpid()}"
    server = None
    readers = None
    report = {
        "server_binary": args.server_binary,
        "build": ("release" if "/release/" in args.server_binary else
                  "debug" if "/debug/" in args.server_binary else "unknown"),
        "cpus": os.cpu_count(), "machine": platform.platform(), "python": platform.python_version(),
        "fixture": fixture, "appends": args.appends, "warmup": args.warmup,
        "settle_seconds": args.settle, "readers_config": dict(READERS),
        "phases": {}, "readers": {}, "p99_ratio": None,
    }
    try:
        server, port = start_server(args, workdir, ledger, catalog)
        report["server_rss_mib_start"] = rss_mib(server.pid)

        log(f"quiet: {args.warmup} warm-up + {args.appends} appends")
        run_appends(port, args.warmup, f"{run}/quiet-warmup")
        report["phases"]["quiet"] = run_appends(port, args.appends, f"{run}/quiet")
        log(f"quiet: {json.dumps({k: v for k, v in report['phases']['quiet'].items() if k.endswith('_ms')})}")

        st, body = health(port, timeout=30)
        head = body["position"]
        log(f"hostile: starting readers ({dict(READERS)}) at position {head}")
        readers = start_readers(ctx, port, head)
        time.sleep(args.settle)
        run_appends(port, args.warmup, f"{run}/hostile-warmup")
        report["phases"]["hostile"] = run_appends(port, args.appends, f"{run}/hostile")
        log(f"hostile: {json.dumps({k: v for k, v in report['phases']['hostile'].items() if k.endswith('_ms')})}")
        report["server_rss_mib_hostile"] = rss_mib(server.pid)
        t0 = time.monotonic()
        report["readers"] = stop_readers(*readers)
        readers = None
        log(f"readers stopped in {time.monotonic() - t0:.1f} s")

        qp99 = report["phases"]["quiet"]["p99_ms"]
        hp99 = report["phases"]["hostile"]["p99_ms"]
        if qp99 and hp99 is not None:
            report["p99_ratio"] = round(hp99 / qp99, 2)
        try:
            t0 = time.perf_counter()
            st, body = health(port, timeout=30)
            report["server_after"] = (f"alive, /v1/health {st} in "
                                      f"{(time.perf_counter() - t0) * 1000:.0f} ms, "
                                      f"position {body.get('position') if st == 200 else body}")
        except Exception as e:
            report["server_after"] = f"/v1/health failed after the hostile phase: {e!r}"
    finally:
        if readers is not None:
            got = stop_readers(*readers)
            report["readers"] = report.get("readers") or got
        t0 = time.monotonic()
        code = stop_server(server)
        report["server_exit"] = code
        report["server_stop_seconds"] = round(time.monotonic() - t0, 1)
        if server is not None:
            report.setdefault("server_after", "not measured")
            report["server_after"] += (f"; SIGTERM: exit status {code} after "
                                       f"{report['server_stop_seconds']} s")
            log(f"server stopped, exit status {code}, in {report['server_stop_seconds']} s")
    text = markdown(report)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
        log(f"wrote {args.json}")


if __name__ == "__main__":
    main()
