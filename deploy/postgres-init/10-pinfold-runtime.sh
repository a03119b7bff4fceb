#!/bin/bash
# Run once by the postgres image on a fresh data volume
# (/docker-entrypoint-initdb.d): creates the login role Pinfold serves as.
# It is a member of pinfold_runtime (the group role migration 0006 grants
# privileges to, created here first so the membership can be granted): it
# owns nothing and has neither superuser nor BYPASSRLS, so PostgreSQL's
# row-level security applies to every statement it runs. Migrations run as
# the owner, $POSTGRES_USER.
set -euo pipefail
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
    -v runtime_password="${PINFOLD_RUNTIME_DB_PASSWORD:?PINFOLD_RUNTIME_DB_PASSWORD is required}" <<'SQL'
SELECT 'CREATE ROLE pinfold_runtime NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE'
    WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pinfold_runtime') \gexec
SELECT format('CREATE ROLE pinfold_app LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE PASSWORD %L', :'runtime_password')
    WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pinfold_app') \gexec
GRANT pinfold_runtime TO pinfold_app;
SQL
