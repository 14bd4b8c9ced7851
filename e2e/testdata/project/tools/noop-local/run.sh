#!/bin/sh
# Does nothing, correctly: the baseline tool for benchmarks and pipelines.
cat > /dev/null
ts=$(date -u +%Y-%m-%dT%H:%M:%SZ)
printf '{"toolId":"noop","exitCode":0,"success":true,"timestamp":"%s","message":"noop","feedback":[],"data":{"ok":true}}' "$ts" > "$CAPFLOW_OUTPUT_PATH"
