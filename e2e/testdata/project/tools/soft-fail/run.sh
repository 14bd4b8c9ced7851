#!/bin/sh
# Exits 0 but reports failure in its envelope (a test that failed).
ts=$(date -u +%Y-%m-%dT%H:%M:%SZ)
printf '{"toolId":"soft-fail","exitCode":1,"success":false,"timestamp":"%s","message":"3 assertions failed","feedback":[{"phase":"assert","level":"error","message":"3 assertions failed","timestamp":"%s"}],"error":{"code":"TEST_FAILURE","severity":"HIGH","retryable":false}}' "$ts" "$ts"
exit 0
