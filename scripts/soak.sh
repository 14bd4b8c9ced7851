#!/usr/bin/env bash
# make soak [SOAK_RUNS=N]: a private cluster of make cluster's shape (its
# own ports and state folder; no worker of its own), a shared S3 store
# (versitygw over a folder), then bin/capflow-soak: three workers as hosts
# of their own running SOAK_RUNS runs of bench/soak/project's plans while
# workers, the Temporal server and PostgreSQL die on a schedule
# (docs/operations.md#the-soak). Writes soak.json (SOAK_OUT); exits non-zero on
# any miss, keeping the logs; KEEP_SOAK_STATE=1 keeps them after a pass too.
set -euo pipefail
cd "$(dirname "$0")/.."
export CLUSTER_TEMPORAL_PORT=${CLUSTER_TEMPORAL_PORT:-$(scripts/free-base-port.sh)}
own_state=
if [ -z "${CLUSTER_STATE:-}" ]; then
  CLUSTER_STATE=$(mktemp -d /tmp/capflow-soak-cluster-XXXXXX)
  own_state=1
fi
export CLUSTER_STATE CLUSTER_WORKER=0
WORK=$(mktemp -d /tmp/capflow-soak-XXXXXX)
S3_PORT=${SOAK_S3_PORT:-$((CLUSTER_TEMPORAL_PORT + 40))}
s3pid=
code=1
cleanup() {
  set +e
  [ -n "$s3pid" ] && kill "$s3pid" 2>/dev/null
  scripts/cluster.sh down
  if [ "$code" = 0 ] && [ "${KEEP_SOAK_STATE:-}" != 1 ]; then
    rm -rf "$WORK"
    [ -n "$own_state" ] && rm -rf "$CLUSTER_STATE"
  else
    echo "the soak's logs: $WORK/run/logs; the cluster's: $CLUSTER_STATE/logs"
  fi
}
trap cleanup EXIT
scripts/cluster.sh up
mkdir -p "$WORK/s3/capflow"
bin/versitygw --port "127.0.0.1:$S3_PORT" --access capflow --secret capflow-secret posix "$WORK/s3" >"$WORK/versitygw.log" 2>&1 &
s3pid=$!
for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$S3_PORT") 2>/dev/null && break; sleep 0.1; done
(exec 3<>"/dev/tcp/127.0.0.1/$S3_PORT") 2>/dev/null ||
  { echo "versitygw did not listen on 127.0.0.1:$S3_PORT; its log:" >&2; tail -20 "$WORK/versitygw.log" >&2; exit 1; }
export AWS_ACCESS_KEY_ID=capflow AWS_SECRET_ACCESS_KEY=capflow-secret
# The cluster's server starts activities eagerly: the hosts send steps'
# first attempts there, as make cluster's (docs/operations.md#eager-steps).
export CAPFLOW_TEMPORAL_EAGER_STEPS=${CAPFLOW_TEMPORAL_EAGER_STEPS:-true}
code=0
bin/capflow-soak --address "127.0.0.1:$CLUSTER_TEMPORAL_PORT" --work "$WORK/run" --out "${SOAK_OUT:-soak.json}" \
  --store "s3://capflow?endpoint=http://127.0.0.1:$S3_PORT&region=us-east-1&use_path_style=true&prefix=soak/" \
  --server-kill "scripts/cluster.sh kill server" --server-start "scripts/cluster.sh start server" \
  --postgres-restart "scripts/cluster.sh stop postgres && scripts/cluster.sh start postgres" "$@" || code=$?
exit "$code"
