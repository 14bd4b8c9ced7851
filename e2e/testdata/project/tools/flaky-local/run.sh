#!/bin/sh
# Fails attempts 1 and 2 (a local activity's), succeeds from attempt 3 on
# (by then a regular activity): the attempt numbers run on across paths.
# With {"slow": true} it fails attempt 3 too (its first as a regular
# activity) and takes 5 s over attempt 4, for a test to watch it retried.
input=$(cat)
fail_until=3
pause=0
case "$input" in *'"slow":true'*) fail_until=4 pause=5 ;; esac
ts=$(date -u +%Y-%m-%dT%H:%M:%SZ)
if [ "${CAPFLOW_ATTEMPT:-1}" -lt "$fail_until" ]; then
  printf '{"toolId":"flaky-local","exitCode":1,"success":false,"timestamp":"%s","message":"attempt %s fails","feedback":[{"phase":"run","level":"error","message":"flaky","timestamp":"%s"}],"error":{"code":"TOOL_FAILURE","severity":"MEDIUM","retryable":true}}' "$ts" "$CAPFLOW_ATTEMPT" "$ts" > "$CAPFLOW_OUTPUT_PATH"
  exit 1
fi
sleep "$pause"
printf '{"toolId":"flaky-local","exitCode":0,"success":true,"timestamp":"%s","message":"ok","feedback":[],"data":{"attempt":%s}}' "$ts" "$CAPFLOW_ATTEMPT" > "$CAPFLOW_OUTPUT_PATH"
