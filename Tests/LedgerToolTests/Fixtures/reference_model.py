#!/usr/bin/env python3
"""Reference model of the purchase ledger interchange format, version 1.1.

Written from the specification text alone (interchange-v1.md, version 1.1, plus the project's
decisions under "Where the specification is silent" in docs/FORMAT.md), without reading the
Swift sources, so that the expected files here are answers the implementation did not produce.
Python 3, standard library only.

It reads a catalog JSON and a JSON Lines event stream and prints either the import report
(one JSON line per input line, as `ledger import --report`) or the replay JSON
(`ledger replay --json --as-of 2026-01-01T00:00:00Z [--position N]`).

Regenerating the expected files (run from this Fixtures folder):

  # everything at once: NAME.report.jsonl, NAME.replay.json and NAME.replay.json.N for each N
  # in NAME.positions, for every NAME.jsonl in spec-cases/ and generated/ (in place):
  python3 reference_model.py regen .

  # one file at a time (spec-cases/ replays are indented, generated/ replays are --compact):
  python3 reference_model.py spec-cases/catalog.json spec-cases/02_transactions.jsonl report \
      > spec-cases/02_transactions.report.jsonl
  python3 reference_model.py spec-cases/catalog.json spec-cases/02_transactions.jsonl replay \
      > spec-cases/02_transactions.replay.json
  python3 reference_model.py --position 5 spec-cases/catalog.json spec-cases/02_transactions.jsonl \
      replay > spec-cases/02_transactions.replay.json.5
  python3 reference_model.py generated/seed4242.catalog.json generated/seed4242.jsonl report \
      > generated/seed4242.report.jsonl
  python3 reference_model.py --compact --position 100 generated/seed4242.catalog.json \
      generated/seed4242.jsonl replay > generated/seed4242.replay.json.100

`regen . OUT_DIR` writes under OUT_DIR instead of in place.

Rule versions: `--rules 1.1` (the default) or `--rules 1.0`. The only difference: under 1.0 a
`purchased`/`restored` update whose transaction is held by ANY other entry is rejected
`transactionAlreadyCredited`; under 1.1 only when an entry of ANOTHER account holds it; when
another entry of the same account holds it the update is appended, the entry holds the
transaction too but credits nothing (the first holder credited it), and a refund debits the
crediting entry once. `python3 reference_model.py --rules 1.0 regen . OUT_DIR` reproduces the
former (spec 1.0) expected files byte for byte; the files in this folder are the 1.1 output.
"""

import json
import os
import re
import sys
from decimal import Decimal, localcontext

AS_OF = "2026-01-01T00:00:00Z"
INT64_MAX = 2 ** 63 - 1
INT64_MIN = -(2 ** 63)
MAX_LINE = 64 * 1024
MAX_DEPTH = 256

TYPES = ("paymentAdded", "transactionUpdated", "downloadUpdated",
         "transactionFinished", "consumed", "revoked")
TX_STATES = ("purchasing", "deferred", "purchased", "failed", "restored")
DL_STATES = ("waiting", "active", "paused", "finished", "failed", "cancelled")
TERMINAL = ("purchased", "failed", "restored")
LEGAL = {
    "added": ("purchasing", "deferred", "purchased", "failed"),
    "purchasing": ("deferred", "purchased", "failed"),
    "deferred": ("purchasing", "purchased", "failed"),
}


class Invalid(Exception):
    pass


# --------------------------------------------------------------------------- lines / JSON

def split_lines(data):
    """Lines end at \\n; a final \\n does not make an empty last line."""
    if not data:
        return []
    parts = data.split(b"\n")
    if data.endswith(b"\n"):
        parts.pop()
    return parts


def _no_dup_keys(pairs):
    obj = {}
    for k, v in pairs:
        if k in obj:
            raise Invalid("duplicate key")
        obj[k] = v
    return obj


def _reject_constant(name):
    raise Invalid("non-JSON constant " + name)


def _check_depth(text):
    depth = 0
    in_str = False
    esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise Invalid("too deep")
        elif ch in "]}":
            depth -= 1


def _check_strings(v):
    if isinstance(v, str):
        v.encode("utf-8")  # raises on lone surrogates
    elif isinstance(v, dict):
        for k, x in v.items():
            k.encode("utf-8")
            _check_strings(x)
    elif isinstance(v, list):
        for x in v:
            _check_strings(x)


def parse_line(raw):
    if len(raw) > MAX_LINE:
        raise Invalid("line too long")
    if raw.startswith(b"\xef\xbb\xbf"):
        raise Invalid("byte order mark")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Invalid("invalid UTF-8")
    _check_depth(text)
    try:
        obj = json.loads(text, object_pairs_hook=_no_dup_keys, parse_float=Decimal,
                         parse_int=Decimal, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        raise Invalid("not JSON")
    try:
        _check_strings(obj)
    except UnicodeEncodeError:
        raise Invalid("lone surrogate")
    if not isinstance(obj, dict):
        raise Invalid("not an object")
    return obj


# --------------------------------------------------------------------------- timestamps

TS_RE = re.compile(r"^([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})"
                   r"(?:\.([0-9]+))?(?:([Zz])|([+-])([0-9]{2}):([0-9]{2}))$")


def _leap(y):
    return y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)


def _days_in_month(y, m):
    return [31, 29 if _leap(y) else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][m - 1]


def _days_from_civil(y, m, d):
    y -= m <= 2
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _civil_year(days):
    z = days + 719468
    era = (z if z >= 0 else z - 146096) // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    m = mp + (3 if mp < 10 else -9)
    return y + (m <= 2)


def parse_timestamp(s):
    """RFC 3339 date-time -> integer nanoseconds since 1970-01-01T00:00:00Z."""
    if not isinstance(s, str):
        raise Invalid("timestamp type")
    mt = TS_RE.match(s)
    if not mt:
        raise Invalid("timestamp syntax")
    y, mo, d, h, mi, sec = (int(mt.group(i)) for i in range(1, 7))
    frac = mt.group(7) or ""
    if not (1 <= mo <= 12) or not (1 <= d <= _days_in_month(y, mo)):
        raise Invalid("no such date")
    if h > 23 or mi > 59 or sec > 60:
        raise Invalid("time range")
    off = 0
    if not mt.group(8):
        oh, om = int(mt.group(10)), int(mt.group(11))
        if oh > 23 or om > 59:
            raise Invalid("offset range")
        off = (oh * 60 + om) * (1 if mt.group(9) == "+" else -1)
    nanos = int((frac + "000000000")[:9])
    minutes_utc = _days_from_civil(y, mo, d) * 1440 + h * 60 + mi - off
    if sec == 60:
        if minutes_utc % 1440 != 23 * 60 + 59:
            raise Invalid("leap second not at 23:59:60 UTC")
        sec, nanos = 59, 999999999
    utc_year = _civil_year(minutes_utc // 1440)
    if not (0 <= utc_year <= 9999):
        raise Invalid("year out of range in UTC")
    return (minutes_utc * 60 + sec) * 1000000000 + nanos


# --------------------------------------------------------------------------- field checks

def _utf8len(s):
    return len(s.encode("utf-8"))


def _is_number(v):
    return isinstance(v, Decimal)


def get_id_string(ev, key, required=True):
    """id, account, payment: 1-128 bytes."""
    if key not in ev:
        if required:
            raise Invalid("missing " + key)
        return None
    v = ev[key]
    if not isinstance(v, str) or not (1 <= _utf8len(v) <= 128):
        raise Invalid("bad " + key)
    return v


def get_name(ev, key, required=True):
    """product, transaction, originalTransaction, download, item: 0-256 bytes."""
    if key not in ev:
        if required:
            raise Invalid("missing " + key)
        return None
    v = ev[key]
    if not isinstance(v, str) or _utf8len(v) > 256:
        raise Invalid("bad " + key)
    return v


def get_text(ev, key, required=True):
    """error, reason: at most 1024 bytes."""
    if key not in ev:
        if required:
            raise Invalid("missing " + key)
        return None
    v = ev[key]
    if not isinstance(v, str) or _utf8len(v) > 1024:
        raise Invalid("bad " + key)
    return v


def _integer(v):
    if not _is_number(v):
        raise Invalid("not a number")
    with localcontext() as ctx:
        ctx.prec = 100000
        ctx.Emax = 999999999
        ctx.Emin = -999999999
        if v > INT64_MAX:
            if v != v.to_integral_value():
                raise Invalid("not an integer")
            return INT64_MAX
        if v < INT64_MIN:
            if v != v.to_integral_value():
                raise Invalid("not an integer")
            return INT64_MIN
        if v != v.to_integral_value():
            raise Invalid("not an integer")
        return int(v)


def get_int(ev, key, lo, hi, default):
    if key not in ev:
        return default
    n = _integer(ev[key])
    if n < lo or (hi is not None and n > hi):
        raise Invalid("range " + key)
    return n


def get_number(ev, key, default):
    if key not in ev:
        return default
    v = ev[key]
    if not _is_number(v):
        raise Invalid("not a number")
    return v


def validate(ev):
    """Rule 1: everything about the line itself. Returns a normalized dict."""
    e = {}
    e["id"] = get_id_string(ev, "id")
    t = ev.get("type")
    if "type" not in ev or not isinstance(t, str) or t not in TYPES:
        raise Invalid("type")
    e["type"] = t
    e["account"] = get_id_string(ev, "account")
    if "at" not in ev:
        raise Invalid("missing at")
    parse_timestamp(ev["at"])
    if t == "paymentAdded":
        e["payment"] = get_id_string(ev, "payment")
        e["product"] = get_name(ev, "product")
        e["quantity"] = get_int(ev, "quantity", 1, 10, 1)
    elif t == "transactionUpdated":
        e["payment"] = get_id_string(ev, "payment")
        st = ev.get("state")
        if "state" not in ev or not isinstance(st, str) or st not in TX_STATES:
            raise Invalid("state")
        e["state"] = st
        e["transaction"] = get_name(ev, "transaction", required=st in ("purchased", "restored"))
        e["originalTransaction"] = get_name(ev, "originalTransaction", required=st == "restored")
        e["error"] = get_text(ev, "error", required=st == "failed")
        e["expiresAt"] = parse_timestamp(ev["expiresAt"]) if "expiresAt" in ev else None
        e["product"] = get_name(ev, "product", required=False)
        e["quantity"] = get_int(ev, "quantity", 1, 10, None)
    elif t == "downloadUpdated":
        e["payment"] = get_id_string(ev, "payment")
        e["download"] = get_name(ev, "download")
        st = ev.get("state")
        if "state" not in ev or not isinstance(st, str) or st not in DL_STATES:
            raise Invalid("download state")
        e["state"] = st
        p = get_number(ev, "progress", Decimal(0))
        if p < 0 or p > 1:
            raise Invalid("progress range")
        e["progress"] = p
        tr = get_number(ev, "timeRemaining", Decimal(-1))
        if tr < -1:
            raise Invalid("timeRemaining range")
        e["timeRemaining"] = tr
    elif t == "transactionFinished":
        e["payment"] = get_id_string(ev, "payment")
    elif t == "consumed":
        e["item"] = get_name(ev, "item")
        e["amount"] = get_int(ev, "amount", 1, None, None)
        if e["amount"] is None:
            raise Invalid("missing amount")
    elif t == "revoked":
        e["transaction"] = get_name(ev, "transaction")
        e["reason"] = get_text(ev, "reason", required=False)
    return e


# --------------------------------------------------------------------------- the ledger

class Rejected(Exception):
    def __init__(self, code):
        Exception.__init__(self, code)
        self.code = code


class Duplicate(Exception):
    def __init__(self, position):
        Exception.__init__(self, position)
        self.position = position


class Entry(object):
    def __init__(self, account, payment, product, quantity, seq):
        self.account = account
        self.payment = payment
        self.product = product
        self.quantity = quantity
        self.seq = seq
        self.state = "added"
        self.state_pos = None      # position of the event that set the current state
        self.transaction = None
        self.original = None
        self.expires = None
        self.finished_pos = None
        self.downloads = {}        # id -> [state, progress]; dict keeps first-report order


class Account(object):
    def __init__(self):
        self.entries = {}          # payment -> Entry, in the order opened
        self.balances = {}         # item -> int, in the order first credited


class Ledger(object):
    def __init__(self, catalog, rules="1.1"):
        assert rules in ("1.0", "1.1")
        self.rules = rules
        self.products = {}
        for p in catalog["products"]:
            grants = p.get("grants")
            if p["type"] == "consumable" and not grants:
                grants = {p["id"]: 1}
            self.products[p["id"]] = (p["type"], grants)
        self.position = 0
        self.ids = {}              # event id -> position
        self.accounts = {}         # account -> Account, in order of first appended event
        self.holders = {}          # transaction -> [Entry, ...] (entries whose transaction it is)
        self.credited_by = {}      # transaction -> consumable Entry that credited it
        self.revoked = {}          # transaction -> position of the first revocation
        self.seq = 0

    # ---- helpers
    def _append(self, e):
        self.position += 1
        self.ids[e["id"]] = self.position
        if e["account"] not in self.accounts:
            self.accounts[e["account"]] = Account()
        return self.accounts[e["account"]]

    def _credit(self, entry, sign):
        acc = self.accounts[entry.account]
        ptype, grants = self.products[entry.product]
        for item, g in grants.items():
            acc.balances[item] = acc.balances.get(item, 0) + sign * entry.quantity * g

    # ---- the rules
    def apply(self, e):
        """Returns ("appended", pos) or ("duplicate", pos); raises Rejected."""
        if e["id"] in self.ids:
            return ("duplicate", self.ids[e["id"]])
        try:
            getattr(self, "_" + e["type"])(e)
        except Duplicate as d:
            return ("duplicate", d.position)
        return ("appended", self.position)

    def _paymentAdded(self, e):
        if e["product"] not in self.products:
            raise Rejected("unknownProduct")
        ptype = self.products[e["product"]][0]
        if ptype in ("nonConsumable", "autoRenewable") and e["quantity"] != 1:
            raise Rejected("invalidEvent")
        acc = self.accounts.get(e["account"])
        if acc is not None and e["payment"] in acc.entries:
            raise Rejected("duplicatePayment")
        acc = self._append(e)
        self.seq += 1
        ent = Entry(e["account"], e["payment"], e["product"], e["quantity"], self.seq)
        ent.state_pos = self.position
        acc.entries[e["payment"]] = ent

    def _entry(self, e):
        acc = self.accounts.get(e["account"])
        if acc is None:
            return None
        return acc.entries.get(e["payment"])

    def _transactionUpdated(self, e):
        ent = self._entry(e)
        st = e["state"]
        new = ent is None
        if new:
            if e["product"] is None:
                raise Rejected("unknownPayment")
            if e["product"] not in self.products:
                raise Rejected("unknownProduct")
            ptype = self.products[e["product"]][0]
            qty = 1 if e["quantity"] is None else e["quantity"]
            if ptype in ("nonConsumable", "autoRenewable") and qty != 1:
                raise Rejected("invalidEvent")
            product = e["product"]
        else:
            redelivery = (st == ent.state and
                          (st not in ("purchased", "restored") or e["transaction"] == ent.transaction))
            if ent.finished_pos is not None:
                if redelivery:
                    raise Duplicate(ent.state_pos)
                raise Rejected("entryFinished")
            if redelivery:
                raise Duplicate(ent.state_pos)
            if ent.state in TERMINAL or st not in LEGAL[ent.state]:
                raise Rejected("illegalTransition")
            product = ent.product
        ptype = self.products[product][0]
        if st == "restored" and ptype in ("consumable", "nonRenewing"):
            raise Rejected("notRestorable")
        shared = False
        if st in ("purchased", "restored"):
            holders = self.holders.get(e["transaction"], [])
            if holders:
                if self.rules == "1.0":
                    raise Rejected("transactionAlreadyCredited")
                if any(h.account != e["account"] for h in holders):
                    raise Rejected("transactionAlreadyCredited")
                shared = True
        acc = self._append(e)
        if new:
            self.seq += 1
            ent = Entry(e["account"], e["payment"], e["product"], qty, self.seq)
            acc.entries[e["payment"]] = ent
        ent.state = st
        ent.state_pos = self.position
        if st in ("purchased", "restored"):
            tx = e["transaction"]
            ent.transaction = tx
            ent.original = e["originalTransaction"]
            ent.expires = e["expiresAt"]
            self.holders.setdefault(tx, []).append(ent)
            if st == "purchased" and ptype == "consumable" and not shared:
                self.credited_by[tx] = ent
                self._credit(ent, +1)
                if tx in self.revoked:
                    self._credit(ent, -1)

    def _downloadUpdated(self, e):
        ent = self._entry(e)
        if ent is None:
            raise Rejected("unknownPayment")
        if ent.finished_pos is not None:
            raise Rejected("entryFinished")
        if ent.state not in ("purchased", "restored"):
            raise Rejected("illegalDownload")
        dl = ent.downloads.get(e["download"])
        if dl is not None:
            if dl[0] in ("finished", "failed", "cancelled"):
                raise Rejected("illegalDownload")
            if e["progress"] < dl[1]:
                raise Rejected("illegalDownload")
        tr = e["timeRemaining"]
        if not (tr >= 0 or tr == -1):
            raise Rejected("illegalDownload")
        self._append(e)
        if dl is None:
            ent.downloads[e["download"]] = [e["state"], e["progress"]]
        else:
            dl[0] = e["state"]
            dl[1] = e["progress"]

    def _transactionFinished(self, e):
        ent = self._entry(e)
        if ent is None:
            raise Rejected("unknownPayment")
        if ent.finished_pos is not None:
            raise Duplicate(ent.finished_pos)
        if ent.state not in TERMINAL:
            raise Rejected("notFinishable")
        if any(d[0] in ("waiting", "active", "paused") for d in ent.downloads.values()):
            raise Rejected("downloadsPending")
        self._append(e)
        ent.finished_pos = self.position

    def _consumed(self, e):
        acc = self.accounts.get(e["account"])
        bal = acc.balances.get(e["item"], 0) if acc else 0
        if e["amount"] > bal:
            raise Rejected("insufficientBalance")
        acc = self._append(e)
        acc.balances[e["item"]] = bal - e["amount"]

    def _revoked(self, e):
        tx = e["transaction"]
        acc = self.accounts.get(e["account"])
        if acc is None or not any(ent.transaction == tx or ent.original == tx
                                  for ent in acc.entries.values()
                                  if ent.transaction is not None):
            raise Rejected("unknownTransaction")
        if tx in self.revoked:
            raise Duplicate(self.revoked[tx])
        self._append(e)
        self.revoked[tx] = self.position
        ent = self.credited_by.get(tx)
        if ent is not None:
            self._credit(ent, -1)

    # ---- projections
    def projection(self, as_of_ns):
        out = {}
        for name, acc in self.accounts.items():
            ents = []
            unfinished = []
            for ent in sorted(acc.entries.values(), key=lambda x: x.seq):
                ptype = self.products[ent.product][0]
                if (ptype != "consumable" and ent.state in ("purchased", "restored")
                        and ent.transaction not in self.revoked
                        and (ent.original is None or ent.original not in self.revoked)
                        and (ent.expires is None or ent.expires > as_of_ns)):
                    ents.append(ent.product)
                if ent.finished_pos is None:
                    u = {"payment": ent.payment, "product": ent.product, "state": ent.state,
                         "downloads": [{"id": k, "state": v[0], "progress": _float(v[1])}
                                       for k, v in ent.downloads.items()]}
                    if ent.transaction is not None:
                        u["transaction"] = ent.transaction
                    unfinished.append(u)
            out[name] = {"entitlements": sorted(set(ents), key=lambda s: s.encode("utf-8")),
                         "balances": dict(acc.balances),
                         "unfinished": unfinished}
        return {"position": self.position, "accounts": out}


def _float(d):
    f = float(d)
    return 0.0 if f == 0 else f


# --------------------------------------------------------------------------- driver

def run(catalog, data, rules):
    """Returns (report lines, list of appended normalized events)."""
    ledger = Ledger(catalog, rules)
    report = []
    appended = []
    for n, raw in enumerate(split_lines(data), 1):
        try:
            e = validate(parse_line(raw))
            outcome, pos = ledger.apply(e)
        except Invalid:
            report.append('{"line": %d, "outcome": "rejected", "error": "invalidEvent"}' % n)
            continue
        except Rejected as r:
            report.append('{"line": %d, "outcome": "rejected", "error": "%s"}' % (n, r.code))
            continue
        report.append('{"line": %d, "outcome": "%s", "position": %d}' % (n, outcome, pos))
        if outcome == "appended":
            appended.append(e)
    return report, appended


def replay(catalog, appended, rules, position=None, as_of=AS_OF):
    ledger = Ledger(catalog, rules)
    for e in appended[:len(appended) if position is None else position]:
        outcome, _ = ledger.apply(e)
        assert outcome == "appended"
    return ledger.projection(parse_timestamp(as_of))


def dump_replay(obj, compact):
    if compact:
        return json.dumps(obj, sort_keys=True) + "\n"
    return json.dumps(obj, sort_keys=True, indent=1) + "\n"


def regen(fixtures, out, rules):
    written = []
    for sub, compact in (("spec-cases", False), ("generated", True)):
        d = os.path.join(fixtures, sub)
        for fn in sorted(os.listdir(d)):
            if not fn.endswith(".jsonl") or fn.endswith(".report.jsonl"):
                continue
            name = fn[:-len(".jsonl")]
            cat_path = os.path.join(d, name + ".catalog.json")
            if not os.path.exists(cat_path):
                cat_path = os.path.join(d, "catalog.json")
            with open(cat_path, "rb") as f:
                catalog = json.loads(f.read().decode("utf-8"))
            with open(os.path.join(d, fn), "rb") as f:
                data = f.read()
            report, appended = run(catalog, data, rules)
            files = {name + ".report.jsonl": "".join(l + "\n" for l in report),
                     name + ".replay.json": dump_replay(replay(catalog, appended, rules), compact)}
            pos_path = os.path.join(d, name + ".positions")
            if os.path.exists(pos_path):
                with open(pos_path) as f:
                    for p in f.read().strip().split(","):
                        if p.strip():
                            n = int(p)
                            files["%s.replay.json.%d" % (name, n)] = dump_replay(
                                replay(catalog, appended, rules, n), compact)
            od = os.path.join(out, sub)
            os.makedirs(od, exist_ok=True)
            for k, v in sorted(files.items()):
                with open(os.path.join(od, k), "wb") as f:
                    f.write(v.encode("utf-8"))
                written.append(os.path.join(sub, k))
    return written


def main(argv):
    rules = "1.1"
    compact = False
    position = None
    args = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--rules":
            rules = argv[i + 1]
            i += 2
            continue
        if a == "--compact":
            compact = True
        elif a == "--position":
            position = int(argv[i + 1])
            i += 2
            continue
        else:
            args.append(a)
        i += 1
    if rules not in ("1.0", "1.1"):
        sys.exit("--rules must be 1.0 or 1.1")
    if args and args[0] == "regen":
        out = args[2] if len(args) > 2 else args[1]
        for w in regen(args[1], out, rules):
            print(w)
        return
    if len(args) != 3 or args[2] not in ("report", "replay"):
        sys.exit("usage: reference_model.py [--rules 1.0|1.1] [--compact] [--position N] "
                 "CATALOG EVENTS report|replay\n"
                 "       reference_model.py [--rules 1.0|1.1] regen FIXTURES_DIR [OUT_DIR]")
    with open(args[0], "rb") as f:
        catalog = json.loads(f.read().decode("utf-8"))
    with open(args[1], "rb") as f:
        data = f.read()
    report, appended = run(catalog, data, rules)
    if args[2] == "report":
        sys.stdout.write("".join(l + "\n" for l in report))
    else:
        if position is not None and position > len(appended):
            sys.exit("position beyond the end of the log")
        sys.stdout.write(dump_replay(replay(catalog, appended, rules, position), compact))


if __name__ == "__main__":
    main(sys.argv[1:])
