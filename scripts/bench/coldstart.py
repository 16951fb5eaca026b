"""Time from starting a Lambda function binary to its first request for work.

A minimal Lambda Runtime API answers nothing but records when the binary first asks for the next
invocation (the moment it is ready). Usage: coldstart.py BINARY [RUNS]
"""
import http.server
import os
import statistics
import subprocess
import sys
import threading
import time

binary = sys.argv[1]
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 10
ready = threading.Event()


class Api(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ready.set()
        time.sleep(5)  # hold the long poll; the process is killed meanwhile

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Api)
threading.Thread(target=server.serve_forever, daemon=True).start()
env = dict(os.environ,
           AWS_LAMBDA_RUNTIME_API=f"127.0.0.1:{server.server_address[1]}",
           AWS_LAMBDA_FUNCTION_NAME="bench", AWS_LAMBDA_FUNCTION_MEMORY_SIZE="128",
           AWS_LAMBDA_FUNCTION_VERSION="1", AWS_LAMBDA_LOG_STREAM_NAME="s", AWS_LAMBDA_LOG_GROUP_NAME="g",
           AWS_REGION="us-east-1", AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="x")
times = []
for _ in range(runs):
    ready.clear()
    start = time.perf_counter()
    p = subprocess.Popen([binary], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not ready.wait(10):
        p.kill()
        sys.exit(f"{binary} never asked for an event")
    times.append((time.perf_counter() - start) * 1000)
    p.kill()
    p.wait()
print(f"{os.path.basename(binary)}: start to ready median {statistics.median(times):.1f} ms, "
      f"min {min(times):.1f} ms, max {max(times):.1f} ms over {runs} runs")
