#!/bin/sh
# The namespace capflow uses and its search attributes (CapflowPlan,
# CapflowStatus), created once; workers would register the attributes
# themselves, but a worker without operator rights cannot. A fresh server
# answers before it is ready, and a new namespace shows a few seconds
# after it was made: each step asks again until it holds (SETUP_TRIES
# times, SETUP_WAIT seconds apart; 2 minutes by default).
set -eu
ns=${NAMESPACE:-default}
tries=${SETUP_TRIES:-60}
retry() {
  n=1
  until "$@"; do
    [ "$n" -ge "$tries" ] && return 1
    n=$((n + 1))
    sleep "${SETUP_WAIT:-2}"
  done
}
# Each ensure_ answers "there" or, after asking for it, "not yet": an
# error (not ready, already exists) is not taken for "missing".
ensure_namespace() {
  out=$(temporal operator namespace describe --namespace "$ns" 2>&1) && return 0
  case "$out" in
    *"not found"* | *"Not found"* | *NotFound*)
      temporal operator namespace create --namespace "$ns" --retention 720h >/dev/null 2>&1 || true ;;
  esac
  return 1
}
ensure_attribute() {
  list=$(temporal operator search-attribute list --namespace "$ns" 2>/dev/null) || return 1
  case "$list" in *"$1"*) return 0 ;; esac
  temporal operator search-attribute create --namespace "$ns" --name "$1" --type Keyword >/dev/null 2>&1 || true
  return 1
}
retry ensure_namespace || { echo "namespace $ns: not there after $tries tries" >&2; exit 1; }
for attr in CapflowPlan CapflowStatus; do
  retry ensure_attribute "$attr" || { echo "search attribute $attr: not there after $tries tries" >&2; exit 1; }
done
echo "namespace $ns ready"
