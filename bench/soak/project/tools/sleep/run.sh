#!/bin/sh
# Sleeps `seconds` (progress on stderr each second), writes `text` into
# out.txt of its step folder and outputs both.
in=$(cat "$CAPFLOW_INPUT_PATH")
secs=$(printf '%s' "$in" | sed -n 's/.*"seconds":\([0-9]*\).*/\1/p')
text=$(printf '%s' "$in" | sed -n 's/.*"text":"\([a-z0-9-]*\)".*/\1/p')
i=0
while [ "$i" -lt "${secs:-0}" ]; do
  printf '{"phase":"sleep","level":"info","message":"%s of %s seconds"}\n' "$i" "$secs" >&2
  sleep 1
  i=$((i+1))
done
printf '%s' "$text" > "$CAPFLOW_WORKDIR/out.txt"
printf '{"toolId":"soak-sleep","exitCode":0,"success":true,"timestamp":"%s","message":"slept %ss","feedback":[],"data":{"text":"%s","file":"%s/out.txt"}}' \
  "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "${secs:-0}" "$text" "$CAPFLOW_WORKDIR" > "$CAPFLOW_OUTPUT_PATH"
