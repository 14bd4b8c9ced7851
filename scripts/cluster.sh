#!/usr/bin/env bash
# make cluster: the production shape on one machine, without Docker
# (docs/deployment.md): a private PostgreSQL instance, the Temporal server
# built from its module and configured as its image is (the embedded
# template, from the same variables docker-compose.yml sets), the same
# setup scripts the compose stack runs, the Web UI and a capflow worker.
#
#   scripts/cluster.sh            foreground until Ctrl-C (make cluster)
#   scripts/cluster.sh up         start in the background, print the ready line, return
#   scripts/cluster.sh down       stop what `up` started
#   scripts/cluster.sh kill|start server|postgres|worker|ui   for fault tests
#
# Ports: the frontend on CLUSTER_TEMPORAL_PORT (7233), the others counted
# from it; PostgreSQL on CLUSTER_PG_PORT (frontend + 8199); the Web UI on
# CLUSTER_UI_PORT (frontend + 1000). State (the database, logs, pids) in
# CLUSTER_STATE (.capflow/cluster). CLUSTER_WORKER=0: no worker.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN="$ROOT/bin"
PORT=${CLUSTER_TEMPORAL_PORT:-7233}
# The services' membership ports (PORT + 2700 ... 2706) are kept in
# PostgreSQL as smallint: past 32767 the server never becomes healthy.
if [ "$PORT" -gt 30061 ] 2>/dev/null || ! [ "$PORT" -ge 1024 ] 2>/dev/null; then
  echo "CLUSTER_TEMPORAL_PORT=$PORT: give a port from 1024 to 30061 (Temporal keeps its membership ports, PORT + 2700 to 2706, as a PostgreSQL smallint)" >&2
  exit 2
fi
PG_PORT=${CLUSTER_PG_PORT:-$((PORT + 8199))}
UI_PORT=${CLUSTER_UI_PORT:-$((PORT + 1000))}
STATE=${CLUSTER_STATE:-$ROOT/.capflow/cluster}
STATE=$(mkdir -p "$STATE" && cd "$STATE" && pwd)
LOGS=$STATE/logs
PGDATA=$STATE/pg
mkdir -p "$LOGS"
export TEMPORAL_ADDRESS=127.0.0.1:$PORT CAPFLOW_TEMPORAL_ADDRESS=127.0.0.1:$PORT
export CAPFLOW_UI_URL=${CAPFLOW_UI_URL:-http://127.0.0.1:$UI_PORT}
# The server starts activities eagerly (deploy/temporal/capflow.yaml): its
# workers send a step's first attempt there (docs/operations.md#eager-steps).
export CAPFLOW_TEMPORAL_EAGER_STEPS=${CAPFLOW_TEMPORAL_EAGER_STEPS:-true}

# PostgreSQL will not run as root: as root, its commands run as the
# package's postgres user, which must own the data folder.
as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
pg_bin() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  [ -n "$d" ] || { echo "PostgreSQL is not installed (make cluster installs Debian's postgresql)" >&2; exit 1; }
  echo "$d"
}
# PostgreSQL's own pid is in its postmaster.pid (as root, the recorded one
# is runuser's, which does not pass signals on).
pid_of() {
  if [ "$1" = postgres ] && [ -s "$PGDATA/postmaster.pid" ]; then head -1 "$PGDATA/postmaster.pid"; return; fi
  cat "$STATE/$1.pid" 2>/dev/null || true
}
alive() { local p; p=$(pid_of "$1"); [ -n "$p" ] && kill -0 "$p" 2>/dev/null; }
wait_port() { # name port seconds
  for _ in $(seq 1 $(($3 * 5))); do
    (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null && return 0
    alive "$1" || { echo "$1 exited; its log:" >&2; tail -30 "$LOGS/$1.log" >&2; return 1; }
    sleep 0.2
  done
  echo "$1 did not listen on $2 within $3 s; see $LOGS/$1.log" >&2
  return 1
}

# port_free refuses to start NAME on a port something already listens on
# (wait_port would take that for NAME being up): typically one left
# running by an earlier cluster whose state folder was removed.
port_free() { # name port variable
  if (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null; then
    echo "port $2 (for $1) is taken: is a $1 from an earlier cluster still running? stop it, or set $3" >&2
    exit 1
  fi
}

start_postgres() {
  local pg; pg=$(pg_bin)
  port_free postgres "$PG_PORT" CLUSTER_PG_PORT
  if [ "$(id -u)" = 0 ]; then
    chmod 755 "$STATE"
    runuser -u postgres -- test -x "$STATE" ||
      { echo "the postgres user cannot reach $STATE: give CLUSTER_STATE a folder every user can traverse" >&2; exit 1; }
  fi
  if [ ! -s "$PGDATA/PG_VERSION" ]; then
    mkdir -p "$PGDATA"
    [ "$(id -u)" = 0 ] && chown postgres "$PGDATA" && chmod 700 "$PGDATA"
    as_pg "$pg/initdb" -D "$PGDATA" -U postgres --auth=trust -E UTF8 >"$LOGS/initdb.log" 2>&1 ||
      { echo "initdb failed:" >&2; tail -20 "$LOGS/initdb.log" >&2; exit 1; }
  fi
  : >"$LOGS/postgres.log"
  [ "$(id -u)" = 0 ] && chown postgres "$LOGS/postgres.log"
  # Not through as_pg: a function run in the background is a subshell
  # left waiting on PostgreSQL (the soak counts what outlives its parent).
  local as=()
  [ "$(id -u)" = 0 ] && as=(runuser -u postgres --)
  "${as[@]}" "$pg/postgres" -D "$PGDATA" -p "$PG_PORT" -c listen_addresses=127.0.0.1 -c unix_socket_directories="$PGDATA" \
    -c max_connections=200 >>"$LOGS/postgres.log" 2>&1 &
  echo $! >"$STATE/postgres.pid"
  wait_port postgres "$PG_PORT" 60
  for _ in $(seq 1 50); do
    as_pg "$pg/psql" -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -qtAc "select 1" >/dev/null 2>&1 && break
    sleep 0.2
  done
  as_pg "$pg/psql" -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -qtAc \
    "DO \$\$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'temporal') THEN CREATE ROLE temporal LOGIN CREATEDB PASSWORD 'temporal'; END IF; END\$\$;" >/dev/null
}

# The variables the compose stack gives the server and the schema job.
db_env() {
  export DB=postgres12 DB_PORT=$PG_PORT POSTGRES_USER=temporal POSTGRES_PWD=temporal SQL_PASSWORD=temporal \
    POSTGRES_SEEDS=127.0.0.1 BIND_ON_IP=127.0.0.1 DYNAMIC_CONFIG_FILE_PATH=$ROOT/deploy/temporal/capflow.yaml \
    FRONTEND_GRPC_PORT=$PORT FRONTEND_HTTP_PORT=$((PORT + 10)) FRONTEND_MEMBERSHIP_PORT=$((PORT + 2700)) \
    HISTORY_GRPC_PORT=$((PORT + 1)) HISTORY_MEMBERSHIP_PORT=$((PORT + 2701)) \
    MATCHING_GRPC_PORT=$((PORT + 2)) MATCHING_MEMBERSHIP_PORT=$((PORT + 2702)) \
    WORKER_GRPC_PORT=$((PORT + 6)) WORKER_MEMBERSHIP_PORT=$((PORT + 2706)) \
    INTERNAL_FRONTEND_GRPC_PORT=$((PORT + 3)) INTERNAL_FRONTEND_HTTP_PORT=$((PORT + 13)) INTERNAL_FRONTEND_MEMBERSHIP_PORT=$((PORT + 2703)) \
    PROMETHEUS_ENDPOINT=127.0.0.1:$((PORT + 767)) LOG_LEVEL=${CLUSTER_LOG_LEVEL:-warn}
}

setup_schema() {
  db_env
  # setup-postgres.sh finds the schema where the admin-tools image keeps
  # it; here it is the server module's own.
  TEMPORAL_SCHEMA_DIR=$BIN/temporal-schema PATH="$BIN:$PATH" \
    sh deploy/compose/setup-postgres.sh >"$LOGS/schema.log" 2>&1 ||
    { echo "setup-postgres.sh failed:" >&2; tail -20 "$LOGS/schema.log" >&2; exit 1; }
}

start_server() {
  port_free server "$PORT" CLUSTER_TEMPORAL_PORT
  db_env
  # No authorizer, as the image runs by default: the frontend listens on
  # loopback only (docs/deployment.md says how to add one).
  "$BIN/temporal-server" --allow-no-auth start >>"$LOGS/server.log" 2>&1 &
  echo $! >"$STATE/server.pid"
  wait_port server "$PORT" 120
  for _ in $(seq 1 150); do
    "$BIN/temporal" operator cluster health --address "$TEMPORAL_ADDRESS" >/dev/null 2>&1 && return 0
    sleep 0.4
  done
  echo "the Temporal server is not healthy; see $LOGS/server.log" >&2
  return 1
}

setup_namespace() {
  PATH="$BIN:$PATH" sh deploy/compose/setup-namespace.sh >"$LOGS/namespace.log" 2>&1 ||
    { echo "setup-namespace.sh failed:" >&2; tail -20 "$LOGS/namespace.log" >&2; exit 1; }
}

start_ui() {
  port_free ui "$UI_PORT" CLUSTER_UI_PORT
  # The image's configuration (config/docker.yaml, from the same variables).
  TEMPORAL_ADDRESS=127.0.0.1:$PORT TEMPORAL_UI_PORT=$UI_PORT \
    "$BIN/temporal-ui-server" --root "$BIN/temporal-ui" --env docker start >>"$LOGS/ui.log" 2>&1 &
  echo $! >"$STATE/ui.pid"
  wait_port ui "$UI_PORT" 60
}

start_worker() {
  CAPFLOW_TEMPORAL_ADDRESS=$TEMPORAL_ADDRESS "$BIN/capflow-worker" >>"$LOGS/worker.log" 2>&1 &
  echo $! >"$STATE/worker.pid"
  for _ in $(seq 1 100); do
    grep -q "worker started" "$LOGS/worker.log" 2>/dev/null && return 0
    alive worker || { echo "the worker exited:" >&2; tail -20 "$LOGS/worker.log" >&2; return 1; }
    sleep 0.2
  done
  echo "the worker did not start; see $LOGS/worker.log" >&2
  return 1
}

stop() { # name [signal]
  local p sig=${2:-TERM}; p=$(pid_of "$1")
  [ -n "$p" ] || return 0
  [ "$1" = postgres ] && [ "$sig" = TERM ] && sig=INT # PostgreSQL's fast shutdown
  kill "-$sig" "$p" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$p" 2>/dev/null || true
  rm -f "$STATE/$1.pid"
}

up() {
  echo "● PostgreSQL on 127.0.0.1:$PG_PORT (data: $PGDATA)"
  start_postgres
  echo "● Temporal's schema (deploy/compose/setup-postgres.sh)"
  setup_schema
  echo "● the Temporal server on $TEMPORAL_ADDRESS (log: $LOGS/server.log)"
  start_server
  echo "● the namespace and search attributes (deploy/compose/setup-namespace.sh)"
  setup_namespace
  if [ -x "$BIN/temporal-ui-server" ]; then
    echo "● the Web UI on $CAPFLOW_UI_URL"
    start_ui
  fi
  if [ "${CLUSTER_WORKER:-1}" = 1 ]; then
    echo "● a capflow worker (log: $LOGS/worker.log)"
    start_worker
  fi
  echo "cluster ready: TEMPORAL_ADDRESS=$TEMPORAL_ADDRESS"
}

down() {
  for n in worker ui server postgres; do stop "$n"; done
}

case "${1:-foreground}" in
  up) up ;;
  down) down ;;
  kill) stop "$2" KILL ;;
  stop) stop "$2" ;;
  start)
    case "$2" in
      postgres) start_postgres ;; server) start_server ;; worker) start_worker ;; ui) start_ui ;;
      *) echo "start what? postgres, server, worker or ui" >&2; exit 2 ;;
    esac ;;
  foreground)
    trap 'echo; echo "stopping..."; down; echo "stopped. State is kept in $STATE."' INT TERM EXIT
    up
    echo "  Temporal Web UI  $CAPFLOW_UI_URL"
    echo "  try:             CAPFLOW_TEMPORAL_ADDRESS=$TEMPORAL_ADDRESS bin/capflow run plans/examples/file-pipeline.yaml"
    echo "Ctrl-C stops everything this started."
    # The server and PostgreSQL are the cluster: when one exits, it stops.
    # A worker that dies (a crash, a SIGKILL) is a fault the cluster
    # outlives: it is started again, as a supervisor would.
    while alive server && alive postgres; do
      if [ "${CLUSTER_WORKER:-1}" = 1 ] && ! alive worker; then
        echo "the worker exited (see $LOGS/worker.log): starting it again"
        start_worker || true
      fi
      sleep 1
    done
    echo "a component exited; see $LOGS" >&2
    exit 1 ;;
  *) echo "usage: $0 [up|down|kill NAME|stop NAME|start NAME]" >&2; exit 2 ;;
esac
