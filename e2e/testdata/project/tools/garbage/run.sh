#!/bin/sh
# Prints garbage instead of an envelope, and a traceback on stderr.
head -c 2000 /dev/urandom | tr -dc 'a-z{}[]:,"' ; echo
echo 'Traceback: something went very wrong' >&2
exit 0
