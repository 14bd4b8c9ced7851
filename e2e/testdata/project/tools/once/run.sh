#!/bin/sh
# The same behaviour as the slow tool; only the manifest differs (not idempotent).
exec "$(dirname "$0")/../slow/run.sh"
