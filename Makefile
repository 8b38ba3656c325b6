# Samsa: the two commands are `make run` and `make test`; everything else is set up by them.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install run cluster test test-deps lint unit slow bench faults clean wheel

install: $(STAMP)

# The broker alone (make run): the runtime dependencies, none of the dev and Spark extras.
RUN_STAMP := $(VENV)/.installed-run

$(STAMP): pyproject.toml setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# compat mode puts the repository itself on sys.path (a .pth): PySpark finds pyspark_samsa
	# with pkgutil.iter_modules, which does not see setuptools' import-hook editable installs.
	$(PY) -m pip install --quiet -e '.[dev,spark]' --config-settings editable_mode=compat
	touch $(STAMP) $(RUN_STAMP)

$(RUN_STAMP): pyproject.toml setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e . --config-settings editable_mode=compat
	touch $(RUN_STAMP)

# The wheel and sdist in dist/ (the wheel's layout: tools/wheel_layout.py).
wheel: install
	$(PY) -m build --outdir dist .

run: $(RUN_STAMP)
	$(VENV)/bin/samsa broker start --config conf/server.properties --override log.dirs=./data

# Three nodes (conf/cluster/node-*.properties, data in ./data/cluster/node-N) in the foreground;
# Ctrl-C stops them all.
cluster: $(RUN_STAMP)
	$(VENV)/bin/samsa cluster start --config-dir conf/cluster

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

# Programs the tests run that pip does not install (kcat, an old librdkafka client).
test-deps:
	.ci/install-kcat.sh

# Three pytest-xdist workers on two cores (the cases wait on broker processes and timeouts
# much of the time: two workers kept 1.4 of the cores busy): a test module runs whole on one worker
# (tests/conftest.py). --durations: the 40 slowest steps close the report, to keep the suite
# within its 30 minutes. WORKERS=0 runs it in one process.
WORKERS ?= 3
test: lint test-deps
	$(PY) -m pytest -q -m 'not slow' --durations=40 -n $(WORKERS)

slow: install
	$(PY) -m pytest -q -m slow

bench: install
	$(PY) -m bench

# The fault campaigns (issue 13): every case of tests/faults/campaigns.py on real 3-node clusters,
# then protocol fuzzing; each run prints its seed and, when it fails, the command that replays it.
SEED    ?= 1
MINUTES ?= 30
faults: install
	$(PY) -m tests.faults --all --seed $(SEED) --minutes $(MINUTES) --results faults-results.jsonl
	$(PY) -m tests.faults.fuzz --seed $(SEED) --minutes 10

# Peer clients' own test suites (kafka-python, librdkafka) against a real broker; not part of test.
.PHONY: compat compat-full compat-cluster
compat: install
	$(PY) -m compat.run

# librdkafka without quick mode (-Q) and with its socket-emulation tests; over an hour on 2 cores.
compat-full: install
	$(PY) -m compat.run --mode full --jobs 2

# The same suites (librdkafka quick mode) against three-node KRaft clusters configured as
# make cluster's (conf/cluster/), on ephemeral ports; results in compat/results/*-cluster.json.
compat-cluster: install
	$(PY) -m compat.run --brokers 3

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
