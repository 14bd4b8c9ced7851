#!/bin/sh
ts=$(date -u +%Y-%m-%dT%H:%M:%SZ)
printf '{"toolId":"soak-refuse","exitCode":1,"success":false,"timestamp":"%s","message":"refused, as the soak expects","feedback":[{"phase":"check","level":"error","message":"refused, as the soak expects","timestamp":"%s"}],"error":{"code":"INVALID_INPUT","severity":"HIGH","retryable":false}}' "$ts" "$ts"
exit 1
