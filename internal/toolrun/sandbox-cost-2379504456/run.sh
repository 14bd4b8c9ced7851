#!/bin/sh
echo '{"toolId":"t","exitCode":0,"success":true,"timestamp":"2026-11-21T10:00:00Z","message":"ok","feedback":[],"data":{"n":1}}'
