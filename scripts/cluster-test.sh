#!/usr/bin/env bash
# make cluster-test: a private cluster of make cluster's shape (its own
# ports and state folder; no worker of its own: the tests start theirs),
# then the durability suite against it, faults included: the Temporal
# server SIGKILLed and restarted, PostgreSQL restarted, workers SIGKILLed,
# two workers on separate project copies, run control and schedules.
# `cluster-test.sh bench` runs BenchmarkOverhead there instead (make bench:
# what PostgreSQL costs next to the dev server).
set -euo pipefail
cd "$(dirname "$0")/.."
export CLUSTER_TEMPORAL_PORT=${CLUSTER_TEMPORAL_PORT:-$(scripts/free-base-port.sh)}
export CLUSTER_STATE=${CLUSTER_STATE:-$(mktemp -d /tmp/capflow-cluster-test-XXXXXX)}
export CLUSTER_WORKER=0
trap 'scripts/cluster.sh down; [ "${KEEP_CLUSTER_STATE:-}" = 1 ] || rm -rf "$CLUSTER_STATE"' EXIT
scripts/cluster.sh up
tests='^(TestAServerRestartDoesNotStopARunningTool|TestClusterPostgresRestart|TestServerRestartMidRun|TestRunSurvivesFiveWorkerKills|TestNonIdempotentToolNeverStartsTwice|TestSharedStoreCarriesDataAcrossHosts|TestRunControl|TestSchedules|TestExamplesRunAsPromised|TestRunsAreTraced|TestATraceSurvivesAWorkerKill|TestAResetDoesNotRerunANonIdempotentStep|TestAResetDoesNotRerunARunningNonIdempotentStep)$'
log=$CLUSTER_STATE/logs/e2e.log
code=0
export CAPFLOW_E2E_TEMPORAL_ADDRESS=127.0.0.1:$CLUSTER_TEMPORAL_PORT CAPFLOW_E2E_CLUSTER=1
# The cluster's server starts activities eagerly: its tests' workers send
# steps' first attempts there, as make cluster's (docs/operations.md#eager-steps).
export CAPFLOW_TEMPORAL_EAGER_STEPS=${CAPFLOW_TEMPORAL_EAGER_STEPS:-true}
if [ "${1:-}" = bench ]; then
  ${GO:-go} test -run '^$' -bench Overhead -benchtime "${BENCHTIME:-6x}" -timeout 60m ./e2e 2>&1 | grep -v '\[DEBUG\]' | grep -E '^(Benchmark|ok|FAIL|PASS|goos|cpu)' || code=1
  exit "$code"
fi
${GO:-go} test -count=1 -parallel 6 -timeout 20m -v -run "${CLUSTER_TESTS:-$tests}" ./e2e >"$log" 2>&1 || code=$?
grep -v '\[DEBUG\]' "$log" | grep -E '^(--- |ok|FAIL|PASS|panic|    )' || true
exit "$code"
