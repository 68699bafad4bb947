# Eidolon: two commands on a fresh Linux machine.
#   make demo   set everything up, then run the demo (tables printed, plots in out/)
#   make test   set everything up, then run every test (Go, Python, notebooks)
# Both are idempotent: a second run only rebuilds what changed.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON3 ?= python3
VENV := .venv
PY := $(VENV)/bin/python
TOOLS := $(CURDIR)/.tools
export PATH := $(TOOLS):$(PATH)
export GOFLAGS := -buildvcs=false
# Go sources that end up in the extension: a change triggers a rebuild.
GO_SRC := $(shell find core bindings -name '*.go' -not -name '*_test.go' 2>/dev/null) go.mod go.sum
# A count, not a duration: with a duration, Go 1.26's fuzz coordinator can
# report "context deadline exceeded" at the deadline with no failing input
# (golang/go#75804, fixed in Go 1.27). 200k inputs take about 10 s here.
FUZZTIME ?= 200000x
# Minimizing each new input (60 s by default) would eat the whole fuzz budget.

.PHONY: demo test dev tools venv go-test lint fmt py-test nb-test nb bench fidelity fuzz clean

demo: dev
	$(PY) -m eidolon.demo --out out

test: dev go-test py-test nb-test

# Go tools pinned as `tool` lines in go.mod (gopy v0.5.0, goimports v0.29.0).
$(TOOLS)/.stamp: go.mod go.sum
	GOBIN=$(TOOLS) go install tool
	touch $@
tools: $(TOOLS)/.stamp

# A local virtual environment with pinned packages and a Jupyter kernel.
$(VENV)/.stamp: requirements.txt
	test -x $(PY) || $(PYTHON3) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (eidolon)" >/dev/null
	touch $@
venv: $(VENV)/.stamp

# The gopy extension, installed editable into the venv.
$(VENV)/.eidolon: $(VENV)/.stamp $(TOOLS)/.stamp $(GO_SRC) setup.py pyproject.toml
	$(PY) -m pip install --quiet --disable-pip-version-check --no-build-isolation --no-deps -e .
	touch $@
dev: $(VENV)/.eidolon

go-test: tools lint
	go vet ./...
	go test ./...
	go test -race ./bindings/... ./core/scenario/parallelsearch/...
	go test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./core/spec
	go test -run '^$$' -fuzz '^FuzzParsePipelineLayout$$' -fuzztime 50000x -fuzzminimizetime 1s ./core/model

py-test: dev
	$(PY) -m mypy --strict python/eidolon
	cd python && ../$(PY) -m pytest -q -c ../pyproject.toml --rootdir .. tests eidolon

# Formatting (goimports) and unreachable code (deadcode, with the tests as
# roots; bindings/ is left out: Python calls its exports) are checked, not fixed: `make fmt` fixes the formatting.
lint: tools
	@out=$$(goimports -l core bindings bench); if [ -n "$$out" ]; then echo "not goimports-formatted (run make fmt):"; echo "$$out"; exit 1; fi
	@out=$$(deadcode -test -filter 'eidolon/(core|bench)' ./...); if [ -n "$$out" ]; then echo "unreachable code:"; echo "$$out"; exit 1; fi

fmt: tools
	goimports -w core bindings bench

nb-test: dev
	$(PY) -m pytest -q -p no:cacheprovider -o addopts="" --nbmake --nbmake-timeout=600 notebooks

# Run one notebook in place: make nb NB=notebooks/00_quickstart.ipynb
nb: dev
	$(PY) -m pytest -q -p no:cacheprovider -o addopts="" --nbmake $(NB)

bench: dev
	$(PY) bench/report.py

# Rewrite the committed fidelity reports (bench/fidelity/*.md) from the
# model as it is, after a model change; review the diff. `make test` fails
# while any of them is stale.
fidelity:
	go test -count=1 ./bench/fidelity -update
	go test -count=1 ./bench -run SSMTPFidelity -update-ssmtp

fuzz: tools
	go test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime 2400000x -fuzzminimizetime 1s ./core/spec

clean:
	rm -rf _gopy_build build out python/eidolon/_native/*.so python/eidolon/_native/bindings.py python/eidolon/_native/go.py $(VENV)/.eidolon
