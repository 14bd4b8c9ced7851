#!/bin/sh
# The namespace capflow uses and its search attributes (CapflowPlan,
# CapflowStatus), created once; workers would register the attributes
# themselves, but a worker without operator rights cannot.
set -eu
ns=${NAMESPACE:-default}
temporal operator namespace describe --namespace "$ns" >/dev/null 2>&1 ||
  temporal operator namespace create --namespace "$ns" --retention 720h
for attr in CapflowPlan CapflowStatus; do
  if ! temporal operator search-attribute list --namespace "$ns" | grep -q "$attr"; then
    temporal operator search-attribute create --namespace "$ns" --name "$attr" --type Keyword
  fi
done
echo "namespace $ns ready"
