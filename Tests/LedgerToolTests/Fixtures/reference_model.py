#!/usr/bin/env python3
"""Reference model of the purchase ledger interchange format, version 1.1, with the store's events.

Written from the specification text alone (interchange-v1.md, version 1.1, plus the project's
decisions under "Where the specification is silent" in docs/FORMAT.md), without reading the
Swift sources, so that the expected files here are answers the implementation did not produce.
Python 3, standard library only.

The store's events were added later, from docs/FORMAT.md alone as well (again without reading the
Swift sources or tests): `storeTransaction` and `renewalInfo` ("The store's events": field
validation, **Rules**, **What is in force**, **Projections**, **Valid time**, **Environments**,
the replay members, "Where Apple is silent"), and the refund requests `consumptionConsent`,
`consumptionRequest` and `consumptionAnswer` ("Refund requests": validated, listed under their
account, consent in force). Not modelled: the "Dates from the future" check (the streams here
hold past dates only), proofs (`signed` is only length-checked) and the timeline.
In short:
- a report in force is, per account and transaction (per original transaction for renewal
  infos), the one with the latest `at`, ties by the greater event id (bytes), counting only the
  reports of the view's environments (a report without `environment` is Production);
- valid time at the as-of time T: a report starts at `purchasedAt`, else at its `at`; a
  revocation takes effect at `revokedAt`; an upgrade at the start of the earliest-starting other
  transaction of the group that starts no earlier, else at max(`at`, start); every interval is
  half-open; subscription status 1 active, 2 expired, 3 billingRetry, 4 gracePeriod, 5 revoked;
- a consumable's credit follows the report in force (every environment) by position: a report
  with `revokedAt` takes it back once, a later one without gives it again; a `revoked` event
  stays final; a view of some environments leaves out the credit (while it stands) of each
  consumable transaction the store reported only in other environments ("Environments");
- each subscription carries `renewal`, the renewal info in force (its fields as in the event);
- an entry whose transaction the account's reports name is judged by the report, not by itself;
- every account with an appended event (of any type) is listed.

It reads a catalog JSON and a JSON Lines event stream and prints either the import report
(one JSON line per input line, as `ledger import --report`) or the replay JSON
(`ledger replay --json --as-of 2026-01-01T00:00:00Z [--position N] [--environment E]...`).

Regenerating the expected files (run from this Fixtures folder):

  # everything at once, for every NAME.jsonl in spec-cases/ and generated/ (in place):
  #   NAME.report.jsonl; NAME.replay.json (as of 2026-01-01T00:00:00Z, every environment);
  #   NAME.replay.json.N for each N in NAME.positions (comma-separated);
  #   NAME.replay.json.viewK for the K-th non-empty line of NAME.views (see below).
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
  python3 reference_model.py --as-of 2025-06-02T10:12:00Z --environment Production \
      spec-cases/catalog.json spec-cases/07_valid_time.jsonl replay

`regen . OUT_DIR` writes under OUT_DIR instead of in place.

Views (NAME.views): one view per non-empty line, space-separated tokens
`as-of=<RFC 3339>` (required), `position=<N>` (optional: the first N appended events) and
`environment=<E>` (optional, repeatable: `ledger replay --environment E`; none = every
environment). The K-th non-empty line (1-based) gives NAME.replay.json.viewK, the replay
`ledger replay --json --as-of T [--position N] [--environment E]...` prints, e.g.
`as-of=2025-06-02T10:15:00Z position=9 environment=Production`.

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

DEVICE_TYPES = ("paymentAdded", "transactionUpdated", "downloadUpdated",
                "transactionFinished", "consumed", "revoked")
STORE_TYPES = ("storeTransaction", "renewalInfo")
REFUND_TYPES = ("consumptionConsent", "consumptionRequest", "consumptionAnswer")
TYPES = DEVICE_TYPES + STORE_TYPES + REFUND_TYPES
OWNERSHIPS = ("PURCHASED", "FAMILY_SHARED")
ENVIRONMENTS = ("Production", "Sandbox", "Xcode", "LocalTesting")
REVOCATION_TYPES = ("REFUND_FULL", "REFUND_PRORATED", "FAMILY_REVOKE")
ANSWER_OUTCOMES = ("accepted", "refused", "noConsent")
# FORMAT.md names only DELIVERED, UNDELIVERED_OTHER and DECLINE; the rest is Apple's list
# (App Store Server API, ConsumptionRequest: deliveryStatus, refundPreference).
DELIVERY_STATUSES = ("DELIVERED", "UNDELIVERED_QUALITY_ISSUE", "UNDELIVERED_WRONG_ITEM",
                     "UNDELIVERED_SERVER_OUTAGE", "UNDELIVERED_OTHER")
REFUND_PREFERENCES = ("DECLINE", "GRANT_FULL", "GRANT_PRORATED")
STATUS_NAMES = {1: "active", 2: "expired", 3: "billingRetry", 4: "gracePeriod", 5: "revoked"}
PRODUCTION = "Production"
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


def _civil_from_days(days):
    z = days + 719468
    era = (z if z >= 0 else z - 146096) // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + (3 if mp < 10 else -9)
    return y + (m <= 2), m, d


def format_timestamp(ns):
    """Integer nanoseconds -> RFC 3339 in UTC (`Z`) with the shortest exact fraction."""
    secs, frac = divmod(ns, 1000000000)
    days, rem = divmod(secs, 86400)
    y, m, d = _civil_from_days(days)
    s = "%04d-%02d-%02dT%02d:%02d:%02d" % (y, m, d, rem // 3600, rem // 60 % 60, rem % 60)
    if frac:
        s += "." + ("%09d" % frac).rstrip("0")
    return s + "Z"


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


def get_sized(ev, key, lo, hi, required=True):
    """A string of lo..hi UTF-8 bytes (hi None: no limit of its own)."""
    if key not in ev:
        if required:
            raise Invalid("missing " + key)
        return None
    v = ev[key]
    if not isinstance(v, str) or _utf8len(v) < lo or (hi is not None and _utf8len(v) > hi):
        raise Invalid("bad " + key)
    return v


def get_enum(ev, key, values, required=False):
    if key not in ev:
        if required:
            raise Invalid("missing " + key)
        return None
    v = ev[key]
    if not isinstance(v, str) or v not in values:
        raise Invalid("bad " + key)
    return v


def get_bool(ev, key, required=False):
    if key not in ev:
        if required:
            raise Invalid("missing " + key)
        return None
    v = ev[key]
    if not isinstance(v, bool):
        raise Invalid("bad " + key)
    return v


def get_time(ev, key):
    return parse_timestamp(ev[key]) if key in ev else None


# The store's reports: (field, kind) in the order of FORMAT.md's table. Kinds: "ts" a timestamp
# (kept as nanoseconds), anything else a plain JSON value. `source` and `signed` are validated
# but never projected.
def _validate_store_transaction(ev):
    f = []
    f.append(("transaction", get_sized(ev, "transaction", 1, 256)))
    f.append(("originalTransaction", get_name(ev, "originalTransaction", required=False)))
    f.append(("product", get_name(ev, "product")))
    f.append(("quantity", get_int(ev, "quantity", 1, 10, None)))
    f.append(("purchasedAt", get_time(ev, "purchasedAt")))
    f.append(("expiresAt", get_time(ev, "expiresAt")))
    f.append(("subscriptionGroup", get_sized(ev, "subscriptionGroup", 0, None, required=False)))
    f.append(("ownership", get_enum(ev, "ownership", OWNERSHIPS)))
    f.append(("environment", get_enum(ev, "environment", ENVIRONMENTS)))
    f.append(("price", get_int(ev, "price", 0, None, None)))
    f.append(("currency", get_sized(ev, "currency", 0, None, required=False)))
    f.append(("storefront", get_sized(ev, "storefront", 0, None, required=False)))
    f.append(("revokedAt", get_time(ev, "revokedAt")))
    f.append(("revocationReason", get_int(ev, "revocationReason", 0, 99, None)))
    f.append(("revocationType", get_enum(ev, "revocationType", REVOCATION_TYPES)))
    f.append(("revocationPercentage", get_int(ev, "revocationPercentage", 0, 100000, None)))
    f.append(("upgraded", get_bool(ev, "upgraded")))
    get_text(ev, "source", required=False)
    get_sized(ev, "signed", 1, 16384, required=False)
    return f


def _validate_renewal_info(ev):
    f = []
    f.append(("originalTransaction", get_sized(ev, "originalTransaction", 1, 256)))
    f.append(("product", get_name(ev, "product")))
    f.append(("renewsTo", get_name(ev, "renewsTo", required=False)))
    f.append(("willRenew", get_bool(ev, "willRenew")))
    f.append(("billingRetry", get_bool(ev, "billingRetry")))
    f.append(("gracePeriodEndsAt", get_time(ev, "gracePeriodEndsAt")))
    f.append(("expirationIntent", get_int(ev, "expirationIntent", 1, 99, None)))
    f.append(("environment", get_enum(ev, "environment", ENVIRONMENTS)))
    get_text(ev, "source", required=False)
    get_sized(ev, "signed", 1, 16384, required=False)
    return f


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
    e["at"] = parse_timestamp(ev["at"])
    if t in STORE_TYPES:
        if t == "storeTransaction":
            fields = _validate_store_transaction(ev)
        else:
            fields = _validate_renewal_info(ev)
        e["fields"] = [(k, v) for k, v in fields if v is not None]
        e.update(dict(fields))
        e["env"] = e["environment"] if e["environment"] is not None else PRODUCTION
        return e
    if t == "consumptionConsent":
        e["consented"] = get_bool(ev, "consented", required=True)
        return e
    if t == "consumptionRequest":
        e["transaction"] = get_sized(ev, "transaction", 1, 256)
        e["reason"] = get_sized(ev, "reason", 0, 256, required=False)
        e["environment"] = get_enum(ev, "environment", ENVIRONMENTS)
        return e
    if t == "consumptionAnswer":
        e["request"] = get_sized(ev, "request", 1, 128)
        e["transaction"] = get_sized(ev, "transaction", 1, 256)
        e["outcome"] = get_enum(ev, "outcome", ANSWER_OUTCOMES, required=True)
        e["deliveryStatus"] = get_enum(ev, "deliveryStatus", DELIVERY_STATUSES)
        e["consumptionPercentage"] = get_int(ev, "consumptionPercentage", 0, 100000, None)
        e["refundPreference"] = get_enum(ev, "refundPreference", REFUND_PREFERENCES)
        e["sampleContentProvided"] = get_bool(ev, "sampleContentProvided")
        e["status"] = get_int(ev, "status", 100, 599, None)
        e["error"] = get_text(ev, "error", required=False)
        return e
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
        self.debited = False       # a consumable's credit currently taken back by a refund


class Account(object):
    def __init__(self):
        self.entries = {}          # payment -> Entry, in the order opened
        self.balances = {}         # item -> int, in the order first credited
        self.reports = {}          # transaction -> [storeTransaction event, ...] (appended order)
        self.renewals = {}         # originalTransaction -> [renewalInfo event, ...]
        self.consent = None        # consumption consent in force: None (none recorded), True, False
        self.consent_latest_at = None  # the greatest `at` of the consent events recorded so far


def _order(report):
    """What is in force: the latest `at`; of two signed at one instant, the greater id (bytes)."""
    return (report["at"], report["id"].encode("utf-8"))


def in_force(reports, envs=None):
    """The report in force among `reports`, counting only those of `envs` (None: every one)."""
    pool = [r for r in reports if envs is None or r["env"] in envs]
    return max(pool, key=_order) if pool else None


def _bytes(s):
    return s.encode("utf-8")


class Ledger(object):
    def __init__(self, catalog, rules="1.1"):
        assert rules in ("1.0", "1.1")
        self.rules = rules
        self.products = {}
        for p in catalog["products"]:
            grants = p.get("grants")
            if p["type"] == "consumable" and not grants:
                grants = {p["id"]: 1}
            self.products[p["id"]] = (p["type"], grants, p.get("group"))
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
        grants = self.products[entry.product][1]
        for item, g in grants.items():
            acc.balances[item] = acc.balances.get(item, 0) + sign * entry.quantity * g

    def _settle(self, tx):
        """A consumable's credit, by position: taken back while the transaction is revoked by a
        `revoked` event (final) or the report in force (every environment: balances are not
        scoped) in the crediting entry's account carries `revokedAt`; given again otherwise."""
        ent = self.credited_by.get(tx)
        if ent is None:
            return
        report = in_force(self.accounts[ent.account].reports.get(tx, []))
        debit = tx in self.revoked or (report is not None and report["revokedAt"] is not None)
        if debit != ent.debited:
            self._credit(ent, -1 if debit else +1)
            ent.debited = debit

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
                self._settle(tx)

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
        self._settle(tx)

    def _storeTransaction(self, e):
        if e["product"] not in self.products:
            raise Rejected("unknownProduct")
        ptype = self.products[e["product"]][0]
        if ptype in ("nonConsumable", "autoRenewable") and e["quantity"] not in (None, 1):
            raise Rejected("invalidEvent")
        if any(h.account != e["account"] for h in self.holders.get(e["transaction"], [])):
            raise Rejected("transactionAlreadyCredited")
        acc = self._append(e)
        acc.reports.setdefault(e["transaction"], []).append(e)
        self._settle(e["transaction"])

    def _renewalInfo(self, e):
        acc = self._append(e)
        acc.renewals.setdefault(e["originalTransaction"], []).append(e)

    def _consumptionConsent(self, e):
        acc = self._append(e)
        if not e["consented"]:
            acc.consent = False
        elif acc.consent_latest_at is None or e["at"] > acc.consent_latest_at:
            acc.consent = True
        if acc.consent_latest_at is None or e["at"] > acc.consent_latest_at:
            acc.consent_latest_at = e["at"]

    def _consumptionRequest(self, e):
        self._append(e)

    def _consumptionAnswer(self, e):
        self._append(e)

    # ---- projections
    def _balances(self, name, acc, envs):
        """The account's balances; in a view of some environments, less the credit of each
        consumable transaction the store reported only in others (reported, and no report in
        force among the view's), unless a refund took it back already. `consumed` names no
        environment: it counts in every view."""
        balances = dict(acc.balances)
        if envs is None:
            return balances
        for tx, ent in self.credited_by.items():
            if ent.account != name or ent.debited:
                continue
            if tx in acc.reports and in_force(acc.reports[tx], envs) is None:
                for item, g in self.products[ent.product][1].items():
                    balances[item] = balances.get(item, 0) - ent.quantity * g
        return balances

    def _revoked_by_event(self, r):
        return r["transaction"] in self.revoked or (
            r["originalTransaction"] is not None and r["originalTransaction"] in self.revoked)

    @staticmethod
    def _start(r):
        return r["purchasedAt"] if r["purchasedAt"] is not None else r["at"]

    def _revocation_in_effect(self, r, t):
        return self._revoked_by_event(r) or (r["revokedAt"] is not None and r["revokedAt"] <= t)

    def _group(self, r):
        group = self.products[r["product"]][2]
        if group is not None:
            return group
        if r["subscriptionGroup"] is not None:
            return r["subscriptionGroup"]
        if r["originalTransaction"] is not None:
            return r["originalTransaction"]
        return r["transaction"]

    def _subscriptions(self, reports, renewals, t):
        """(the `subscriptions` member, the products they grant at t)."""
        groups = {}
        for r in reports.values():
            if self.products[r["product"]][0] == "autoRenewable":
                groups.setdefault(self._group(r), []).append(r)
        members = []
        grants = set()
        for g in sorted(groups, key=_bytes):
            txs = groups[g]

            def upgrade_at(r):
                if not r["upgraded"]:
                    return None
                later = [self._start(o) for o in txs if o["transaction"] != r["transaction"]
                         and self._start(o) >= self._start(r)]
                if later:
                    return min(later)
                return max(r["at"], self._start(r))

            def upgraded_away(r):
                u = upgrade_at(r)
                return u is not None and u <= t

            started = [r for r in txs if self._start(r) <= t]
            if not started:
                continue
            x = max(started, key=lambda r: (not upgraded_away(r), self._start(r),
                                            (1, r["expiresAt"]) if r["expiresAt"] is not None
                                            else (0, 0),
                                            _bytes(r["transaction"])))
            original = (x["originalTransaction"] if x["originalTransaction"] is not None
                        else x["transaction"])
            info = renewals.get(original)
            if self._revocation_in_effect(x, t):
                status = 5
            elif not upgraded_away(x) and (x["expiresAt"] is None or x["expiresAt"] > t):
                status = 1
            elif info is not None and info["billingRetry"]:
                status = 4 if (info["gracePeriodEndsAt"] is not None
                               and info["gracePeriodEndsAt"] > t) else 3
            else:
                status = 2
            if status in (1, 4):
                grants.add(x["product"])
            m = {"group": g, "originalTransaction": original, "transaction": x["transaction"],
                 "product": x["product"], "status": status, "statusName": STATUS_NAMES[status]}
            if x["expiresAt"] is not None:
                m["expiresAt"] = format_timestamp(x["expiresAt"])
            if info is not None:
                if info["gracePeriodEndsAt"] is not None:
                    m["gracePeriodEndsAt"] = format_timestamp(info["gracePeriodEndsAt"])
                if info["willRenew"] is not None:
                    m["willRenew"] = info["willRenew"]
                if info["renewsTo"] is not None:
                    m["renewsTo"] = info["renewsTo"]
            if x["environment"] is not None:
                m["environment"] = x["environment"]
            elif info is not None and info["environment"] is not None:
                m["environment"] = info["environment"]
            if info is not None:
                # the renewal info in force, its fields as in the event, without `source`,
                # `signed`, `appTransaction` and `appAccountToken`
                m["renewal"] = {k: (format_timestamp(v) if k in TIME_FIELDS else v)
                                for k, v in info["fields"]
                                if k not in ("appTransaction", "appAccountToken")}
            members.append(m)
        return members, grants

    def projection(self, as_of_ns, envs=None):
        """envs: None (every environment) or a collection of environment names."""
        if envs is not None:
            envs = frozenset(envs)
        t = as_of_ns
        out = {}
        for name, acc in self.accounts.items():
            reports = {}
            for tx, rs in acc.reports.items():
                r = in_force(rs, envs)
                if r is not None:
                    reports[tx] = r
            renewals = {}
            for orig, rs in acc.renewals.items():
                r = in_force(rs, envs)
                if r is not None:
                    renewals[orig] = r
            ents = set()
            unfinished = []
            for ent in sorted(acc.entries.values(), key=lambda x: x.seq):
                ptype = self.products[ent.product][0]
                # an entry whose transaction the account's store reports name is judged by the
                # report in force (below), in the view's environments: not by itself
                judged = ent.transaction is not None and ent.transaction in acc.reports
                if (not judged and ptype != "consumable"
                        and ent.state in ("purchased", "restored")
                        and ent.transaction not in self.revoked
                        and (ent.original is None or ent.original not in self.revoked)
                        and (ent.expires is None or ent.expires > t)):
                    ents.add(ent.product)
                if ent.finished_pos is None:
                    u = {"payment": ent.payment, "product": ent.product, "state": ent.state,
                         "downloads": [{"id": k, "state": v[0], "progress": _float(v[1])}
                                       for k, v in ent.downloads.items()]}
                    if ent.transaction is not None:
                        u["transaction"] = ent.transaction
                        if judged:
                            r = in_force(acc.reports[ent.transaction], envs)
                            if r is None:
                                r = in_force(acc.reports[ent.transaction])
                            u["environment"] = r["env"]
                    unfinished.append(u)
            # the store's reports: valid time at t
            store_transactions = []
            for tx in sorted(reports, key=_bytes):
                r = reports[tx]
                if self._start(r) > t:
                    continue
                revoked = self._revocation_in_effect(r, t)
                ptype = self.products[r["product"]][0]
                if (ptype in ("nonConsumable", "nonRenewing") and not revoked
                        and (r["expiresAt"] is None or r["expiresAt"] > t)):
                    ents.add(r["product"])
                s = {}
                for k, v in r["fields"]:
                    s[k] = format_timestamp(v) if k in TIME_FIELDS else v
                s["revoked"] = revoked
                store_transactions.append(s)
            subscriptions, granted = self._subscriptions(reports, renewals, t)
            ents |= granted
            a = {"entitlements": sorted(ents, key=_bytes),
                 "balances": self._balances(name, acc, envs),
                 "unfinished": unfinished}
            if subscriptions:
                a["subscriptions"] = subscriptions
            if store_transactions:
                a["storeTransactions"] = store_transactions
            if acc.consent is not None:
                a["consumptionConsent"] = acc.consent
            out[name] = a
        return {"position": self.position, "accounts": out}


TIME_FIELDS = ("purchasedAt", "expiresAt", "revokedAt", "gracePeriodEndsAt")


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


def replay(catalog, appended, rules, position=None, as_of=AS_OF, environments=None):
    """environments: None (every environment, the default view) or a list of names."""
    ledger = Ledger(catalog, rules)
    for e in appended[:len(appended) if position is None else position]:
        outcome, _ = ledger.apply(e)
        assert outcome == "appended"
    return ledger.projection(parse_timestamp(as_of), environments)


def parse_views(text):
    """NAME.views: one view per non-empty line, space-separated `as-of=<RFC 3339>` (required),
    `position=<N>` (optional), `environment=<E>` (optional, repeatable). Returns a list of
    (as_of, position or None, environments or None)."""
    views = []
    for line in text.splitlines():
        if not line.strip():
            continue
        as_of, position, envs = None, None, []
        for tok in line.split():
            key, sep, value = tok.partition("=")
            if not sep:
                raise ValueError("bad view token %r" % tok)
            if key == "as-of" and as_of is None:
                parse_timestamp(value)
                as_of = value
            elif key == "position" and position is None:
                position = int(value)
            elif key == "environment":
                envs.append(value)
            else:
                raise ValueError("bad view token %r" % tok)
        if as_of is None:
            raise ValueError("a view needs as-of=: %r" % line)
        views.append((as_of, position, envs or None))
    return views


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
            views_path = os.path.join(d, name + ".views")
            if os.path.exists(views_path):
                with open(views_path, "rb") as f:
                    views = parse_views(f.read().decode("utf-8"))
                for k, (as_of, n, envs) in enumerate(views, 1):
                    files["%s.replay.json.view%d" % (name, k)] = dump_replay(
                        replay(catalog, appended, rules, n, as_of, envs), compact)
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
    as_of = AS_OF
    environments = []
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
        elif a == "--as-of":
            as_of = argv[i + 1]
            i += 2
            continue
        elif a == "--environment":
            environments.append(argv[i + 1])
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
                 "[--as-of T] [--environment E]... CATALOG EVENTS report|replay\n"
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
        sys.stdout.write(dump_replay(replay(catalog, appended, rules, position, as_of,
                                            environments or None), compact))


if __name__ == "__main__":
    main(sys.argv[1:])
