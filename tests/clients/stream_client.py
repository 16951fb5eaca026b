#!/usr/bin/env python3
"""A stream client as a customer's server would write one (docs/streams.md), driven by
tests/api/stream_clients.rs: it subscribes over a WebSocket (the `websockets` package) or
Server-Sent Events (the standard library), then prints one JSON line per frame it gets:

  {"ready": true}                          subscribed (the test starts ingesting)
  {"id": "...", "type": "...", "body": {...}}   a message
  {"closed": {...}}                        the server ended the subscription
  {"error": {"status": 403, "message": "..."}}  refused (at the handshake or by an error frame)
  {"timeout": true}                        no frame within --timeout

--stuck: subscribe, say ready, then read nothing until a line arrives on stdin, with a tiny
receive buffer, so the server's queue for this client fills (a slow reader).
"""

import argparse
import http.client
import json
import socket
import sys
import time
import urllib.parse


def say(obj):
    print(json.dumps(obj), flush=True)


def message(body_text):
    body = json.loads(body_text)
    return {"id": body["id"], "type": body["type"], "body": body}


def run_ws(a, filt):
    from websockets.exceptions import ConnectionClosed, InvalidStatus
    from websockets.sync.client import connect

    url = a.base.replace("http://", "ws://", 1) + "/v1/api/streams/ws/"
    headers = {}
    if a.token:
        url += "?token=" + urllib.parse.quote(a.token)
    else:
        headers["Api-Key"] = a.key
    host, port = urllib.parse.urlsplit(a.base).netloc.split(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if a.stuck:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
    sock.connect((host, int(port)))
    try:
        # A stuck client answers no pings either: keepalive would end it before it reads.
        ws = connect(url, sock=sock, additional_headers=headers, max_queue=1 if a.stuck else 64,
                     open_timeout=a.timeout, ping_interval=None if a.stuck else 20)
    except InvalidStatus as e:
        body = json.loads(e.response.body or b"{}")
        say({"error": {"status": e.response.status_code, "message": json.dumps(body)}})
        return
    with ws:
        sub = {"action": "subscribe", "id": "s1", "filter": filt}
        if a.since:
            sub["since"] = a.since
        ws.send(json.dumps(sub))
        got = 0
        deadline = time.monotonic() + a.timeout
        while got < a.count:
            try:
                raw = ws.recv(timeout=max(0.01, deadline - time.monotonic()))
            except TimeoutError:
                say({"timeout": True})
                return
            except ConnectionClosed:
                say({"closed": {"reason": "connection"}})
                return
            deadline = time.monotonic() + a.timeout
            f = json.loads(raw)
            assert f["subscription"] == "s1", f
            if f.get("subscribed"):
                say({"ready": True})
                if a.stuck:
                    sys.stdin.readline()
                    deadline = time.monotonic() + a.timeout
            elif "message" in f:
                m = f["message"]
                say({"id": m["id"], "type": m["type"], "body": m})
                got += 1
            elif "closed" in f:
                say({"closed": f["closed"]})
                return
            elif "error" in f:
                say({"error": f["error"]})
                return


def run_sse(a, filt):
    u = urllib.parse.urlsplit(a.base)
    q = dict(filt)
    if a.token:
        q["token"] = a.token
    path = "/v1/api/streams/sse/?" + urllib.parse.urlencode(q)
    headers = {"Accept": "text/event-stream"}
    if not a.token:
        headers["Api-Key"] = a.key
    if a.since:
        headers["Last-Event-ID"] = a.since
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=a.timeout)
    conn.request("GET", path, headers=headers)
    res = conn.getresponse()
    if res.status != 200:
        say({"error": {"status": res.status, "message": res.read().decode()}})
        return
    got, event, data = 0, None, []
    while got < a.count:
        try:
            line = res.readline()
        except (TimeoutError, socket.timeout):
            say({"timeout": True})
            return
        if not line:
            say({"closed": {"reason": "connection"}})
            return
        line = line.decode().rstrip("\r\n")
        if line == ": subscribed":
            say({"ready": True})
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif line == "" and data:
            text = "\n".join(data)
            if event == "closed":
                say({"closed": json.loads(text)})
                return
            say(message(text))
            got += 1
            event, data = None, []


def main():
    p = argparse.ArgumentParser()
    p.add_argument("transport", choices=["ws", "sse"])
    p.add_argument("--base", required=True, help="http://127.0.0.1:PORT")
    p.add_argument("--key", default="")
    p.add_argument("--token", default="")
    p.add_argument("--filter", default="{}", help="a JSON object: user_id, group_id, trip_id, events")
    p.add_argument("--since", default="")
    p.add_argument("--count", type=int, default=1 << 30)
    p.add_argument("--timeout", type=float, default=30.0)
    p.add_argument("--stuck", action="store_true")
    a = p.parse_args()
    filt = json.loads(a.filter)
    (run_ws if a.transport == "ws" else run_sse)(a, filt)


if __name__ == "__main__":
    main()
