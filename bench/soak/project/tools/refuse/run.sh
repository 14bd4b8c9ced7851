#!/bin/sh
ts=$(date -u +%Y-%m-%dT%H:%M:%SZ)
printf '{"toolId":"soak-refuse","exitCode":1,"success":false,"timestamp":"%s","message":"refused, as the soak expects","feedback":[],"error":{"code":"INVALID_INPUT","severity":"HIGH","retryable":false}}' "$ts"
exit 1
