#!/bin/sh
# The entrypoint of docker/Dockerfile.postgres: at the first start (an empty data directory) initdb with
# POSTGRES_USER (default postgres) as the superuser and POSTGRES_PASSWORD as its password (required:
# other containers connect over the network with it), then POSTGRES_DB created; every start then runs
# the server listening on every address of the container, password (scram-sha-256) authentication for
# the network. Arguments after a leading `postgres` are the server's (compose passes `-c` settings).
set -eu
user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then
    echo "groupd-postgres: POSTGRES_PASSWORD is empty: set it (other containers log in with it)" >&2
    exit 1
  fi
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb -D "$PGDATA" -U "$user" --pwfile="$pwfile" -E UTF8 --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  if [ "$db" != postgres ]; then
    echo "CREATE DATABASE \"$db\" OWNER \"$user\"" | postgres --single -D "$PGDATA" postgres >/dev/null
  fi
  echo "groupd-postgres: initialised $PGDATA (superuser $user, database $db)"
fi
[ "${1:-}" = postgres ] && shift
exec postgres -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories=/tmp "$@"
