#!/usr/bin/env bash
# operatorlab-start: the single-user image's entrypoint (under tini), the equivalent of `make lab`.
#
#   tini -g -- operatorlab-start jupyterhub-singleuser [args...]
#
# 1. Gives the learner their own copy of the course ($OPERATORLAB_SOURCE, read-only in the
#    image) at $OPERATORLAB_REPO, once: the labs write a learner's copy of an operator into
#    labs/<id>/, and on a persistent home the learner's edits survive a restart. Delete it
#    to get the image's version again.
# 2. Starts the lab cluster (etcd, kube-apiserver, ... as child processes on 127.0.0.1)
#    BEFORE the server, so the first notebook never meets a half-started cluster. If it
#    fails, the server starts anyway (a crash loop would hide the log): the pod log says
#    why, and `operatorlab cluster up` in a terminal retries.
# 3. Exports KUBECONFIG, KUBEBUILDER_ASSETS and PATH (kubectl) for every kernel and
#    terminal, as `make lab` does with `operatorlab cluster env`, then execs the server.
#
# Needs no privilege and no ServiceAccount token: every port is on loopback, every file
# under $HOME and $OPERATORLAB_CACHE. tests/integration/test_jupyterhub_unprivileged.py
# runs this script as an unprivileged user.
set -euo pipefail

source_dir=${OPERATORLAB_SOURCE:-/opt/operatorlab}
export OPERATORLAB_REPO=${OPERATORLAB_REPO:-$HOME/operatorlab}
cluster=${OPERATORLAB_CLUSTER_NAME:-lab}

if [[ ! -d $OPERATORLAB_REPO ]]; then
  echo "[operatorlab-start] copying the course into $OPERATORLAB_REPO"
  mkdir -p "$(dirname "$OPERATORLAB_REPO")"
  cp -R "$source_dir" "$OPERATORLAB_REPO.tmp.$$"
  mv "$OPERATORLAB_REPO.tmp.$$" "$OPERATORLAB_REPO"  # whole or not at all, should the pod stop mid-copy
fi

if ! operatorlab cluster up --name "$cluster"; then
  echo "[operatorlab-start] the lab cluster did not start (above: why). The server starts anyway;" \
       "retry in a terminal with: operatorlab cluster up" >&2
fi
# Fails only if the cluster never got as far as writing its kubeconfig.
env_lines=$(operatorlab cluster env --name "$cluster") && eval "$env_lines"

exec "$@"
