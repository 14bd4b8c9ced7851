#!/bin/sh
# Records its start and end (epoch milliseconds, its label) in `log` and
# sleeps `ms` in between: what the limits tests read back.
in=$(cat)
ms=$(printf '%s' "$in" | sed -n 's/.*"ms":\([0-9]*\).*/\1/p')
log=$(printf '%s' "$in" | sed -n 's/.*"log":"\([^"]*\)".*/\1/p')
echo "start $(date +%s%3N) $CAPFLOW_RUN_ID/$CAPFLOW_STEP_ID" >> "$log"
sleep "$(awk "BEGIN{print ${ms:-0}/1000}")"
echo "end $(date +%s%3N) $CAPFLOW_RUN_ID/$CAPFLOW_STEP_ID" >> "$log"
printf '{"toolId":"limited","exitCode":0,"success":true,"timestamp":"%s","message":"ok","feedback":[],"data":{"ok":true}}' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" > "$CAPFLOW_OUTPUT_PATH"
