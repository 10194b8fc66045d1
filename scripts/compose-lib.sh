# Sourced by scripts/compose-test.sh and scripts/compose-cluster-test.sh (from the repository's root, with
# PROJECT, log() and deadline set): install what is missing, start a private Docker engine, build the Debian base
# image with debootstrap and the groupd, integration, prometheus and postgres images from this tree; then
# ``cluster_step``, the three-node profile's test. Exit 3 when no engine can be started here.
CACHE=${GROUPD_COMPOSE_CACHE:-$HOME/.cache/groupd-compose}
WORK=$(mktemp -d /tmp/groupd-compose.XXXXXX)
SOCK=$WORK/docker.sock

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
    DOCKER_HOST=unix://$SOCK bash scripts/compose.sh -p "$PROJECT" -f docker/docker-compose.yml \
      -f docker/docker-compose.cluster.yml --profile test --profile postgres --profile cluster down -v >/dev/null 2>&1
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


# The three-node profile (docker/docker-compose.cluster.yml) over the postgres service, lease 3 s: every
# node up and healthy; from the compose network (tests/compose/cluster.py) each node lists the three and
# the same leaders, records go through every node and a group reads and commits them; then node 2 is
# killed (docker kill) while an idempotent producer sends: it carries on, and the group reads exactly the
# acknowledged records from its commit on the two survivors.
cluster_step() {
  local cl=(bash scripts/compose.sh -p "$PROJECT" -f docker/docker-compose.yml -f docker/docker-compose.cluster.yml
            --profile cluster --profile test)
  local began=$SECONDS state s out
  export GROUPD_CLUSTER_LEASE_MS=3000 GROUPD_POSTGRESQL_PASSWORD=compose-test-$$
  "${cl[@]}" down -v >/dev/null 2>&1
  "${cl[@]}" up -d --no-build postgres groupd groupd-2 groupd-3 >/dev/null 2>&1
  for _ in $(seq 1 90); do
    state=$(for s in groupd groupd-2 groupd-3; do
      docker inspect -f '{{.State.Health.Status}}' "$("${cl[@]}" ps -q "$s")" 2>/dev/null || echo starting
    done | sort -u | tr '\n' ' ')
    [ "$state" = "healthy " ] && break
    sleep 1
  done
  log "three nodes' health: $state"
  [ "$state" = "healthy " ] || { "${cl[@]}" logs --tail 20 groupd groupd-2 groupd-3; log "FAILED: the cluster profile did not start"; return 1; }
  if ! timeout 180 "${cl[@]}" run --rm --no-deps --entrypoint python3 integration -m tests.compose.cluster before; then
    "${cl[@]}" logs --tail 30 groupd groupd-2 groupd-3; log "FAILED: the cluster profile before the kill"; return 1
  fi
  out=$WORK/cluster-across.log
  timeout 240 "${cl[@]}" run --rm --no-deps --entrypoint python3 integration -m tests.compose.cluster across >"$out" 2>&1 &
  local runner=$!
  for _ in $(seq 1 120); do grep -q "producing across the kill" "$out" && break; sleep 0.5; done
  sleep 3
  docker kill "$("${cl[@]}" ps -q groupd-2)" >/dev/null
  log "node 2 killed (docker kill) under the producer"
  if ! wait "$runner"; then
    cat "$out"; "${cl[@]}" logs --tail 30 groupd groupd-3; log "FAILED: the cluster profile across the kill"; return 1
  fi
  cat "$out"
  log "passed: the cluster profile (three nodes, records through every node, node 2 killed under load; $((SECONDS - began)) s)"
}
