#!/usr/bin/env bash
# Creates the Iceberg catalog's own role and database next to Airflow's metadata database.
#
# The official postgres image runs this once, when its data volume is first initialised, with
# POSTGRES_USER/POSTGRES_DB pointing at the superuser and the database it created for Airflow.
# The catalog gets a database of its own so that dropping or restoring Airflow's metadata never
# touches table pointers (and the reverse). Names come from the service's environment, the same
# values docker-compose.yaml puts in the iceberg_default connection's uri.
set -euo pipefail

: "${ICEBERG_DB:?ICEBERG_DB must name the Iceberg catalog database}"
: "${ICEBERG_DB_USER:?ICEBERG_DB_USER must name the Iceberg catalog role}"
: "${ICEBERG_DB_PASSWORD:?ICEBERG_DB_PASSWORD must be set for the Iceberg catalog role}"

psql -v ON_ERROR_STOP=1 \
    --username "${POSTGRES_USER:-postgres}" --dbname "${POSTGRES_DB:-postgres}" \
    --set=db="$ICEBERG_DB" --set=db_user="$ICEBERG_DB_USER" \
    --set=db_password="$ICEBERG_DB_PASSWORD" <<'SQL'
CREATE ROLE :"db_user" LOGIN PASSWORD :'db_password';
CREATE DATABASE :"db" OWNER :"db_user";
SQL
