#!/bin/sh
# Produces ~400 KB of data: capflow must pass it by file, not through history.
ts=$(date -u +%Y-%m-%dT%H:%M:%SZ)
blob=$(head -c 300000 /dev/zero | tr '\0' 'x')
printf '{"toolId":"big","exitCode":0,"success":true,"timestamp":"%s","message":"big","feedback":[],"data":{"blob":"%s","size":300000}}' "$ts" "$blob" > "$CAPFLOW_OUTPUT_PATH"
