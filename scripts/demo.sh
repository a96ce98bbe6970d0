#!/usr/bin/env bash
# The first README command: set up the host, build Hutch, build the default image if missing,
# start hutchd (left running), and run the example of the reference system's flow: sandbox
# "agent-session-47" clones a Node project from a git server on this host, runs npm install
# against the npm registry through the egress proxy, and runs npm test; then sandbox
# "dev-server-demo" runs a Vite dev server as a background process, waits for its "Local:" line,
# exposes the port and loads the page through its preview URL (in headless Chromium too).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/host-setup.sh

STATE_DIR=${HUTCH_STATE_DIR:-/var/lib/hutch}
LISTEN=${HUTCH_LISTEN:-127.0.0.1:7411}
# The examples' local git server; hutchd routes git.internal to it (an operator upstream).
GIT_ADDR=${HUTCH_DEMO_GIT_ADDR:-127.0.0.1:8418}

echo "==> building into ./bin"
make -s build
echo "==> building the web console (served at /console/)"
bash scripts/build-console.sh

export HUTCH_STATE_DIR=$STATE_DIR
if curl -fsS "http://$LISTEN/v1/health" >/dev/null 2>&1; then
  echo "==> hutchd already answers on $LISTEN; using it"
else
  mkdir -p "$STATE_DIR"
  echo "==> starting hutchd on $LISTEN (log: $STATE_DIR/hutchd.log, rotated; startup errors: $STATE_DIR/hutchd.stderr)"
  nohup ./bin/hutchd --state-dir "$STATE_DIR" --listen "$LISTEN" --log-file "$STATE_DIR/hutchd.log" \
    --upstream "git.internal=$GIT_ADDR" >>"$STATE_DIR/hutchd.stderr" 2>&1 &
  for _ in $(seq 1 100); do
    curl -fsS "http://$LISTEN/v1/health" >/dev/null 2>&1 && break
    sleep 0.1
  done
  curl -fsS "http://$LISTEN/v1/health" >/dev/null || { tail -20 "$STATE_DIR/hutchd.stderr" "$STATE_DIR/hutchd.log"; exit 1; }
fi

echo "==> default image (built once with debootstrap, then reused)"
./bin/hutch image build

echo "==> running examples/agent-session"
./bin/agent-session --git-listen "$GIT_ADDR" --git-host git.internal
echo "==> running examples/dev-server"
./bin/dev-server --browser "$(command -v chromium)"
# hutchd writes its pid in <state>/hutchd.json (the CLI's discovery file).
pid=$(sed -n 's/.*"pid": *\([0-9]*\).*/\1/p' "$STATE_DIR/hutchd.json" 2>/dev/null || true)
echo "==> hutchd keeps running (pid ${pid:-?}); try: ./bin/hutch exec agent-session-47 -- ls /workspace/node-demo, ./bin/hutch ps dev-server-demo, ./bin/hutch ports dev-server-demo"
