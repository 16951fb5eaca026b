"""Time from starting a Lambda function binary to its first request for work.

A minimal Lambda Runtime API answers nothing but records when the binary first asks for the next
invocation (the moment it is ready). Several binaries are measured in turns (one run of each, then
the next round), so a change in the machine's load falls on all of them alike.

Usage: coldstart.py [--runs N] [--json] BINARY...
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
parser.add_argument("binaries", nargs="+")
args = parser.parse_args()
ready = threading.Event()


class Api(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ready.set()
        time.sleep(5)  # hold the long poll; the process is killed meanwhile

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Api)
threading.Thread(target=server.serve_forever, daemon=True).start()
# What Lambda sets for a function; nothing that points the SDK at a local endpoint.
env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
env.update(AWS_LAMBDA_RUNTIME_API=f"127.0.0.1:{server.server_address[1]}",
           AWS_LAMBDA_FUNCTION_NAME="bench", AWS_LAMBDA_FUNCTION_MEMORY_SIZE="128",
           AWS_LAMBDA_FUNCTION_VERSION="1", AWS_LAMBDA_LOG_STREAM_NAME="s", AWS_LAMBDA_LOG_GROUP_NAME="g",
           AWS_REGION="us-east-1", AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="x")


def once(binary):
    ready.clear()
    start = time.perf_counter()
    p = subprocess.Popen([binary], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not ready.wait(10):
        p.kill()
        sys.exit(f"{binary} never asked for an event")
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
        print(f"{name}: start to ready median {r['median']:.1f} ms, min {r['min']:.1f} ms, "
              f"max {r['max']:.1f} ms over {args.runs} runs")
