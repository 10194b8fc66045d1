#!/usr/bin/env bash
# make compose-test: build the images, run groupd + Prometheus + the integration runner with this
# machine's compose command (scripts/compose.sh), check every dashboard panel's PromQL against the real
# Prometheus, and prove both listeners: the integration runner inside the compose network bootstraps at
# groupd:19092, and a client on this host (tests/compose/host.py) at localhost:9092. Then the stack once
# more with the `postgres` profile and GROUPD_STORAGE_ENGINE=postgresql (docker/Dockerfile.postgres, from
# Debian's package): produce, consume, commit, `restart groupd`, consume again from the committed offset
# (tests/compose/restart.py).
#
# No image registry is reachable here, so base images are built locally: a Debian rootfs from
# debootstrap (mirror taken from this host's apt sources) imported with `docker import`. The Docker
# engine runs from this script with its own data/exec roots and socket under a temp dir. Grafana is
# left out (its image cannot be had here): the dashboard is proven panel by panel through Prometheus.
# Exit codes: 0 passed, 1 failed, 3 no engine can be started here (a message says why).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=${GROUPD_COMPOSE_CACHE:-$HOME/.cache/groupd-compose}
WORK=$(mktemp -d /tmp/groupd-compose.XXXXXX)
SOCK=$WORK/docker.sock
PROJECT=groupdci$$
log() { echo "[compose-test] $*"; }
deadline=$((SECONDS + ${GROUPD_COMPOSE_TIMEOUT:-1500}))

need_install=()
command -v dockerd >/dev/null || need_install+=(docker.io)
bash scripts/compose.sh --which >/dev/null 2>&1 || need_install+=(docker-compose)
command -v debootstrap >/dev/null || need_install+=(debootstrap)
if ((${#need_install[@]})); then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "installing ${need_install[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need_install[@]}" >/dev/null 2>&1 \
      || { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need_install[@]}" >/dev/null; } \
      || { log "NOT RUN: cannot install ${need_install[*]}"; exit 3; }
  else
    log "NOT RUN: ${need_install[*]} missing and cannot be installed (not root or no apt-get)"; exit 3
  fi
fi

cleanup() {
  set +e
  if [ -S "$SOCK" ]; then
    DOCKER_HOST=unix://$SOCK bash scripts/compose.sh -p "$PROJECT" -f docker/docker-compose.yml --profile test \
      --profile postgres down -v >/dev/null 2>&1
  fi
  if [ -f "$WORK/docker.pid" ]; then kill "$(cat "$WORK/docker.pid")" 2>/dev/null; sleep 2; fi
  rm -rf "$WORK" 2>/dev/null
}
trap cleanup EXIT

mkdir -p "$CACHE"
log "starting dockerd"
dockerd --data-root "$CACHE/engine" --exec-root "$WORK/exec" --host "unix://$SOCK" --pidfile "$WORK/docker.pid" \
  --iptables=false >"$WORK/dockerd.log" 2>&1 &
export DOCKER_HOST=unix://$SOCK
for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
docker info >/dev/null 2>&1 || { log "NOT RUN: dockerd did not start: $(tail -3 "$WORK/dockerd.log")"; exit 3; }

if ! docker image inspect groupd-base:local >/dev/null 2>&1; then
  mirror=$(grep -hoE '^(URIs:|deb) +[^ ]+' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | head -1 || true)
  [ -n "$mirror" ] || { log "NOT RUN: no Debian mirror in this host's apt sources"; exit 3; }
  log "building the Debian base image with debootstrap"
  debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates bookworm "$WORK/rootfs" "$mirror" >"$WORK/debootstrap.log" 2>&1 \
    || { log "FAILED: debootstrap: $(tail -5 "$WORK/debootstrap.log")"; exit 1; }
  tar -C "$WORK/rootfs" -c . | docker import - groupd-base:local >/dev/null
  rm -rf "$WORK/rootfs"
fi

# the package index's CA bundle, as the host uses it
rm -f docker/extra-ca/ca.crt
cert=${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}
[ -f "$cert" ] && cp "$cert" docker/extra-ca/ca.crt
build_args=(--build-arg BASE_IMAGE=groupd-base:local)
[ -f docker/extra-ca/ca.crt ] && build_args+=(--build-arg PIP_CERT=/opt/extra-ca/ca.crt)
log "building groupd, integration, prometheus and postgres images"
docker build -q --network host -f docker/Dockerfile "${build_args[@]}" -t groupd:local . >/dev/null
docker build -q --network host -f docker/Dockerfile "${build_args[@]}" --build-arg 'EXTRAS=[test]' -t groupd-integration:local . >/dev/null
docker build -q --network host -f docker/Dockerfile.prometheus --build-arg BASE_IMAGE=groupd-base:local -t groupd-prometheus:local . >/dev/null
docker build -q --network host -f docker/Dockerfile.postgres --build-arg BASE_IMAGE=groupd-base:local -t groupd-postgres:local . >/dev/null
rm -f docker/extra-ca/ca.crt

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
