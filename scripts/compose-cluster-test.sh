#!/usr/bin/env bash
# The three-node compose profile alone (docker/docker-compose.cluster.yml; `make test` runs it as the last
# step of scripts/compose-test.sh): the same private Docker engine and images, then cluster_step
# (scripts/compose-lib.sh): three nodes up, records through every node, node 2 killed under an idempotent
# producer, the group reading exactly what was acknowledged. Exit codes: 0 passed, 1 failed, 3 not run here.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PROJECT=groupdcl$$
log() { echo "[compose-cluster-test] $*"; }
deadline=$((SECONDS + ${GROUPD_COMPOSE_TIMEOUT:-900}))
source scripts/compose-lib.sh
cluster_step
