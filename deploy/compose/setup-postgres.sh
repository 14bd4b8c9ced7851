#!/bin/sh
# Creates Temporal's databases on first start and applies schema upgrades
# on later ones (temporal-sql-tool's update-schema is idempotent).
set -eu
tool() { temporal-sql-tool --plugin "$DB" --ep "$POSTGRES_SEEDS" -u "$POSTGRES_USER" -p "$DB_PORT" "$@"; }
# The admin-tools image keeps the schema in /etc/temporal/schema; make
# cluster passes the server module's own.
schema=${TEMPORAL_SCHEMA_DIR:-/etc/temporal/schema}/postgresql/v12
for db in temporal:temporal temporal_visibility:visibility; do
  name=${db%%:*} dir=${db##*:}
  tool --db "$name" create || true # exists already: fine
  tool --db "$name" setup-schema -v 0.0 || true
  tool --db "$name" update-schema -d "$schema/$dir/versioned"
done
echo "temporal schema ready"
