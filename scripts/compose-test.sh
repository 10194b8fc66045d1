#!/usr/bin/env bash
# make compose-test: build the images, run groupd + Prometheus + the integration runner with this
# machine's compose command (scripts/compose.sh), check every dashboard panel's PromQL against the real
# Prometheus, and prove both listeners: the integration runner inside the compose network bootstraps at
# groupd:19092, and a client on this host (tests/compose/host.py) at localhost:9092. Then the stack once
# more with the `postgres` profile and GROUPD_STORAGE_ENGINE=postgresql (docker/Dockerfile.postgres, from
# Debian's package): produce, consume, commit, `restart groupd`, consume again from the committed offset
# (tests/compose/restart.py). Last, the three-node `cluster` profile (scripts/compose-lib.sh cluster_step).
#
# No image registry is reachable here, so base images are built locally: a Debian rootfs from
# debootstrap (mirror taken from this host's apt sources) imported with `docker import`. The Docker
# engine runs from this script with its own data/exec roots and socket under a temp dir. Grafana is
# left out (its image cannot be had here): the dashboard is proven panel by panel through Prometheus.
# Exit codes: 0 passed, 1 failed, 3 no engine can be started here (a message says why).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PROJECT=groupdci$$
log() { echo "[compose-test] $*"; }
deadline=$((SECONDS + ${GROUPD_COMPOSE_TIMEOUT:-1500}))
source scripts/compose-lib.sh

export GROUPD_INITIAL_DELAY_MS=300 BASE_IMAGE=groupd-base:local
compose=(bash scripts/compose.sh -p "$PROJECT" -f docker/docker-compose.yml --profile test)
log "starting groupd and prometheus"
"${compose[@]}" up -d --no-build groupd prometheus >/dev/null 2>&1
for _ in $(seq 1 60); do
  state=$(docker inspect -f '{{.State.Health.Status}}' "$("${compose[@]}" ps -q groupd)" 2>/dev/null || echo starting)
  [ "$state" = healthy ] && break
  sleep 1
done
log "groupd health: $state"
[ "$state" = healthy ] || { "${compose[@]}" logs groupd | tail -20; exit 1; }
log "running the integration runner"
set +e
timeout $((deadline - SECONDS)) "${compose[@]}" run --rm --no-deps integration
rc=$?
set -e
if [ $rc -ne 0 ]; then "${compose[@]}" logs --tail 30 groupd prometheus; log "FAILED ($rc)"; exit 1; fi
log "a client on this host at localhost:9092"
py=python3; [ -x .venv/bin/python ] && py=.venv/bin/python
if ! timeout 120 "$py" -m tests.compose.host localhost:9092; then
  "${compose[@]}" logs --tail 30 groupd; log "FAILED: the host client"; exit 1
fi
log "passed: groupd + Prometheus + integration runner (in the network) + a host client, every dashboard panel returned data"

wait_healthy() {  # the compose command's words; groupd's health: 'healthy', or what it was at the end
  local state=starting
  for _ in $(seq 1 90); do
    state=$(docker inspect -f '{{.State.Health.Status}}' "$("$@" ps -q groupd)" 2>/dev/null || echo starting)
    [ "$state" = healthy ] && break
    sleep 1
  done
  echo "$state"
}
log "the postgres profile: groupd over PostgreSQL (GROUPD_STORAGE_ENGINE=postgresql)"
"${compose[@]}" down -v >/dev/null 2>&1
pg=(bash scripts/compose.sh -p "$PROJECT" -f docker/docker-compose.yml --profile postgres)
export GROUPD_STORAGE_ENGINE=postgresql GROUPD_POSTGRESQL_PASSWORD=compose-test-$$
"${pg[@]}" up -d --no-build postgres groupd >/dev/null 2>&1
state=$(wait_healthy "${pg[@]}")
log "groupd over PostgreSQL health: $state"
[ "$state" = healthy ] || { "${pg[@]}" logs --tail 20 postgres groupd; log "FAILED: groupd over PostgreSQL"; exit 1; }
if ! timeout 120 "$py" -m tests.compose.restart localhost:9092 before; then
  "${pg[@]}" logs --tail 30 groupd; log "FAILED: the postgres profile before the restart"; exit 1
fi
"${pg[@]}" restart groupd >/dev/null 2>&1
state=$(wait_healthy "${pg[@]}")
log "groupd restarted, health: $state"
if ! timeout 120 "$py" -m tests.compose.restart localhost:9092 after; then
  "${pg[@]}" logs --tail 30 groupd; log "FAILED: the postgres profile after the restart"; exit 1
fi
rows=$("${pg[@]}" exec -T postgres psql -h /tmp -U groupd -d groupd -Atc "SELECT count(*) FROM groupd_batch")
log "the records and the commit are in PostgreSQL ($rows batch rows)"
[ "${rows:-0}" -gt 0 ] || { log "FAILED: no batch rows in PostgreSQL"; exit 1; }
log "passed: the postgres profile (produce, consume, commit, restart groupd, consume from the committed offset)"
"${pg[@]}" down -v >/dev/null 2>&1
cluster_step
