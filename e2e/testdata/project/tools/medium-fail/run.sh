#!/bin/sh
# Fails with OBSERVABILITY_ERROR (MEDIUM): a run under by_severity absorbs it.
ts=$(date -u +%Y-%m-%dT%H:%M:%SZ)
printf '{"toolId":"medium-fail","exitCode":1,"success":false,"timestamp":"%s","message":"could not write the metrics","feedback":[{"phase":"write","level":"error","message":"could not write the metrics","timestamp":"%s"}],"error":{"code":"OBSERVABILITY_ERROR","severity":"MEDIUM","retryable":false}}' "$ts" "$ts"
exit 1
