"""Checks a proof-carrying account answer (docs/SERVER.md, "Checkpoints and proofs") with only
the ledger's verifier key: RFC 9162 and C2SP's signed-note, Python's hashlib and `cryptography`.

usage: verify_account_proof.py ANSWER.json VERIFIER_KEY ACCOUNT [ORIGIN]   (ok, or why not: exit 1)
ANSWER: `GET /v1/accounts/{account}?proof=true`'s body, or `ledger replay --account A --proof`'s.
ORIGIN: the log the checkpoint must name (default: the key's name). It proves the events, not the
answer's figures: recompute those from the leaves with the format's rules.
"""
import base64, hashlib, json, sys
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

def h(data): return hashlib.sha256(data).digest()
def b64(text): return base64.b64decode(text, validate=True)

def open_note(note, key):
    """The note's text if the verifier key's signature on it verifies (C2SP signed-note)."""
    name, key_hash, key = key.split("+", 2)
    key = b64(key)
    assert key[0] == 1 and h(name.encode() + b"\n" + key)[:4].hex() == key_hash, "not a verifier key"
    text, _, signatures = note.rpartition("\n\n")
    for line in signatures.rstrip("\n").split("\n"):
        signer, _, signature = line.removeprefix("\u2014 ").partition(" ")
        signature = b64(signature)
        if signer == name and signature[:4].hex() == key_hash:
            Ed25519PublicKey.from_public_bytes(key[1:]).verify(signature[4:], (text + "\n").encode())
            return text + "\n"
    raise AssertionError("no signature by the verifier key")

def root_from_path(index, size, leaf, path):
    """RFC 9162 §2.1.3.2: the root an inclusion proof leads to."""
    fn, sn, r = index, size - 1, h(b"\x00" + leaf)
    for p in path:
        assert sn > 0, "proof too long"
        if fn & 1 or fn == sn:
            r = h(b"\x01" + p + r)
            while not fn & 1 and fn:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = h(b"\x01" + r + p)
        fn, sn = fn >> 1, sn >> 1
    assert sn == 0, "proof too short"
    return r

def verify(answer, key, account, origin=None):
    if "accounts" in answer:
        assert list(answer["accounts"]) == [account], "an answer about another account"
        proof = answer["accounts"][account]["proof"]
    else:
        assert answer["account"] == account, "an answer about another account"
        proof = answer["proof"]
    named, size, root = open_note(proof["checkpoint"], key).split("\n")[:3]
    assert named == (origin or key.split("+")[0]), f"a checkpoint of another log: {named}"
    size, root = int(size), b64(root)
    assert answer["position"] == size, "the answer is not at the checkpoint's size"
    commitment = base64.b64encode(h(b64(proof["accountSalt"]) + account.encode())).decode()
    previous, pseudonym = None, None
    for event in proof["events"]:
        leaf = json.loads(event["leaf"])
        assert 1 <= event["position"] <= size, "a position outside the checkpoint"
        assert root_from_path(event["position"] - 1, size, event["leaf"].encode(), [b64(x) for x in event["hashes"]]) == root, \
            f"position {event['position']} is not in the checkpoint's tree"
        assert leaf["accountCommitment"] == commitment, f"position {event['position']} is not {account}'s"
        assert leaf.get("previous") == previous, f"a gap before position {event['position']}"
        assert pseudonym in (None, leaf["account"]), "two accounts"
        previous, pseudonym = event["position"], leaf["account"]
    assert previous is not None, "no event"
    return f"ok: {len(proof['events'])} events of {account} in {named} at {size} proven (figures not recomputed)"

if __name__ == "__main__":
    try:
        print(verify(json.load(open(sys.argv[1])), *sys.argv[2:5]))
    except Exception as error:  # every refusal, whatever raised it
        print("does not verify:", error)
        sys.exit(1)
