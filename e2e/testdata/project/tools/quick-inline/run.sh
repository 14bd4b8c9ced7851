#!/bin/sh
# Counts its starts in its step folder; {"mode": "slow"} takes 200 ms,
# past the inline budget, so its inline run is killed and it runs again as
# a local activity.
echo started >> "$CAPFLOW_WORKDIR/started"
grep -q slow "$CAPFLOW_INPUT_PATH" && sleep 0.2
exit 0
