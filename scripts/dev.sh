#!/usr/bin/env bash
# make dev: a Temporal dev server (Web UI on :8233) and a capflow worker,
# then the example pipeline. Server and worker keep running until Ctrl-C,
# which stops both. State lives in .capflow/state, so runs survive a restart.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN="$PWD/bin"
TEMPORAL="${TEMPORAL:-$BIN/temporal}"
STATE=.capflow/state
LOGS=.capflow/logs
PORT="${CAPFLOW_DEV_PORT:-7233}"
UI_PORT="${CAPFLOW_DEV_UI_PORT:-8233}"
ADDRESS="localhost:$PORT"
export CAPFLOW_TEMPORAL_ADDRESS="$ADDRESS"
# The CLI and worker link runs to the Web UI at the frontend's port + 1000
# unless told: tell them where it is.
export CAPFLOW_UI_URL="http://localhost:$UI_PORT"
mkdir -p "$STATE" "$LOGS"

server_pid=""
worker_pid=""
stop() {
  trap - INT TERM EXIT
  echo
  echo "stopping the worker and the dev server..."
  [ -n "$worker_pid" ] && kill -TERM "$worker_pid" 2>/dev/null || true
  [ -n "$worker_pid" ] && wait "$worker_pid" 2>/dev/null || true
  [ -n "$server_pid" ] && kill -TERM "$server_pid" 2>/dev/null || true
  [ -n "$server_pid" ] && wait "$server_pid" 2>/dev/null || true
  echo "stopped. State is kept in $STATE; run 'make dev' again to resume."
}
trap stop INT TERM EXIT

healthy() { "$TEMPORAL" operator cluster health --address "$ADDRESS" >/dev/null 2>&1; }

if healthy; then
  echo "● using the Temporal server already running at $ADDRESS"
else
  echo "● starting the Temporal dev server on $ADDRESS (Web UI http://localhost:$UI_PORT)"
  # Tuned for capflow (docs/operations.md#a-tuned-dev-server); one flag per line.
  mapfile -t tuning < <(grep -v '^#' scripts/dev-server.args | grep -v '^$' | tr ' ' '\n')
  "$TEMPORAL" server start-dev "${tuning[@]}" \
    --db-filename "$STATE/temporal.db" --port "$PORT" --ui-port "$UI_PORT" --log-level warn \
    >"$LOGS/dev-server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 120); do
    healthy && break
    if ! kill -0 "$server_pid" 2>/dev/null; then
      echo "the dev server exited; its log:"; tail -20 "$LOGS/dev-server.log"; exit 1
    fi
    sleep 0.5
  done
  healthy || { echo "the dev server did not become healthy; see $LOGS/dev-server.log"; exit 1; }
fi

echo "● starting the capflow worker (log: $LOGS/worker.log)"
"$BIN/capflow-worker" >"$LOGS/worker.log" 2>&1 &
worker_pid=$!
for _ in $(seq 1 60); do
  grep -q "worker started" "$LOGS/worker.log" 2>/dev/null && break
  if ! kill -0 "$worker_pid" 2>/dev/null; then
    echo "the worker exited; its log:"; tail -20 "$LOGS/worker.log"; exit 1
  fi
  sleep 0.5
done

echo "● running plans/examples/file-pipeline.yaml"
"$BIN/capflow" run plans/examples/file-pipeline.yaml || echo "(the example run did not pass; see above)"

# Another port than the CLI's default: say how to reach it (and the Web
# UI, where it is not at the frontend's port + 1000).
reach=""
[ "$PORT" != 7233 ] && reach="
  in each terminal  export CAPFLOW_TEMPORAL_ADDRESS=$ADDRESS   (the CLI's default is localhost:7233)"
[ "$UI_PORT" != "$((PORT + 1000))" ] && reach="$reach
  and               export CAPFLOW_UI_URL=$CAPFLOW_UI_URL   (run links go to the frontend's port + 1000 otherwise)"

cat <<MSG

capflow is up:$reach
  Temporal Web UI   http://localhost:$UI_PORT
  run a plan        bin/capflow run plans/examples/quorum-checksums.yaml
  check a plan      bin/capflow plan check plans/examples/media-to-drive.yaml
  the fast path     time bin/capflow run plans/examples/local-chain.yaml   (50 local steps)
  an agent step     bin/capflow plan test plans/examples/agent-triage.yaml   (a scripted model; docs/agents.md)
  logs              $LOGS/worker.log, $LOGS/dev-server.log
Press Ctrl-C to stop the worker and the dev server.
MSG
wait
