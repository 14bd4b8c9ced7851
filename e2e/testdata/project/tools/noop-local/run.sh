#!/bin/sh
# Does nothing, as cheaply as a command tool can: shell builtins only, no
# other process (the local-path benchmark measures capflow, not the tool).
while read -r _; do :; done
printf '{"toolId":"noop-local","exitCode":0,"success":true,"timestamp":"2026-01-01T00:00:00Z","message":"noop","feedback":[],"data":{"ok":true}}' > "$CAPFLOW_OUTPUT_PATH"
