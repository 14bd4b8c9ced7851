#!/bin/sh
# Never finishes, and ignores SIGTERM: capflow must kill its whole tree.
# It runs in its own PID namespace, where $$ means nothing to the host: it
# leaves a command line no other process has, for the test to look for.
trap '' TERM
marker="sleep 3$(date +%N | cut -c1-5).5"
echo "$marker" > "$CAPFLOW_WORKDIR/marker"
$marker &
wait
sleep 300
