#!/bin/sh
# The slow tool's script (its envelope says toolId "slow"), as a local
# activity.
exec sh "$CAPFLOW_TOOL_DIR/../slow/run.sh"
