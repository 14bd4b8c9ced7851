#!/bin/sh
# One line per start, before anything else: "start RUN STEP ATTEMPT TIME".
# The soak counts a (RUN, STEP) seen twice, on any host, as repeated.
mkdir -p logs
printf 'start %s %s %s %s\n' "$CAPFLOW_RUN_ID" "$CAPFLOW_STEP_ID" "$CAPFLOW_ATTEMPT" "$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)" >> logs/counter.log
what=$(sed -n 's/.*"what":"\([a-z0-9-]*\)".*/\1/p' "$CAPFLOW_INPUT_PATH")
printf '{"toolId":"soak-count","exitCode":0,"success":true,"timestamp":"%s","message":"counted","feedback":[],"data":{"counted":"%s"}}' \
  "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$what" > "$CAPFLOW_OUTPUT_PATH"
