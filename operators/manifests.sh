#!/usr/bin/env bash
# What `make deploy` and `make undeploy` do with an operator's manifests besides
# applying them; tests/integration/test_manifests.py runs it against a real cluster.
#
#   operators/manifests.sh check [--strict] <crds-dir> <kustomization-dir>
#   operators/manifests.sh namespaces <crds-dir> <kustomization-dir>
#   operators/manifests.sh delete-custom-resources <crds-dir> <kustomization-dir>
#
# check: server-side dry runs (kubectl apply --server-side --dry-run=server) of the
#   CRDs and of the rendered kustomization. A dry run goes through everything a real
#   apply does (decoding, defaulting, schema and object validation, admission,
#   Pod Security) except storing the result. Any refusal fails the check, and so
#   does any warning (--warnings-as-errors: a Pod template that would violate the
#   namespace's Pod Security level, a deprecated API), with the API server's words.
#   Nothing is applied.
#   On a first deploy two things cannot be judged yet: a custom resource whose
#   CRD is not installed (the server does not know its kind), and an object in a
#   namespace not created yet (refused as NotFound). The first waits; the second
#   is dry-run in namespace `default` instead (its own schema and validation, not
#   its namespace's admission). The check names both. --strict allows neither:
#   `make deploy` runs it once crds/ and the namespace are applied, before the rest.
# namespaces: the kustomization's Namespace objects, rendered, on stdout.
# delete-custom-resources: delete the kustomization's custom resources (objects of a
#   group that <crds-dir> defines) and wait until they are gone: kopf's finalizer on
#   them is removed by the operator, so this must run while the operator still does.
#
# Needs kubectl >= 1.27 ($KUBECTL, default kubectl) and awk; uses the current
# kubeconfig context.
set -euo pipefail

KUBECTL=${KUBECTL:-kubectl}
DELETE_TIMEOUT=${DELETE_TIMEOUT:-60s}
PROG=${0##*/}

usage() {
  echo "usage: $PROG check [--strict] | namespaces | delete-custom-resources  <crds-dir> <kustomization-dir>" >&2
  exit 2
}
die() { echo "$PROG: $*" >&2; exit 1; }
say() { echo "[check] $*" >&2; }

command=${1:-}
[[ $# -gt 0 ]] && shift
strict=false
if [[ $command == check && ${1:-} == --strict ]]; then strict=true; shift; fi
[[ $# -eq 2 ]] || usage
crds=$1 dir=$2
[[ -d $crds ]] || die "no such directory: $crds"
[[ -f $dir/kustomization.yaml ]] || die "no kustomization.yaml in $dir"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Render the kustomization and split it into one file per object, $work/obj-NNN.yaml,
# listed in $work/index as "file apiVersion kind name namespace" (namespace "-" if
# none). kustomize writes block-style YAML, top-level keys at column 0 and two
# spaces per level, so metadata's own name and namespace are the two-space lines
# under "metadata:" (a RoleBinding's subjects have such lines too, under "subjects:").
render() {
  "$KUBECTL" kustomize "$dir" >"$work/rendered.yaml" 2>"$work/err" ||
    die "kubectl kustomize $dir failed: $(cat "$work/err")"
  awk -v dir="$work" '
    function flush() {
      if (lines == "") return
      n++; file = sprintf("%s/obj-%03d.yaml", dir, n)
      printf "%s", lines > file; close(file)
      print file, api, kind, name, (ns == "" ? "-" : ns)
    }
    /^---$/ { flush(); lines = api = kind = name = ns = top = ""; next }
    { lines = lines $0 "\n" }
    /^[A-Za-z]/ { top = $1 }
    /^apiVersion: / { api = $2 }
    /^kind: / { kind = $2 }
    top == "metadata:" && /^  name: / { name = $2 }
    top == "metadata:" && /^  namespace: / { ns = $2 }
    END { flush() }
  ' "$work/rendered.yaml" >"$work/index"
}

# The API groups the CRDs in $crds define (each CRD's spec.group).
crd_groups() {
  compgen -G "$crds/*.yaml" >/dev/null || die "no *.yaml in $crds"
  awk '/^  group: / { print $2 }' "$crds"/*.yaml | sort -u
}

# Whether an object of apiVersion $1 is a custom resource: of a group the CRDs in $crds define.
is_custom() { [[ $1 == */* ]] && grep -qxF -- "${1%/*}" <<<"$groups"; }

# "apiVersion kind" of every kind the API server serves now.
served_kinds() {
  "$KUBECTL" api-resources --no-headers >"$work/served" 2>"$work/err" || true
  [[ -s $work/served ]] || die "cannot list the API server's resources: $(cat "$work/err")"
  awk '{ print $(NF-2), $NF }' "$work/served"
}

# concat <list-file> <out-file>: the objects named in <list-file>, as one YAML stream.
concat() {
  : >"$2"
  while read -r file; do
    { echo "---"; cat "$file"; } >>"$2"
  done <"$1"
}

# dry_run <what> <file> [kubectl apply args]: one server-side dry run, or stop.
dry_run() {
  local what=$1 file=$2
  shift 2
  if ! "$KUBECTL" --warnings-as-errors apply --server-side --dry-run=server "$@" -f "$file" >"$work/out" 2>&1; then
    echo "$PROG: the API server refuses $what (server-side dry run; nothing was applied):" >&2
    sed 's/^/  /' "$work/out" >&2
    exit 1
  fi
}

check() {
  dry_run "the CRDs in $crds" "$crds" --force-conflicts
  say "$crds: $(grep -c 'serverside-applied' "$work/out") CRD(s) pass a server-side dry run"
  render
  served_kinds >"$work/kinds"
  : >"$work/in-place"; : >"$work/in-default"; : >"$work/notes"; : >"$work/missing-namespaces"
  local file api kind name ns
  while read -r file api kind name ns; do
    if [[ $strict == false ]]; then
      if is_custom "$api" && ! grep -qxF -- "$api $kind" "$work/kinds"; then
        echo "$kind $name: its CRD is not installed yet" >>"$work/notes"
        continue
      fi
      if [[ $ns != - ]] && ! "$KUBECTL" get namespace "$ns" -o name >/dev/null 2>&1; then
        echo "$ns" >>"$work/missing-namespaces"
        # Without its namespace, so that kubectl takes it to the one -n names.
        awk '/^[A-Za-z]/ { top = $1 } !(top == "metadata:" && /^  namespace: /)' "$file" >"$file.default"
        echo "$file.default" >>"$work/in-default"
        continue
      fi
    fi
    echo "$file" >>"$work/in-place"
  done <"$work/index"
  local checked=0
  if [[ -s $work/in-place ]]; then
    concat "$work/in-place" "$work/in-place.yaml"
    dry_run "$dir" "$work/in-place.yaml"
    checked=$((checked + $(wc -l <"$work/in-place")))
  fi
  if [[ -s $work/in-default ]]; then
    concat "$work/in-default" "$work/in-default.yaml"
    dry_run "$dir (in namespace default)" "$work/in-default.yaml" -n default
    checked=$((checked + $(wc -l <"$work/in-default")))
  fi
  say "$dir: $checked of $(wc -l <"$work/index") object(s) pass a server-side dry run"
  sort "$work/missing-namespaces" | uniq -c | while read -r count ns; do
    echo "namespace $ns does not exist yet: its $count object(s) were dry-run in namespace default" >>"$work/notes"
  done
  if [[ -s $work/notes ]]; then
    say "not judged in full yet (once crds/ and the namespace exist, \`$PROG check --strict\` does):"
    sed 's/^/[check]   /' "$work/notes" >&2
  fi
}

namespaces() {
  render
  awk '$3 == "Namespace" { print $1 }' "$work/index" >"$work/list"
  concat "$work/list" "$work/namespaces.yaml"
  cat "$work/namespaces.yaml"
}

delete_custom_resources() {
  render
  local file api kind name ns
  served_kinds >"$work/kinds"
  : >"$work/list"
  while read -r file api kind name ns; do
    # A kind no longer served has no objects left to delete.
    if is_custom "$api" && grep -qxF -- "$api $kind" "$work/kinds"; then
      echo "$file" >>"$work/list"
    fi
  done <"$work/index"
  [[ -s $work/list ]] || return 0
  concat "$work/list" "$work/custom-resources.yaml"
  if ! "$KUBECTL" delete --ignore-not-found --wait --timeout="$DELETE_TIMEOUT" -f "$work/custom-resources.yaml"; then
    echo "$PROG: the custom resources above are still there after $DELETE_TIMEOUT. kopf's finalizer on them" >&2
    echo "  is removed by the running operator: start it again (make deploy), or, if it is gone for good," >&2
    echo "  remove the finalizer by hand: kubectl patch <kind> <name> --type=merge -p '{\"metadata\":{\"finalizers\":null}}'" >&2
    exit 1
  fi
}

groups=$(crd_groups)

case $command in
  check) check ;;
  namespaces) namespaces ;;
  delete-custom-resources) delete_custom_resources ;;
  *) usage ;;
esac
