# groupd: `make run` starts the broker on 127.0.0.1:9092, `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# One stamp per purpose: `make run` installs the broker's own dependencies only (no root, no Java);
# `make test` adds the test clients and the pipeline's (tests/pipeline runs Spark); `make pipeline`
# adds PySpark and Java. Each stamp is remade when pyproject.toml changes.
STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test
PIPELINE_STAMP := $(VENV)/.installed-pipeline
ARGS ?=

.PHONY: run test lint venv clean bench pipeline compose-up compose-test js-deps compat java chromium go-deps fuzz postgresql

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check -e .
	touch $(STAMP)

$(TEST_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test,pipeline]'
	touch $(STAMP) $(TEST_STAMP) $(PIPELINE_STAMP)

$(PIPELINE_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[pipeline]'
	touch $(STAMP) $(PIPELINE_STAMP)

# Spark needs a Java runtime: installed with apt-get when this is root, otherwise a message says what to do.
java:
	@command -v java >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then echo "installing Java for Spark"; \
	    apt-get install -y -q openjdk-17-jre-headless >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null && apt-get install -y -q openjdk-17-jre-headless >/dev/null; }; \
	  else echo "Spark needs Java 17+: install a JRE (e.g. openjdk-17-jre-headless) and rerun"; exit 1; fi; }

# The pipeline report's browser test renders it in Debian's headless Chromium: installed with apt-get when
# this is root; otherwise (or if apt-get fails) a message says so and that test fails saying why.
chromium:
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then echo "installing Chromium for the pipeline report's browser test"; \
	    apt-get install -y -q chromium >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; } || \
	    echo "Chromium could NOT be installed: tests/pipeline/test_report.py's browser test will fail"; \
	  else echo "Chromium is missing (apt-get install chromium): tests/pipeline/test_report.py's browser test will fail"; fi; }

# the PostgreSQL engine's tests start their own server from Debian's PostgreSQL 15 binaries
PG_BIN := /usr/lib/postgresql/15/bin
postgresql:
	@test -x $(PG_BIN)/initdb || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then echo "installing PostgreSQL 15 for the PostgreSQL engine's tests"; \
	    apt-get install -y -q postgresql-15 >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null && apt-get install -y -q postgresql-15 >/dev/null; } || \
	    echo "PostgreSQL could NOT be installed: the PostgreSQL engine's tests (tests/storage) will fail"; \
	  else echo "PostgreSQL 15 is missing (apt-get install postgresql-15): the PostgreSQL engine's tests will fail"; fi; }

venv: $(TEST_STAMP) java chromium postgresql

run: $(STAMP)
	$(PY) -m groupd --config config/server.properties $(ARGS)

JS := tests/clients/js

js-deps:
	@if [ -d $(JS)/node_modules/kafkajs ]; then :; \
	elif command -v npm >/dev/null; then npm ci --prefix $(JS) --no-audit --no-fund --silent; \
	else echo "npm not found: the kafkajs client tests will fail (install Node.js 20)"; fi

# Old clients (tests/clients/test_old_clients.py): Debian's Go, Sarama 1.22, kafka-go 0.2, Burrow and the
# ZooKeeper Burrow keeps its state in. Where apt-get cannot install them, those tests say so and skip.
GO_DEBS := golang-go golang-github-shopify-sarama-dev golang-github-segmentio-kafka-go-dev burrow zookeeper

go-deps:
	@if command -v go >/dev/null && command -v Burrow >/dev/null && [ -d /usr/share/gocode/src/github.com/Shopify/sarama ] \
	  && [ -d /usr/share/gocode/src/github.com/segmentio/kafka-go ] && [ -x /usr/share/zookeeper/bin/zkServer.sh ]; then :; \
	else echo "installing Go, Sarama, kafka-go, Burrow and ZooKeeper for the old-client tests"; \
	  (DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(GO_DEBS) >/dev/null 2>&1 || \
	   (apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(GO_DEBS) >/dev/null)) || \
	  echo "could not install $(GO_DEBS): the old Go client tests will be skipped"; fi

test: $(TEST_STAMP) java chromium js-deps go-deps postgresql
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	@bash scripts/compose-test.sh; rc=$$?; \
	if [ $$rc -eq 3 ]; then echo "compose stack test NOT RUN on this machine (no Docker engine could be started); see the message above"; \
	elif [ $$rc -ne 0 ]; then echo "compose stack test FAILED"; exit $$rc; fi
	$(PY) -m pytest -q -n 2 tests $(ARGS)

lint: $(TEST_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) data

bench: $(STAMP)
	$(PY) -m bench.run

# a million mutated requests at a broker in a child process (not in CI; the suite runs 20,000): one summary line
fuzz: $(TEST_STAMP)
	$(PY) -m tests.fuzz --frames 1000000 $(ARGS)

compat: $(TEST_STAMP) js-deps go-deps
	$(PY) -m pytest -q -n 2 tests/clients
	$(PY) scripts/gen_compat.py

pipeline: $(PIPELINE_STAMP) java
	$(PY) -m groupd.pipeline report --log-dirs ./data --out ./pipeline-out

# groupd on localhost:9092 (for clients on this host) and Prometheus on :9090, with whichever compose
# command this machine has (scripts/compose.sh)
compose-up:
	bash scripts/compose.sh -f docker/docker-compose.yml up -d --build groupd prometheus

compose-test:
	bash scripts/compose-test.sh
