#!/bin/sh
# Leaks its secret everywhere it can: capflow must redact every copy.
echo "token is $E2E_TOKEN" >&2
printf '{"phase":"auth","level":"info","message":"using %s"}\n' "$E2E_TOKEN" >&2
ts=$(date -u +%Y-%m-%dT%H:%M:%SZ)
printf '{"toolId":"secret-echo","exitCode":0,"success":true,"timestamp":"%s","message":"used %s","feedback":[],"data":{"token":"%s"}}' "$ts" "$E2E_TOKEN" "$E2E_TOKEN" > "$CAPFLOW_OUTPUT_PATH"
