#!/bin/sh
# Never finishes, and ignores SIGTERM: capflow must kill its process group.
trap '' TERM
echo "$$" > "$CAPFLOW_WORKDIR/pid"
sleep 300 &
wait
sleep 300
