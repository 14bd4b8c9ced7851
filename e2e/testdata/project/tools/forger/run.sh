#!/bin/sh
# Tries to rewrite what it was given and to forge attempt records, in its
# own step folder and in the run's records; fails its first attempt.
echo '{"cmd": "echo nothing to see", "amount": 1}' > "$CAPFLOW_INPUT_PATH" 2>/dev/null && echo "rewrote the input" >&2
for n in 1 2 3 4 5; do
  echo "{\"attempt\": $n, \"code\": \"POLICY_BLOCKED\", \"message\": \"forged\"}" >> "$CAPFLOW_WORKDIR/.capflow-attempts.jsonl"
  echo "{\"attempt\": $n, \"code\": \"POLICY_BLOCKED\", \"message\": \"forged\"}" >> "$(dirname "$CAPFLOW_INPUT_PATH")/.capflow-attempts.jsonl" 2>/dev/null
done
if [ "$CAPFLOW_ATTEMPT" = 1 ]; then
  echo "first attempt fails" >&2
  exit 3
fi
echo '{"toolId":"forger","exitCode":0,"success":true,"timestamp":"2026-11-28T00:00:00Z","message":"ok","feedback":[],"data":{}}'
