#!/usr/bin/env bash
# The compose command that works on this machine, run with the given arguments: Docker's compose plugin
# (`docker compose`) when the docker CLI has it, else the standalone `docker-compose` (Debian's
# docker-compose package, v1.29, reads the same file). `scripts/compose.sh --which` prints the choice.
set -euo pipefail
if docker compose version >/dev/null 2>&1; then
  cmd=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then
  cmd=(docker-compose)
else
  echo "no compose command: install Docker's compose plugin (docker compose) or docker-compose (apt-get install docker-compose)" >&2
  exit 127
fi
if [ "${1:-}" = "--which" ]; then echo "${cmd[*]}"; exit 0; fi
exec "${cmd[@]}" "$@"
