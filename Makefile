# groupd: `make run` starts the broker on 127.0.0.1:9092, `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
ARGS ?=

.PHONY: run test lint venv clean bench pipeline compose-up compose-test

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	$(PY) server.py --config config/server.properties $(ARGS)

test: $(STAMP)
	$(VENV)/bin/ruff check .
	@bash scripts/compose-test.sh; rc=$$?; \
	if [ $$rc -eq 3 ]; then echo "compose stack test NOT RUN on this machine (no Docker engine could be started); see the message above"; \
	elif [ $$rc -ne 0 ]; then echo "compose stack test FAILED"; exit $$rc; fi
	$(PY) -m pytest -q -n 2 tests $(ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) data

bench: $(STAMP)
	$(PY) -m bench.run

compose-up:
	docker-compose -f docker/docker-compose.yml up -d groupd prometheus

compose-test:
	bash scripts/compose-test.sh
