"""Time from starting a Lambda function binary to its first request for work.

A minimal Lambda Runtime API answers nothing but records when the binary first asks for the next
invocation (the moment it is ready). Several binaries are measured in turns (one run of each, then
the next round), so a change in the machine's load falls on all of them alike.

With --event FILE the first request for work is answered with that event, and the time is to the
binary's answer (its POST of a response or an error): a cold start that serves one invocation.
--event-for NAME=FILE gives binary NAME (its file name) an event of its own (a hello-world
lambda_http binary wants an API Gateway event). --keep-aws-env passes the AWS_* variables (e.g.
AWS_ENDPOINT_URL_DYNAMODB for DynamoDB Local) through.

Usage: coldstart.py [--runs N] [--json] [--event FILE] [--event-for NAME=FILE]... [--keep-aws-env] BINARY...
Prints one line per binary, or with --json one object {name: {median, min, max}} in ms.
"""
import argparse
import http.server
import json
import os
import statistics
import subprocess
import sys
import threading
import time

parser = argparse.ArgumentParser()
parser.add_argument("--runs", type=int, default=10)
parser.add_argument("--json", action="store_true")
parser.add_argument("--event")
parser.add_argument("--event-for", action="append", default=[])
parser.add_argument("--keep-aws-env", action="store_true")
parser.add_argument("binaries", nargs="+")
args = parser.parse_args()
ready = threading.Event()
# The event the current run serves (None: time to the first request), and whether it was served.
serving = {"event": None, "served": False}


class Api(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if serving["event"] is None:
            ready.set()
        elif not serving["served"]:
            serving["served"] = True
            body = serving["event"]
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Lambda-Runtime-Aws-Request-Id", "coldstart-1")
            self.send_header("Lambda-Runtime-Deadline-Ms", str(int(time.time() * 1000) + 30_000))
            self.send_header("Lambda-Runtime-Invoked-Function-Arn",
                             "arn:aws:lambda:us-east-1:123456789012:function:bench")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        time.sleep(5)  # hold the long poll; the process is killed meanwhile

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(202)
        self.send_header("Content-Length", "0")
        self.end_headers()
        ready.set()

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Api)
threading.Thread(target=server.serve_forever, daemon=True).start()
# What Lambda sets for a function; nothing that points the SDK at a local endpoint.
env = {k: v for k, v in os.environ.items() if args.keep_aws_env or not k.startswith("AWS_")}
env.update(AWS_LAMBDA_RUNTIME_API=f"127.0.0.1:{server.server_address[1]}",
           AWS_LAMBDA_FUNCTION_NAME="bench", AWS_LAMBDA_FUNCTION_MEMORY_SIZE="128",
           AWS_LAMBDA_FUNCTION_VERSION="1", AWS_LAMBDA_LOG_STREAM_NAME="s", AWS_LAMBDA_LOG_GROUP_NAME="g",
           AWS_REGION="us-east-1", AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="x")
events = dict(e.split("=", 1) for e in args.event_for)


def event_of(binary):
    path = events.get(os.path.basename(binary), args.event)
    if path is None:
        return None
    with open(path, "rb") as f:
        return f.read()


def once(binary):
    ready.clear()
    serving.update(event=event_of(binary), served=False)
    start = time.perf_counter()
    p = subprocess.Popen([binary], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not ready.wait(10):
        p.kill()
        sys.exit(f"{binary} never asked for an event (or never answered it)")
    took = (time.perf_counter() - start) * 1000
    p.kill()
    p.wait()
    return took


times = {b: [] for b in args.binaries}
for _ in range(args.runs):
    for b in args.binaries:
        times[b].append(once(b))
names = [os.path.basename(b) for b in args.binaries]
name = (lambda b: os.path.basename(b)) if len(set(names)) == len(names) else (lambda b: b)  # noqa: E731
result = {name(b): {"median": statistics.median(t), "min": min(t), "max": max(t)} for b, t in times.items()}
if args.json:
    print(json.dumps(result))
else:
    for name, r in result.items():
        what = "start to answer" if args.event or args.event_for else "start to ready"
        print(f"{name}: {what} median {r['median']:.1f} ms, min {r['min']:.1f} ms, "
              f"max {r['max']:.1f} ms over {args.runs} runs")
