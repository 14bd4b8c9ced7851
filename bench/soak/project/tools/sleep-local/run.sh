#!/bin/sh
exec "$(dirname "$0")/../sleep/run.sh"
