#!/usr/bin/env bash
# Builds the pinned local control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kwok, kubectl) into a per-user cache folder and prints that folder.
#
# The folder is keyed by a hash of this module's go.mod and go.sum (where the pins live), so a
# fresh clone on the same machine reuses the binaries and a changed pin builds a new set. Editing
# this script does not: delete the folder to force a rebuild. OPI_KUBE_BIN_DIR overrides the
# folder (it is then used as it is).
#
# Next to the binaries it writes kwok-stages.yaml: the Stage documents of kwok's fast node and
# pod stage sets, read from the pinned kwok module at build time (kwok exits without stages), and
# kwok-crds.yaml: the definition of kwok's PortForward resource, from the same module.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
key=$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-16)
dir=${OPI_KUBE_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/opi/kube-bin/$key}

declare -A pkgs=(
  [etcd]=go.etcd.io/etcd/server/v3
  [kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
  [kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
  [kube-scheduler]=k8s.io/kubernetes/cmd/kube-scheduler
  [kwok]=sigs.k8s.io/kwok/cmd/kwok
  [kubectl]=k8s.io/kubernetes/cmd/kubectl
)
order=(etcd kwok kubectl kube-scheduler kube-controller-manager kube-apiserver)

mkdir -p "$dir"
missing=()
for b in "${order[@]}"; do [ -x "$dir/$b" ] || missing+=("$b"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "building ${missing[*]} into $dir (the first build takes about 15 minutes on 2 cores)" >&2
  cd "$here"
  for b in "${missing[@]}"; do
    start=$SECONDS
    # Build to a temporary name and rename, so an interrupted build never leaves a broken binary.
    CGO_ENABLED=0 go build -trimpath -o "$dir/.$b.tmp" "${pkgs[$b]}"
    mv "$dir/.$b.tmp" "$dir/$b"
    echo "  $b built in $((SECONDS - start))s" >&2
  done
fi

# The pinned kwok module's folder (downloaded when the build cache has it but the module cache
# does not) and version, for the files below.
kwok_module() {
  cd "$here"
  kwok_dir=$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
  if [ -z "$kwok_dir" ] || [ ! -d "$kwok_dir" ]; then
    go mod download sigs.k8s.io/kwok
    kwok_dir=$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
  fi
  kwok_version=$(go list -m -f '{{.Version}}' sigs.k8s.io/kwok)
}

# concat FILE... prints the YAML files as one stream of documents, each ending with exactly one
# newline ($(...) drops trailing newlines), kustomization.yaml files and a leading separator left
# out.
concat() {
  local sep="" f
  for f in "$@"; do
    [ "$(basename "$f")" = kustomization.yaml ] && continue
    printf '%s' "$sep"
    printf '%s\n' "$(sed '1{/^---$/d}' "$f")"
    sep=$'---\n'
  done
}

stages="$dir/kwok-stages.yaml"
if [ ! -s "$stages" ]; then
  kwok_module
  {
    echo "# kwok's fast node and pod stages, from sigs.k8s.io/kwok@$kwok_version (written by tools/kube/build.sh)"
    concat "$kwok_dir"/kustomize/stage/node/fast/*.yaml "$kwok_dir"/kustomize/stage/pod/fast/*.yaml
  } >"$stages.$$.tmp"
  mv "$stages.$$.tmp" "$stages"
  echo "  wrote $stages" >&2
fi

# The definition of kwok's PortForward resource, which localkube installs so that tests create
# port-forward rules while kwok runs.
crds="$dir/kwok-crds.yaml"
if [ ! -s "$crds" ]; then
  kwok_module
  {
    echo "# kwok's port-forward resource definition, from sigs.k8s.io/kwok@$kwok_version (written by tools/kube/build.sh)"
    concat "$kwok_dir"/kustomize/crd/bases/kwok.x-k8s.io_portforwards.yaml
  } >"$crds.$$.tmp"
  mv "$crds.$$.tmp" "$crds"
  echo "  wrote $crds" >&2
fi
echo "$dir"
