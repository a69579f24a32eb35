#!/usr/bin/env bash
# Build the upstream control-plane binaries from Go modules into a cache outside
# the repo: kube-apiserver, kube-controller-manager, kube-scheduler, kubectl
# (k8s.io/kubernetes), etcd (go.etcd.io/etcd/server/v3) and kwok (sigs.k8s.io/kwok).
#
# Idempotent: a binary already in the cache is not rebuilt. Prints the cache's bin
# directory on the last line of stdout. One Go module per product (kubernetes/,
# etcd/, kwok/) so minimal version selection never mixes their dependency graphs.
#
# Usage: build.sh            every binary (what the local cluster runs)
#        build.sh kubectl    kubectl alone (what a cluster someone else runs needs; minutes)
#        build.sh kwokctl    kwokctl from the same pinned kwok module, for `make bench` only
#                            (compares cluster start with ours); into <cache>/<version>/bench/,
#                            never among the binaries a cluster runs
#
# Environment:
#   OPERATORLAB_CACHE   cache root (default ${XDG_CACHE_HOME:-~/.cache}/operatorlab)
#   KUBEBUILDER_ASSETS  if set and complete, nothing is built and it is used as is
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KUBE_VERSION=$(sed -n 's/^require k8s.io\/kubernetes \(v[0-9.]*\)$/\1/p' "$here/kubernetes/go.mod")
ETCD_VERSION=$(sed -n 's/^require go.etcd.io\/etcd\/server\/v3 \(v[0-9.]*\)$/\1/p' "$here/etcd/go.mod")
KWOK_VERSION=$(sed -n 's/^require sigs.k8s.io\/kwok \(v[0-9.]*\)$/\1/p' "$here/kwok/go.mod")
BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok)
only=${1:-}
[[ -z "$only" || "$only" == kubectl || "$only" == kwokctl ]] || { echo "usage: $0 [kubectl|kwokctl]" >&2; exit 2; }
[[ -z "$only" ]] || BINARIES=("$only")

if [[ -n "${KUBEBUILDER_ASSETS:-}" && "$only" != kwokctl ]]; then
  for b in "${BINARIES[@]}"; do
    [[ -x "$KUBEBUILDER_ASSETS/$b" ]] || { echo "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS has no $b; unset it to build from source" >&2; exit 1; }
  done
  echo "$KUBEBUILDER_ASSETS"; exit 0
fi

cache=${OPERATORLAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/operatorlab}
out="$cache/$KUBE_VERSION/bin"
[[ "$only" != kwokctl ]] || out="$cache/$KUBE_VERSION/bench"
mkdir -p "$out"
command -v go >/dev/null || { echo "error: Go is not installed. Install Go >= 1.26 (https://go.dev/doc/install), then re-run 'make setup'." >&2; exit 1; }

# Module and build caches are writable so `rm -rf` of the cache works later.
export GOFLAGS="${GOFLAGS:-} -modcacherw -buildvcs=false" CGO_ENABLED=0

log() { printf '[controlplane %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# go build -v prints each package it compiles (cache hits print nothing): count
# them against the dependency total so a cold build shows where it is.
build() { # build <module-dir> <label> <estimate> <ldflags> <packages...>
  local dir=$1 label=$2 estimate=$3 ldflags=$4; shift 4
  log "downloading the modules of $label (once; from the Go module proxy)"
  (cd "$here/$dir" && go mod download)
  local total; total=$(cd "$here/$dir" && go list -deps "$@" | wc -l)
  log "building $label: $total packages, $estimate on 2 cores when nothing is cached"
  local start=$SECONDS
  (cd "$here/$dir" && go build -v -trimpath -ldflags="$ldflags" -o "$out/" "$@" 2>&1) |
    awk -v total="$total" -v label="$label" '
      /^go: downloading/ { next }                      # module fetches: already announced
      /^#/ || /: / { print > "/dev/stderr"; next }   # compiler errors pass through
      { n++; if (n % 100 == 0) printf("[controlplane] %s: compiled %d/%d packages\n", label, n, total) > "/dev/stderr" }
      END { printf("[controlplane] %s: compiled %d packages (the rest were cached)\n", label, n) > "/dev/stderr" }'
  [[ ${PIPESTATUS[0]} -eq 0 ]] || { log "FAILED: $label (the Go errors are above)"; exit 1; }
  log "built $label in $((SECONDS - start))s"
}

missing() { for b in "$@"; do [[ -x "$out/$b" ]] || return 0; done; return 1; }

kube_version_ldflags() {
  # Same version stamps upstream's hack/lib/version.sh injects: kubectl version and
  # kwok's version-gated flags parse them.
  local minor=${KUBE_VERSION#v1.} ldf="-s -w" p; minor=${minor%%.*}
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf+=" -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ldf+=" -X $p.gitTreeState=clean -X $p.gitCommit=0000000000000000000000000000000000000000"
    ldf+=" -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$ldf"
}

kwok_ldflags="-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=$KUBE_VERSION"

if [[ "$only" == kwokctl ]]; then
  missing kwokctl && build kwok "kwokctl $KWOK_VERSION" "2-5 min" "$kwok_ldflags" sigs.k8s.io/kwok/cmd/kwokctl
  log "kwokctl ready in $out"
  echo "$out"; exit 0
fi

if [[ "$only" == kubectl ]]; then
  missing kubectl && build kubernetes "kubectl $KUBE_VERSION" "3-8 min" "$(kube_version_ldflags)" \
    k8s.io/kubernetes/cmd/kubectl
  log "kubectl ready in $out"
  echo "$out"; exit 0
fi

if missing etcd; then
  build etcd "etcd $ETCD_VERSION" "1-2 min" "-s -w" ./cmd/etcd
fi
if missing kwok; then
  build kwok "kwok $KWOK_VERSION" "2-5 min" "$kwok_ldflags" sigs.k8s.io/kwok/cmd/kwok
fi
if missing kube-apiserver kube-controller-manager kube-scheduler kubectl; then
  build kubernetes "kubernetes $KUBE_VERSION" "10-25 min" "$(kube_version_ldflags)" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
fi
# kwok simulates kubelets by applying "stages"; the kwok binary ships none, so take
# the same set kwokctl uses (node-fast, heartbeat-with-lease, pod-fast) from the
# pinned module source.
stages="$out/kwok-stages"
if [[ ! -f "$stages/pod-ready.yaml" ]]; then
  src=$(cd "$here/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage
  mkdir -p "$stages"
  cp "$src"/node/fast/node-initialize.yaml "$src"/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
     "$src"/pod/fast/pod-ready.yaml "$src"/pod/fast/pod-complete.yaml "$src"/pod/fast/pod-delete.yaml "$stages/"
  chmod -R u+w "$stages"
fi
log "binaries ready in $out"
echo "$out"
