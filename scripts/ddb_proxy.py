#!/usr/bin/env python3
"""A DynamoDB proxy that prices every call per partition key and can inject DynamoDB's faults.

    python3 scripts/ddb_proxy.py --upstream http://127.0.0.1:8000 [--port 0] [--faults JSON]

Prints `PORT <n>` as its first line; point `AWS_ENDPOINT_URL_DYNAMODB` at it. DynamoDB Local
reports 2 capacity units for a whole transaction and nothing per partition, so it cannot say
which key passes AWS's per-partition limits (1,000 WCU/s, 3,000 RCU/s) first. This proxy prices
each call by AWS's rules per table and exact `pk`, and per pattern of `pk` (ids replaced by
placeholders). Request bytes and the `Host` header go upstream unchanged (SigV4 signs the host),
except when a fault makes it send part of a batch. Standard library only.

Endpoints on the same port: `GET /__proxy/stats` (`?brief=1`: totals only, cheap to poll;
`?keys=N`: also the N hottest exact keys),
`POST /__proxy/reset`, `GET|POST /__proxy/faults` (the body replaces the fault config; `{}`
turns every fault off). Fault keys (all off unless set): `seed`; `throttle` {write_per_pk,
read_per_pk, burst_s}: token buckets per table and exact pk, in units/s; `throttle_error`
(ProvisionedThroughputExceededException, the default, or ThrottlingException); `conflict`;
`conflict_rate`, `internal_error_rate`, `lost_answer_rate`, `unprocessed_rate`, `slow_rate` with
`slow_ms`; `ops`: operation names the random faults apply to (default all).

Pricing approximations (what a proxy cannot see exactly):
- An item's size before a write comes from a cache of every item seen through the proxy. For a
  table the proxy saw created, an unseen key is absent; otherwise it is looked up once with an
  un-billed BatchGetItem. So the figures assume every write goes through the proxy.
- UpdateItem's size after the call is read back un-billed (or taken from ALL_NEW). An Update in a
  transaction (Waymark only `ADD`s to counters) is priced at its old size, or for a new item at
  its key plus the update's names and values.
- Query/Scan bill the summed size of the items read, rounded up to 4 KB once a call. Items a
  filter dropped (or all of them, for Select COUNT) are not returned: they are priced at the
  average size of the partition's cached items (else of the returned ones).
- A projected read is priced at the cached full size of the item when known.
- ConditionCheck in TransactWriteItems: 2 write units per KB like the other actions (a published
  measurement on live DynamoDB found it billed as writes; the developer guide only says a
  transaction costs two underlying reads or writes per item). A TransactWriteItems repeated with
  a ClientRequestToken that already succeeded is billed 2 read units per 4 KB an item (AWS: an
  idempotent replay is a read) and writes nothing.
- Cancelled transactions are billed as if they had run, injected conflicts too (AWS bills them);
  throttled calls and injected internal errors are not billed (nothing reached the table).
"""
import argparse, gzip, http.client, json, math, random, re, socket, threading, time, traceback, uuid, zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

NS = "com.amazonaws.dynamodb.v20120810#"
HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
       "content-length", "expect"}
THROTTLE_MSG = ("Throughput exceeds the current capacity of your table or index. DynamoDB is automatically "
                "scaling your table or index so please try again shortly. If exceptions persist, check if "
                "you have a hot key: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/"
                "bp-partition-key-design.html.")
WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}

from ddb_cost import item_size, key_of, pattern, ru, value_size, wu  # noqa: E402 (beside this file)

# ---------------------------------------------------------------- stats

class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        with self.lock:
            self.since = time.time()
            self.keys = {}      # (table, pk) -> [actions, wcu, rcu]
            self.patterns = {}  # (table, pattern) -> [calls, actions, wcu, rcu, wcu of count items]
            self.ops = {}       # op -> {calls, wcu, rcu, errors}
            self.totals = dict(calls=0, wcu=0.0, rcu=0.0, transactions=0, cancelled=0, cancel_reasons={},
                               condition_failed=0, condition_failed_by={}, idempotent_replays=0, unbilled_calls=0, upstream_errors=0,
                               upstream_s=0.0, proxy_s=0.0)
            self.faults = dict(throttled_calls=0, throttled_items=0, conflicts=0, random_conflicts=0,
                               internal_errors=0, lost_answers=0, unprocessed_calls=0, unprocessed_items=0, slowed=0)

    def count(self, section, name, n=1):
        with self.lock:
            d = self.faults if section == "faults" else self.totals
            if section in ("cancel_reasons", "condition_failed_by"):  # counts by reason, by pattern
                d = d[section]; d.setdefault(name, 0)
            d[name] += n

    def commit(self, op, charges, status, etype, up_s, all_s):
        """One call; charges are (table, pk, wcu, rcu[, sk]), one an item action (a write's sort key
        says whether it wrote a list's own count item, `~…`: counted apart, as `wcu_counts`)."""
        with self.lock:
            t = self.totals
            t["calls"] += 1; t["upstream_s"] += up_s; t["proxy_s"] += all_s - up_s
            o = self.ops.setdefault(op, dict(calls=0, wcu=0.0, rcu=0.0, errors={}))
            o["calls"] += 1
            if status >= 400:
                o["errors"][etype] = o["errors"].get(etype, 0) + 1
            touched = set()
            for table, pk, w, r, *sk in charges:
                k = self.keys.setdefault((table, pk), [0, 0.0, 0.0])
                k[0] += 1; k[1] += w; k[2] += r
                pt = (table, pattern(table, pk))
                p = self.patterns.setdefault(pt, [0, 0, 0.0, 0.0, 0.0])
                p[1] += 1; p[2] += w; p[3] += r
                if sk and sk[0].startswith("~"):
                    p[4] += w
                touched.add(pt)
                o["wcu"] += w; o["rcu"] += r; t["wcu"] += w; t["rcu"] += r
            for pt in touched:
                self.patterns[pt][0] += 1

    def snapshot(self, brief=False, keys=0):
        with self.lock:
            out = dict(since=self.since, seconds=time.time() - self.since, totals=json.loads(json.dumps(self.totals)),
                       faults=dict(self.faults))
            if brief:
                return out
            hot = {}
            for (table, pk), (_, w, r) in self.keys.items():
                h = hot.setdefault((table, pattern(table, pk)), [0, (-1, "", 0, 0), (-1, "", 0, 0)])
                h[0] += 1
                if w > h[1][0]:
                    h[1] = (w, pk, w, r)
                if r > h[2][0]:
                    h[2] = (r, pk, w, r)
            rows = []
            for (table, pat), (calls, actions, w, r, wc) in self.patterns.items():
                n, hw, hr = hot[(table, pat)]
                rows.append(dict(table=table, pattern=pat, calls=calls, actions=actions, wcu=w, rcu=r, keys=n, wcu_counts=wc,
                                 hottest_write=dict(pk=hw[1], wcu=hw[2], rcu=hw[3]),
                                 hottest_read=dict(pk=hr[1], wcu=hr[2], rcu=hr[3])))
            rows.sort(key=lambda x: (-x["wcu"], -x["rcu"]))
            out.update(patterns=rows, ops=json.loads(json.dumps(self.ops)))
            if keys:  # the hottest exact keys, by write then read units
                top = sorted(self.keys.items(), key=lambda kv: (-kv[1][1], -kv[1][2]))[:keys]
                out["keys"] = [dict(table=t, pk=pk, actions=n, wcu=w, rcu=r) for (t, pk), (n, w, r) in top]
            return out

STATS = Stats()

# ---------------------------------------------------------------- item size cache

class Sizes:
    """Each item's size by (table, pk, sk): None unknown, 0 absent; and per partition the sum and
    number of its items, to price the items a filter kept out of sight."""

    def __init__(self):
        self.lock = threading.Lock()
        self.items, self.parts, self.created = {}, {}, set()

    def get(self, k):
        s = self.items.get(k)
        return 0 if s is None and k[0] in self.created else s

    def set(self, k, size):
        with self.lock:
            old = self.items.get(k)
            if old == size:
                return
            self.items[k] = size
            agg = self.parts.setdefault(k[:2], [0, 0])
            if old:
                agg[0] -= old; agg[1] -= 1
            if size:
                agg[0] += size; agg[1] += 1

    def avg(self, table, pk):
        agg = self.parts.get((table, pk))
        return agg[0] / agg[1] if agg and agg[1] else None

SIZES = Sizes()

# ---------------------------------------------------------------- faults

class Faults:
    def __init__(self):
        self.lock = threading.Lock()
        self.configure({})

    def configure(self, cfg):
        with self.lock:
            self.cfg = dict(cfg)
            self.rng = random.Random(cfg.get("seed", 0))
            self.buckets = {}   # (table, pk, "w"|"r") -> [tokens, last refill]
            self.inflight = {}  # (table, pk, sk) -> transactions in flight here touching it

    def hit(self, name, op):
        """A random fault's draw: seeded, though the order of draws follows thread scheduling."""
        p, ops = self.cfg.get(name) or 0, self.cfg.get("ops")
        if p <= 0 or (ops and op not in ops):
            return False
        with self.lock:
            return self.rng.random() < p

    def pick(self, seq, k):
        with self.lock:
            return self.rng.sample(seq, k)

    def _bucket(self, key, now):
        th = self.cfg.get("throttle") or {}
        rate = th.get("write_per_pk" if key[2] == "w" else "read_per_pk")
        if not rate:
            return None
        cap = rate * th.get("burst_s", 1.0)
        b = self.buckets.setdefault(key, [cap, now])
        b[0], b[1] = min(cap, b[0] + (now - b[1]) * rate), now
        return b

    def admit(self, needs):
        """needs: {(table, pk, kind): units}. If every bucket has its units, takes them all and
        answers []; else takes nothing and answers the keys short of units."""
        if not self.cfg.get("throttle"):
            return []
        with self.lock:
            now = time.monotonic()
            bs = {k: self._bucket(k, now) for k in needs}
            short = [k for k, b in bs.items() if b is not None and b[0] < needs[k]]
            if not short:
                for k, b in bs.items():
                    if b is not None:
                        b[0] -= needs[k]
            return short

    def debit(self, key, units):
        """Reads are let in on an estimate and settled after: a bucket may go below zero, as
        DynamoDB lets a read through and makes the ones after it wait."""
        if units and self.cfg.get("throttle"):
            with self.lock:
                b = self._bucket(key, time.monotonic())
                if b is not None:
                    b[0] -= units

    def enter(self, keys):
        """Registers a transaction's items, unless another one in flight holds some: those."""
        with self.lock:
            clash = [i for i, k in enumerate(keys) if k in self.inflight]
            if not clash:
                for k in keys:
                    self.inflight[k] = self.inflight.get(k, 0) + 1
            return clash

    def leave(self, keys):
        with self.lock:
            for k in keys:
                self.inflight[k] -= 1
                if not self.inflight[k]:
                    del self.inflight[k]

FAULTS = Faults()
TOKENS, TOKENS_LOCK = {}, threading.Lock()  # ClientRequestToken -> when it succeeded (AWS: 10 min)

# ---------------------------------------------------------------- answers the proxy makes

class Answer(Exception):
    def __init__(self, status, etype, message, **extra):
        self.status = status
        self.body = json.dumps(dict({"__type": NS + etype, "Message": message}, **extra)).encode()

def throttled(table, kind):
    # Key-range throttling on an on-demand table is ProvisionedThroughputExceededException with
    # the reason `Table{Read,Write}KeyRangeThroughputExceeded` (AWS's throttling guide: both modes).
    return Answer(400, FAULTS.cfg.get("throttle_error", "ProvisionedThroughputExceededException"), THROTTLE_MSG,
                  ThrottlingReasons=[{"reason": "Table%sKeyRangeThroughputExceeded" % kind,
                                      "resource": "arn:aws:dynamodb:ddblocal:000000000000:table/" + table}])

def cancelled(codes):
    """TransactionCanceledException as DynamoDB (Local too) shapes it: a reason per item, in order."""
    msg = {"ThrottlingError": THROTTLE_MSG, "TransactionConflict": "Transaction is ongoing for the item"}
    return Answer(400, "TransactionCanceledException",
                  "Transaction cancelled, please refer cancellation reasons for specific reasons [%s]" % ", ".join(codes),
                  CancellationReasons=[{"Code": c, "Message": msg[c]} if c in msg else {"Code": c} for c in codes])

def rebody(status, headers, out):
    """An answer the proxy rewrote: DynamoDB's checksum header must be of the new bytes."""
    body = json.dumps(out).encode()
    hs = [(k, v) for k, v in headers if k.lower() not in ("x-amz-crc32", "content-encoding")]
    return status, hs + [("x-amz-crc32", str(zlib.crc32(body)))], body

def query_pk(req):
    names, vals = req.get("ExpressionAttributeNames") or {}, req.get("ExpressionAttributeValues") or {}
    for n, v in re.findall(r"([#\w.]+)\s*=\s*(:\w+)", req.get("KeyConditionExpression", "")):
        if names.get(n, n) == "pk":
            return vals.get(v, {}).get("S", "")
    kc = (req.get("KeyConditions") or {}).get("pk")
    return kc["AttributeValueList"][0].get("S", "") if kc else "(unknown)"

# ---------------------------------------------------------------- the handler

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"   # keep-alive, as the SDK's connection pool expects
    disable_nagle_algorithm = True
    upstream = None                 # set in main()

    def log_message(self, *a):
        pass

    def setup(self):
        super().setup()
        self.conn = None  # this client connection's own upstream connection (one thread each)

    def finish(self):
        super().finish()
        if self.conn:
            self.conn.close()

    def send(self, status, headers, body):
        """Head and body in one write: two small writes meet delayed ACKs (40 ms a call)."""
        head = ["HTTP/1.1 %d %s\r\n" % (status, http.client.responses.get(status, ""))]
        head += ["%s: %s\r\n" % kv for kv in headers] + ["Content-Length: %d\r\n\r\n" % len(body)]
        self.wfile.write("".join(head).encode("latin-1") + body)

    def send_json(self, status, obj):
        self.send(status, [("Content-Type", "application/json")], json.dumps(obj, indent=1).encode())

    def call_up(self, headers, body):
        """One upstream call. Sent again only when a kept-alive connection failed (upstream closed
        it while idle): on a fresh one the call may have been applied, and a write must not twice."""
        for attempt in (0, 1):
            reused = self.conn is not None
            try:
                if not reused:
                    self.conn = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port or 80, timeout=120)
                    self.conn.connect()
                    self.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self.conn.putrequest("POST", self.path, skip_host=True, skip_accept_encoding=True)
                for k, v in headers:
                    self.conn.putheader(k, v)
                self.conn.putheader("Content-Length", str(len(body)))
                self.conn.endheaders(body)
                r = self.conn.getresponse()
                return r.status, r.getheaders(), r.read()
            except (http.client.HTTPException, OSError):
                if self.conn:
                    self.conn.close()
                self.conn = None
                if attempt or not reused:
                    raise

    def forward(self, req=None, raw=None):
        """Upstream's answer: the client's bytes, or `req` re-encoded when the proxy changed it."""
        t = time.monotonic()
        status, headers, data = self.call_up(self.fwd_headers, raw if req is None else json.dumps(req).encode())
        self.up_s += time.monotonic() - t
        headers = [(k, v) for k, v in headers if k.lower() not in HOP]
        gz = any(k.lower() == "content-encoding" and "gzip" in v for k, v in headers)
        try:
            out = json.loads(gzip.decompress(data) if gz else data) if data else {}
        except ValueError:
            out = {}
        return status, headers, data, out

    def unbilled(self, op, req):
        """A call of the proxy's own (not billed), with the client's credentials: DynamoDB Local
        keeps one database per access key and region."""
        hs = [(k, v) for k, v in self.fwd_headers if k.lower() != "x-amz-target"]
        STATS.count("totals", "unbilled_calls")
        status, _, data = self.call_up(hs + [("X-Amz-Target", "DynamoDB_20120810." + op)], json.dumps(req).encode())
        return json.loads(data) if status == 200 else {}

    def ensure_sizes(self, keys):
        """Looks up the keys whose size the cache cannot tell (BatchGetItem, 100 a call)."""
        miss = sorted({k for k in keys if SIZES.get(k) is None})
        for i in range(0, len(miss), 100):
            by_table = {}
            for t, pk, sk in miss[i:i + 100]:
                by_table.setdefault(t, {"Keys": [], "ConsistentRead": True})["Keys"].append(
                    {"pk": {"S": pk}, "sk": {"S": sk}})
            for t, items in self.unbilled("BatchGetItem", {"RequestItems": by_table}).get("Responses", {}).items():
                for it in items:
                    SIZES.set(key_of(t, it), item_size(it))
            for k in miss[i:i + 100]:
                if SIZES.get(k) is None:
                    SIZES.set(k, 0)

    def read_size(self, table, item, projected):
        """An item read, at its full size (a projected one at its cached size when known)."""
        k, s = key_of(table, item), item_size(item)
        if projected:
            return max(s, SIZES.get(k) or 0)
        SIZES.set(k, s)
        return s

    def do_GET(self):
        if self.path.startswith("/__proxy/stats"):
            q = dict(kv.split("=", 1) for kv in urlsplit(self.path).query.split("&") if "=" in kv)
            return self.send_json(200, STATS.snapshot(brief="brief" in q, keys=int(q.get("keys", 0))))
        if self.path.startswith("/__proxy/faults"):
            return self.send_json(200, FAULTS.cfg)
        self.send_json(404, {"error": "not found"})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))  # the SDK always sends it
        if self.path.startswith("/__proxy/reset"):
            STATS.reset()
            return self.send_json(200, {"reset": True})
        if self.path.startswith("/__proxy/faults"):
            FAULTS.configure(json.loads(body or b"{}"))
            return self.send_json(200, FAULTS.cfg)
        t0, op = time.monotonic(), self.headers.get("X-Amz-Target", "").rpartition(".")[2] or "(none)"
        self.op = op
        self.fwd_headers = [(k, v) for k, v in self.headers.items() if k.lower() not in HOP]
        self.up_s, self.charges = 0.0, []
        try:
            req = json.loads(body)
        except ValueError:
            req = None
        try:
            status, headers, data = self.dynamo(op, req, body)
        except Answer as a:
            status, headers, data = a.status, [("Content-Type", "application/x-amz-json-1.0")], a.body
            headers.append(("x-amzn-RequestId", str(uuid.uuid4())))
        except Exception as e:  # upstream unreachable, or a bug here: DynamoDB's 500 (the SDK retries)
            if not isinstance(e, (http.client.HTTPException, OSError)):
                traceback.print_exc()
            STATS.count("totals", "upstream_errors")
            status, headers = 500, [("Content-Type", "application/x-amz-json-1.0")]
            data = json.dumps({"__type": NS + "InternalServerError", "Message": "proxy: %r" % e}).encode()
        etype = ""
        if status >= 400:
            try:
                etype = json.loads(data).get("__type", "").rpartition("#")[2]
            except ValueError:
                etype = "?"
        STATS.commit(op, self.charges, status, etype, self.up_s, time.monotonic() - t0)
        if status == 200 and op in WRITES and FAULTS.hit("lost_answer_rate", op):
            STATS.count("faults", "lost_answers")  # applied upstream; the client sees its connection close
            self.close_connection = True
            return
        if FAULTS.hit("slow_rate", op):
            STATS.count("faults", "slowed")
            time.sleep(FAULTS.cfg.get("slow_ms", 0) / 1000)
        self.send(status, headers, data)

    def dynamo(self, op, req, raw):
        if FAULTS.hit("internal_error_rate", op):
            STATS.count("faults", "internal_errors")
            raise Answer(500, "InternalServerError", "Internal server error")
        fn = getattr(self, "op_" + op, None)
        if not isinstance(req, dict) or fn is None:
            status, headers, data, out = self.forward(raw=raw)
            table = req.get("TableName", "-") if isinstance(req, dict) else "-"
            if op == "CreateTable" and status == 200:
                SIZES.created.add(table)  # from now on every item of it passes here
            self.charges.append((table, "(control)", 0.0, 0.0))
            return status, headers, data
        return fn(req, raw)

    # -- operations: each admits (throttle), forwards, then prices what upstream did

    def op_PutItem(self, req, raw):  # also UpdateItem, DeleteItem
        op, table = self.op, req["TableName"]
        k = key_of(table, req.get("Key") or req.get("Item"))
        self.ensure_sizes([k])
        new, old = item_size(req.get("Item")), SIZES.get(k) or 0
        units = wu(max(new, old))  # AWS: the larger of the item before and after
        if FAULTS.admit({(table, k[1], "w"): units}):
            STATS.count("faults", "throttled_calls")
            raise throttled(table, "Write")
        status, headers, data, out = self.forward(raw=raw)
        if status == 200 and op == "UpdateItem":
            attrs = out.get("Attributes") if req.get("ReturnValues") == "ALL_NEW" else None
            if attrs is None:
                attrs = self.unbilled("GetItem", {"TableName": table, "Key": req["Key"], "ConsistentRead": True}).get("Item")
            new = item_size(attrs)
            units = wu(max(new, old))
        failed = status == 400 and out.get("__type", "").endswith("#ConditionalCheckFailedException")
        if status == 200 or failed:  # AWS bills a write whose condition failed
            self.charges.append((table, k[1], float(units), 0.0, k[2]))
            if failed:
                STATS.count("totals", "condition_failed")
                STATS.count("condition_failed_by", "%s: %s" % (table, pattern(table, k[1])))
            else:
                SIZES.set(k, 0 if op == "DeleteItem" else new)
        return status, headers, data

    op_UpdateItem = op_DeleteItem = op_PutItem

    def op_GetItem(self, req, raw):
        table, factor = req["TableName"], 1.0 if req.get("ConsistentRead") else 0.5
        k = key_of(table, req["Key"])
        if FAULTS.admit({(table, k[1], "r"): factor}):
            STATS.count("faults", "throttled_calls")
            raise throttled(table, "Read")
        status, headers, data, out = self.forward(raw=raw)
        if status == 200:
            size = self.read_size(table, out["Item"], "ProjectionExpression" in req) if "Item" in out else 0
            r = ru(size) * factor
            FAULTS.debit((table, k[1], "r"), r - factor)
            self.charges.append((table, k[1], 0.0, r))
        return status, headers, data

    def op_Query(self, req, raw):  # also Scan
        """The summed size of the items read, rounded up to 4 KB once a call."""
        pk = query_pk(req) if self.op == "Query" else "(scan)"
        table, factor = req["TableName"], 1.0 if req.get("ConsistentRead") else 0.5
        if FAULTS.admit({(table, pk, "r"): factor}):
            STATS.count("faults", "throttled_calls")
            raise throttled(table, "Read")
        status, headers, data, out = self.forward(raw=raw)
        if status != 200:
            return status, headers, data
        projected = "ProjectionExpression" in req or req.get("Select") not in (None, "ALL_ATTRIBUTES")
        sizes = [self.read_size(table, it, projected) for it in out.get("Items", [])]
        unseen = max(0, out.get("ScannedCount", len(sizes)) - len(sizes))
        avg = (SIZES.avg(table, pk) if pk != "(scan)" else None) or (sum(sizes) / len(sizes) if sizes else 100)
        r = ru(sum(sizes) + unseen * avg) * factor
        FAULTS.debit((table, pk, "r"), r - factor)
        self.charges.append((table, pk, 0.0, r))
        return status, headers, data

    def split(self, entries, units, kind, op):
        """Which entries of a batch go upstream: those the buckets let in, less (a fault) a random
        part; the rest are answered unprocessed, as DynamoDB does. None let in: throttled."""
        keep, held = [], []
        for i, (t, k) in enumerate(entries):
            (held if FAULTS.admit({(t, k[1], kind[0].lower()): units[i]}) else keep).append(i)
        if held:
            STATS.count("faults", "throttled_items", len(held))
            if not keep:
                STATS.count("faults", "throttled_calls")
                raise throttled(entries[0][0], kind)
        if len(keep) > 1 and FAULTS.hit("unprocessed_rate", op):
            moved = set(FAULTS.pick(keep, 1 + FAULTS.pick(range(len(keep) - 1), 1)[0]))
            keep, held = [i for i in keep if i not in moved], sorted(held + list(moved))
            STATS.count("faults", "unprocessed_calls")
            STATS.count("faults", "unprocessed_items", len(moved))
        return keep, held

    def op_BatchWriteItem(self, req, raw):
        reqs = []  # (table, request, key, new size: None for a delete)
        for table, rs in req["RequestItems"].items():
            for r in rs:
                it = r.get("PutRequest", {}).get("Item")
                reqs.append((table, r, key_of(table, it or r["DeleteRequest"]["Key"]), item_size(it) if it else None))
        self.ensure_sizes([x[2] for x in reqs])
        units = [wu(max(n or 0, SIZES.get(k) or 0)) for _, _, k, n in reqs]
        keep, held = self.split([(x[0], x[2]) for x in reqs], units, "Write", "BatchWriteItem")
        group = lambda idx: {t: [reqs[i][1] for i in idx if reqs[i][0] == t] for t in {reqs[i][0] for i in idx}}
        status, headers, data, out = self.forward(dict(req, RequestItems=group(keep)) if held else None, raw)
        if status != 200:
            return status, headers, data
        un = {key_of(t, r.get("PutRequest", {}).get("Item") or r.get("DeleteRequest", {}).get("Key", {}))
              for t, rs in out.get("UnprocessedItems", {}).items() for r in rs}
        for i in keep:
            t, _, k, n = reqs[i]
            if k not in un:
                self.charges.append((t, k[1], float(units[i]), 0.0, k[2]))
                SIZES.set(k, n or 0)
        if not held:
            return status, headers, data
        for t, rs in group(held).items():
            out.setdefault("UnprocessedItems", {}).setdefault(t, []).extend(rs)
        return rebody(status, headers, out)

    def op_BatchGetItem(self, req, raw):
        keys = [(t, ka, key_of(t, key), key) for t, ka in req["RequestItems"].items() for key in ka["Keys"]]
        est = [1.0 if ka.get("ConsistentRead") else 0.5 for _, ka, _, _ in keys]
        keep, held = self.split([(x[0], x[2]) for x in keys], est, "Read", "BatchGetItem")

        def gather(idx):
            out = {}
            for i in idx:
                out.setdefault(keys[i][0], dict(keys[i][1], Keys=[]))["Keys"].append(keys[i][3])
            return out
        status, headers, data, out = self.forward(dict(req, RequestItems=gather(keep)) if held else None, raw)
        if status != 200:
            return status, headers, data
        un = {key_of(t, key) for t, ka in out.get("UnprocessedKeys", {}).items() for key in ka.get("Keys", [])}
        found = {key_of(t, it): self.read_size(t, it, "ProjectionExpression" in req["RequestItems"].get(t, {}))
                 for t, items in out.get("Responses", {}).items() for it in items}
        for i in keep:
            t, _, k, _ = keys[i]
            if k not in un:
                r = ru(found.get(k, 0)) * est[i]  # an absent item costs the minimum, as on AWS
                FAULTS.debit((t, k[1], "r"), r - est[i])
                self.charges.append((t, k[1], 0.0, r))
        if not held:
            return status, headers, data
        for t, ka in gather(held).items():
            out.setdefault("UnprocessedKeys", {}).setdefault(t, dict(ka, Keys=[]))["Keys"].extend(ka["Keys"])
        return rebody(status, headers, out)

    op_Scan = op_Query

    def op_TransactWriteItems(self, req, raw):
        acts = []  # (action, table, key, size it is priced at)
        for ti in req["TransactItems"]:
            (kind, a), = ((k, v) for k, v in ti.items() if k in ("Put", "Update", "Delete", "ConditionCheck"))
            t = a["TableName"]
            acts.append((kind, t, key_of(t, a.get("Item") or a["Key"]), a))
        self.ensure_sizes([x[2] for x in acts])
        for i, (kind, t, k, a) in enumerate(acts):
            old = SIZES.get(k) or 0
            if kind == "Put":    # the larger of the old and the new item
                size = max(old, item_size(a["Item"]))
            elif kind == "Update":  # an ADD barely changes a counter; a new one is its key and values
                size = old or item_size(a["Key"]) + sum(len(n.encode()) for n in a.get("ExpressionAttributeNames", {}).values()) \
                    + sum(value_size(v) for v in a.get("ExpressionAttributeValues", {}).values())
            else:                # Delete, ConditionCheck: the item as it is
                size = old
            acts[i] = (kind, t, k, size)
        units, keys = [2.0 * wu(x[3]) for x in acts], [x[2] for x in acts]
        STATS.count("totals", "transactions")
        needs = {}
        for (_, t, k, _), u in zip(acts, units):
            needs[(t, k[1], "w")] = needs.get((t, k[1], "w"), 0) + u
        short = {(t, pk) for t, pk, _ in FAULTS.admit(needs)}
        if short:  # a transaction is never partly applied: throttled items named, the rest None
            STATS.count("faults", "throttled_calls")
            STATS.count("faults", "throttled_items", sum(k[:2] in short for k in keys))
            raise cancelled(["ThrottlingError" if k[:2] in short else "None" for k in keys])
        clash = FAULTS.enter(keys) if FAULTS.cfg.get("conflict") else []
        entered = bool(FAULTS.cfg.get("conflict")) and not clash  # registered: leave when answered
        try:
            if clash:
                STATS.count("faults", "conflicts")
            elif FAULTS.hit("conflict_rate", "TransactWriteItems"):
                clash = FAULTS.pick(range(len(keys)), 1)
                STATS.count("faults", "random_conflicts")
            if clash:
                self.bill_transaction(acts, units, ["TransactionConflict"])
                raise cancelled(["TransactionConflict" if i in clash else "None" for i in range(len(keys))])
            token = req.get("ClientRequestToken")
            with TOKENS_LOCK:
                replay = token in TOKENS and time.time() - TOKENS[token] < 600
            status, headers, data, out = self.forward(raw=raw)
        finally:
            if entered:
                FAULTS.leave(keys)
        if status == 200 and replay:
            STATS.count("totals", "idempotent_replays")
            self.charges += [(t, k[1], 0.0, 2.0 * ru(s)) for _, t, k, s in acts]
        elif status == 200:
            self.bill_transaction(acts, units, None)
            for kind, t, k, s in acts:
                if kind != "ConditionCheck":
                    SIZES.set(k, 0 if kind == "Delete" else s)
            if token:
                with TOKENS_LOCK:
                    if len(TOKENS) > 100000:
                        TOKENS.clear()
                    TOKENS[token] = time.time()
        elif out.get("__type", "").endswith("#TransactionCanceledException"):
            self.bill_transaction(acts, units, [r.get("Code", "?") for r in out.get("CancellationReasons", [])])
        return status, headers, data

    def bill_transaction(self, acts, units, reasons):
        self.charges += [(t, k[1], u, 0.0, k[2]) for (_, t, k, _), u in zip(acts, units)]
        if reasons is not None:
            STATS.count("totals", "cancelled")
            for c in set(reasons) - {"None"}:
                STATS.count("cancel_reasons", c)
            for (_, t, k, _), c in zip(acts, reasons):
                if c == "ConditionalCheckFailed":
                    STATS.count("condition_failed_by", "%s: %s (in a transaction)" % (t, pattern(t, k[1])))

    def op_TransactGetItems(self, req, raw):
        gets = [(g["Get"]["TableName"], key_of(g["Get"]["TableName"], g["Get"]["Key"]), "ProjectionExpression" in g["Get"])
                for g in req["TransactItems"]]
        status, headers, data, out = self.forward(raw=raw)
        if status == 200:
            for (t, k, proj), resp in zip(gets, out.get("Responses", [])):
                size = self.read_size(t, resp["Item"], proj) if resp.get("Item") else 0
                self.charges.append((t, k[1], 0.0, 2.0 * ru(size)))
        return status, headers, data

class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # the SDK opens its pool's connections at once under load
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        # A client that closed its connection (the SDK dropping a poisoned one after a lost
        # answer) is normal here; anything else is printed as before.
        import sys
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--upstream", required=True, help="DynamoDB (Local) base URL, e.g. http://127.0.0.1:8000")
    ap.add_argument("--port", type=int, default=0, help="port to listen on (0: a free one)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--faults", default="{}", help="initial fault config (JSON)")
    a = ap.parse_args()
    Handler.upstream = urlsplit(a.upstream)
    FAULTS.configure(json.loads(a.faults))
    srv = Server((a.host, a.port), Handler)
    print("PORT %d" % srv.server_address[1], flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass

if __name__ == "__main__":
    main()
