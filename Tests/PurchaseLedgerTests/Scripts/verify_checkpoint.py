"""An auditor's checks of a signed checkpoint and its proofs, written from RFC 9162 §2.1
(the tree, §2.1.3.2 and §2.1.4.2's verification algorithms) and C2SP's signed-note and
tlog-checkpoint specifications alone, with Python's hashlib and the `cryptography` package's
Ed25519: no code of the ledger's.

usage: verify_checkpoint.py BUNDLE.json
BUNDLE: {"verifierKey", "note", "leaves": [base64 leaf data], "inclusion": [{"leafIndex",
"treeSize", "hashes"}], "consistency": [{"fromSize", "treeSize", "hashes"}]}, the proofs'
sizes at most the checkpoint's. Prints one line per check that failed and exits 1 if any did;
then checks that every single-byte change of the note, a leaf or a proof hash is refused.
"""
import base64
import hashlib
import json
import sys

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


def sha256(data):
    return hashlib.sha256(data).digest()


def leaf_hash(data):
    return sha256(b"\x00" + data)


def node_hash(left, right):
    return sha256(b"\x01" + left + right)


def mth(leaves):
    """MTH (RFC 9162 §2.1.1) of the leaf data."""
    if not leaves:
        return sha256(b"")
    if len(leaves) == 1:
        return leaf_hash(leaves[0])
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return node_hash(mth(leaves[:k]), mth(leaves[k:]))


def verify_inclusion(index, size, leaf, path, root):
    """RFC 9162 §2.1.3.2."""
    if index >= size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify_consistency(first, second, first_hash, second_hash, path):
    """RFC 9162 §2.1.4.2."""
    if first == second:
        return not path and first_hash == second_hash
    if not 0 < first < second or not path:
        return False
    if first & (first - 1) == 0:
        path = [first_hash] + path
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return fr == first_hash and sr == second_hash and sn == 0


def std_b64decode(text):
    """Standard padded base64, canonical only: unused bits set make another text of the same bytes."""
    raw = base64.b64decode(text, validate=True)
    if base64.b64encode(raw).decode() != text:
        raise ValueError("not canonical base64")
    return raw


def open_note(note, verifier_key):
    """The note's text when a signature by the verifier key verifies (C2SP signed-note), else None."""
    name, key_hash, key = verifier_key.split("+", 2)
    key = std_b64decode(key)
    if key[0] != 1 or len(key) != 33:
        return None
    # The key's hash: SHA-256(name || "\n" || 0x01 || public key), its first four bytes.
    if sha256(name.encode() + b"\n" + key)[:4].hex() != key_hash:
        return None
    public = Ed25519PublicKey.from_public_bytes(key[1:])
    split = note.rfind("\n\n")
    if split < 0 or not note.endswith("\n"):
        return None
    text, signatures = note[: split + 1], note[split + 2 :]
    for line in signatures[:-1].split("\n"):
        if not line.startswith("\u2014 "):
            return None
        signer, _, encoded = line[2:].partition(" ")
        raw = std_b64decode(encoded)
        if signer == name and raw[:4].hex() == key_hash:
            try:
                public.verify(raw[4:], text.encode())
                return text
            except InvalidSignature:
                return None
    return None


def check(bundle):
    """The checks that failed, each a line."""
    failed = []
    text = open_note(bundle["note"], bundle["verifierKey"])
    if text is None:
        return ["the note's signature does not verify"]
    lines = text.split("\n")
    if len(lines) < 4 or not lines[0] or str(int(lines[1])) != lines[1]:
        return ["not a tlog-checkpoint: " + repr(text)]
    size, root = int(lines[1]), std_b64decode(lines[2])
    leaves = [std_b64decode(leaf) for leaf in bundle["leaves"]]
    if len(leaves) != size or mth(leaves) != root:
        failed.append("the leaves' root is not the checkpoint's")
    for proof in bundle["inclusion"]:
        index, tree_size = proof["leafIndex"], proof["treeSize"]
        hashes = [std_b64decode(h) for h in proof["hashes"]]
        if not verify_inclusion(index, tree_size, leaf_hash(leaves[index]), hashes, mth(leaves[:tree_size])):
            failed.append(f"inclusion of {index} in {tree_size}")
    for proof in bundle["consistency"]:
        first, second = proof["fromSize"], proof["treeSize"]
        hashes = [std_b64decode(h) for h in proof["hashes"]]
        if not verify_consistency(first, second, mth(leaves[:first]), mth(leaves[:second]), hashes):
            failed.append(f"consistency from {first} to {second}")
    return failed


def flipped(text, at):
    raw = bytearray(text.encode() if isinstance(text, str) else text)
    raw[at] ^= 0x01
    return bytes(raw)


def main():
    with open(sys.argv[1]) as file:
        bundle = json.load(file)
    failed = check(bundle)
    for line in failed:
        print(line)
    if failed:
        sys.exit(1)
    # Every single-byte change is refused: of the note, of a leaf, of a proof hash.
    accepted = []
    note = bundle["note"].encode()
    for at in range(len(note)):
        changed = dict(bundle, note=flipped(note, at).decode("utf-8", "replace"))
        try:
            if not check(changed):
                accepted.append(f"the note with byte {at} changed")
        except Exception:
            pass
    for kind in ("inclusion", "consistency"):
        for number, proof in enumerate(bundle[kind]):
            for which, encoded in enumerate(proof["hashes"]):
                raw = std_b64decode(encoded)
                for at in range(len(raw)):
                    hashes = list(proof["hashes"])
                    hashes[which] = base64.b64encode(flipped(raw, at)).decode()
                    proofs = list(bundle[kind])
                    proofs[number] = dict(proof, hashes=hashes)
                    if not check(dict(bundle, **{kind: proofs})):
                        accepted.append(f"{kind} proof {number}, hash {which}, byte {at} changed")
    for number, encoded in enumerate(bundle["leaves"]):
        raw = std_b64decode(encoded)
        for at in range(len(raw)):
            leaves = list(bundle["leaves"])
            leaves[number] = base64.b64encode(flipped(raw, at)).decode()
            if not check(dict(bundle, leaves=leaves)):
                accepted.append(f"leaf {number}, byte {at} changed")
    for line in accepted:
        print("accepted: " + line)
    if accepted:
        sys.exit(1)
    print("ok")


main()
