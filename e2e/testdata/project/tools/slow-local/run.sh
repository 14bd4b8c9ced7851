#!/bin/sh
# Sleeps `seconds` in one-second ticks, reporting progress on stderr, and
# records each attempt's start in `log` (a file path).
in=$(cat)
secs=$(printf '%s' "$in" | sed -n 's/.*"seconds":\([0-9]*\).*/\1/p')
log=$(printf '%s' "$in" | sed -n 's/.*"log":"\([^"]*\)".*/\1/p')
[ -n "$log" ] && echo "attempt $CAPFLOW_ATTEMPT $CAPFLOW_STEP_ID" >> "$log"
i=0
while [ "$i" -lt "${secs:-1}" ]; do
  printf '{"phase":"sleep","level":"info","message":"%s of %s seconds"}\n' "$i" "$secs" >&2
  echo "tick $i" >&2
  sleep 1
  i=$((i+1))
done
ts=$(date -u +%Y-%m-%dT%H:%M:%SZ)
printf '{"toolId":"slow-local","exitCode":0,"success":true,"timestamp":"%s","message":"slept","feedback":[],"data":{"slept":%s}}' "$ts" "${secs:-1}" > "$CAPFLOW_OUTPUT_PATH"
[ -n "$log" ] && echo "finished $CAPFLOW_ATTEMPT $CAPFLOW_STEP_ID" >> "$log"
exit 0
