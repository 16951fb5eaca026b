#!/usr/bin/env python3
"""Module graph of `shared/src` from its `use` lines and `crate::`/`super::` paths.

Checks the layers of docs/architecture.md: a module uses only its own layer and the ones below
(pure < store < domain < pipeline < edge), pure code names no HTTP, Lambda or store crate, and
there are no loops between rooms (top-level modules, `domain::<room>`) nor between sibling
modules inside one. Prints what breaks a rule and exits 1. `--graph` prints the room edges.
"""
import os
import re
import sys
from collections import defaultdict

ROOT = os.path.join(os.path.dirname(__file__), "..", "shared", "src")


def module_of(path):
    rel = os.path.relpath(path, ROOT)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib"):
        rel = rel[:-1]
    return rel


def expand(tree):
    """`a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e]."""
    tree = tree.strip()
    depth, start = 0, None
    for i, ch in enumerate(tree):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                prefix = tree[:start]
                inner = tree[start + 1 : i]
                parts, d, last = [], 0, 0
                for j, c in enumerate(inner):
                    if c == "{":
                        d += 1
                    elif c == "}":
                        d -= 1
                    elif c == "," and d == 0:
                        parts.append(inner[last:j])
                        last = j + 1
                parts.append(inner[last:])
                out = []
                for p in parts:
                    if p.strip():
                        out += expand(prefix + p.strip())
                return out
    return [re.sub(r"\s+as\s+\w+$", "", tree)]


def strip_comments(src):
    src = re.sub(r"//[^\n]*", "", src)
    return re.sub(r"/\*.*?\*/", "", src, flags=re.S)


def resolve(mod, path, modules):
    segs = [s for s in path.split("::") if s]
    if not segs:
        return None
    if segs[0] == "crate":
        base, segs = [], segs[1:]
    elif segs[0] in ("super", "self"):
        base = list(mod)
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                base = base[:-1]
            segs = segs[1:]
    else:
        return None
    full = base + segs
    # the longest prefix that is a module
    for n in range(len(full), -1, -1):
        if tuple(full[:n]) in modules:
            return tuple(full[:n])
    return None


# Every top-level module of shared/src, by layer (bottom first). A new module must be placed.
LAYERS = [
    ("pure", {"body", "config", "error", "expiry", "geometry", "ids", "metadata", "paging", "project", "request_id", "stats", "time", "ttl_cache"}),
    ("store", {"store", "sdk_http", "tls", "apigw"}),
    ("domain", {"domain"}),
    ("pipeline", {"pipeline"}),
    ("edge", {"auth", "envelope", "extract", "http", "http_error", "lambda", "pages", "state", "streamed", "lib"}),
]
# Crates pure code must not name: HTTP, Lambda, the stores.
NOT_PURE = re.compile(r"\b(axum|http|lambda_http|lambda_runtime|aws_sdk_dynamodb|aws_config|redb|tower|tower_http|reqwest)::")


def layer(mod):
    top = mod[0] if mod else "lib"
    for i, (_, names) in enumerate(LAYERS):
        if top in names:
            return i
    return None


def room(mod):
    if not mod:
        return "lib"
    if mod[0] == "domain" and len(mod) > 1:
        return "domain::" + mod[1]
    return mod[0]


def main():
    files = {}
    for d, _, fs in os.walk(ROOT):
        for f in fs:
            if f.endswith(".rs"):
                p = os.path.join(d, f)
                files[tuple(module_of(p))] = p
    modules = set(files)
    edges = defaultdict(set)  # module -> modules it uses
    for mod, p in files.items():
        src = strip_comments(open(p).read())
        # test modules are not part of the layering
        src = re.split(r"#\[cfg\(test\)\]", src)[0]
        paths = []
        for m in re.finditer(r"\buse\s+([^;]+);", src):
            paths += expand(m.group(1))
        paths += re.findall(r"\b((?:crate|super)(?:::\w+)+)", src)
        for path in paths:
            t = resolve(mod, path.strip(), modules)
            if t is not None and t != mod:
                edges[mod].add(t)

    problems = []
    for mod in sorted(files):
        if layer(mod) is None:
            problems.append(f"{'::'.join(mod)}: not in any layer of scripts/layers.py")
    for a, bs in sorted(edges.items()):
        for b in sorted(bs):
            la, lb = layer(a), layer(b)
            if la is not None and lb is not None and lb > la:
                problems.append(
                    f"{'::'.join(a)} ({LAYERS[la][0]}) uses {'::'.join(b)} ({LAYERS[lb][0]}), a higher layer"
                )
    for mod, p in sorted(files.items()):
        if layer(mod) == 0:
            src = re.split(r"#\[cfg\(test\)\]", strip_comments(open(p).read()))[0]
            for m in sorted(set(NOT_PURE.findall(src))):
                problems.append(f"{'::'.join(mod)} (pure) names the crate {m}")

    loops = []
    # room level
    redges = defaultdict(set)
    for a, bs in edges.items():
        for b in bs:
            if room(a) != room(b):
                redges[room(a)].add(room(b))
    loops += [("rooms", c) for c in cycles(redges)]
    # siblings inside a room (children of one parent module)
    sib = defaultdict(set)
    for a, bs in edges.items():
        for b in bs:
            if len(a) == len(b) and a[:-1] == b[:-1] and len(a) > 1:
                sib["::".join(a)].add("::".join(b))
    loops += [("siblings", c) for c in cycles(sib)]
    if "--graph" in sys.argv:
        for a in sorted(redges):
            print(a, "->", ", ".join(sorted(redges[a])))
    for p in problems:
        print(p)
    for kind, c in loops:
        print(f"loop ({kind}) among: " + ", ".join(c))
    if loops or problems:
        sys.exit(1)
    print("shared/src: layers kept, no module loops")


def cycles(g):
    """Strongly connected components of more than one node, each as one cycle through them."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    nodes = set(g) | {b for bs in g.values() for b in bs}

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            strong(v)
    return out


if __name__ == "__main__":
    main()
