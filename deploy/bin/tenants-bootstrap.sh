#!/bin/sh
# The one-shot `tenants` service of compose.yaml: provisions the tenants named in
# GATEHOUSE_BOOTSTRAP_TENANTS once (`tenants create`, upstreams = the compose engines),
# loads every tenant file into Redis (`tenants apply`) and brings each tenant database's
# schemas up to date (`tenants migrate --all`). Safe to run again: existing files are kept.
#
#   GATEHOUSE_TENANTS_DIR          where tenant files live (a volume; create writes here)
#   GATEHOUSE_POSTGRES_URL         admin URL of the cluster tenants are created on
#   GATEHOUSE_BOOTSTRAP_TENANTS    "database:organization ..." to create when missing
#   GATEHOUSE_BOOTSTRAP_REST_URL   base URL of the REST engine (http://rest:3000)
#   GATEHOUSE_BOOTSTRAP_AUTH_URL   base URL of the auth engine (http://auth:9999)
set -eu

dir=${GATEHOUSE_TENANTS_DIR:-/etc/gatehouse/tenants}
rest=${GATEHOUSE_BOOTSTRAP_REST_URL:-http://rest:3000}
auth=${GATEHOUSE_BOOTSTRAP_AUTH_URL:-http://auth:9999}

for spec in ${GATEHOUSE_BOOTSTRAP_TENANTS:-}; do
  db=${spec%%:*}
  org=${spec#*:}
  if [ -z "$db" ] || [ "$db" = "$spec" ] || [ -z "$org" ]; then
    echo "tenants-bootstrap: '$spec' is not database:organization" >&2
    exit 2
  fi
  if [ -f "$dir/$db.yaml" ]; then
    echo "tenants-bootstrap: $db: $dir/$db.yaml exists, not provisioning again"
    continue
  fi
  # Prints the keys once (`docker compose logs tenants`); the file keeps them too.
  gatehouse tenants create "$db" --org "$org" --dir "$dir" \
    --rest-upstream "$rest/$db" --auth-upstream "$auth/$db"
done

# Validates every file first and writes nothing when one is bad.
gatehouse tenants apply "$dir"
gatehouse tenants migrate --all
echo "tenants-bootstrap: done"
