"""Item sizes and capacity units by AWS's rules, and partition-key patterns, for ddb_proxy.py
(and whatever else reads its stats). Standard library only."""
import math, re

# ---------------------------------------------------------------- item sizes, by AWS's rules

def num_size(n):
    """1 byte per two significant digits, plus 1 (DynamoDB stores numbers in base 100)."""
    m = n.lstrip("+-").lower().split("e")[0].replace(".", "").strip("0")
    return (max(len(m), 1) + 1) // 2 + 1

def b64_len(s):
    return len(s) * 3 // 4 - s[-2:].count("=") if s else 0

def value_size(v):
    """S: UTF-8 bytes; B: raw bytes; BOOL, NULL: 1; sets: their elements; L, M: 3 + 1 an element."""
    (t, x), = v.items()
    if t in ("SS", "NS", "BS"):
        return sum(value_size({t[0]: e}) for e in x)
    if t == "L":
        return 3 + sum(value_size(e) + 1 for e in x)
    if t == "M":
        return 3 + sum(len(k.encode()) + value_size(e) + 1 for k, e in x.items())
    return len(x.encode()) if t == "S" else num_size(x) if t == "N" else b64_len(x) if t == "B" else 1

def item_size(item):
    return sum(len(k.encode()) + value_size(v) for k, v in item.items()) if item else 0

def wu(size):
    return max(1, math.ceil(size / 1024))

def ru(size):
    return max(1, math.ceil(size / 4096))

def key_of(table, key):
    return (table, key.get("pk", {}).get("S", ""), key.get("sk", {}).get("S", ""))

# ---------------------------------------------------------------- pk patterns

HEX24, HEX64 = re.compile(r"[0-9a-f]{24}"), re.compile(r"[0-9a-f]{64}")
PATTERNS = {}

def pattern(table, pk):
    """`01a2…#WL#01a3…` → `<project>#WL#<id>`. Ids, project and user ids alike, are 24 lowercase
    hex (shared/src/ids.rs); a partition key starts with the project. Cached: stats walk every key."""
    p = PATTERNS.get((table, pk))
    if p is None:
        segs, out = pk.split("#"), []
        for i, s in enumerate(segs):
            prev = segs[i - 1] if i else ""
            if pk.startswith("("):
                out = [pk]; break
            if i and prev in ("C", "CN", "UC"):
                out.append("<geohash>")
            elif HEX24.fullmatch(s):
                out.append("<project>" if i == 0 or prev == "PROJECT" else
                           "<user>" if i == 1 and "location" in table else "<id>")
            elif HEX64.fullmatch(s):
                out.append("<hash>")
            elif i and s.isdigit():
                out.append("<shard>")
            elif i and prev in ("G", "WSCONN"):
                out.append("<name>")
            else:
                out.append(s)
        p = PATTERNS[(table, pk)] = "#".join(out)
    return p
