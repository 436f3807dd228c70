#!/usr/bin/env bash
# Checks that the generated files (the counterfeiter fakes) are current: runs `go generate ./...`
# of the product module in a copy of the working tree (tracked and untracked files, .gitignore
# respected) and fails, showing the difference, if it changes or adds any file. The working tree
# itself is never written to. `make generate` brings the fakes up to date.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git ls-files -z --cached --others --exclude-standard -- . ':!:test' ':!:tools/kube' |
  while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
  xargs -0 cp --parents -t "$tmp"

# The copy's index holds the files as they are, so that git shows what go generate changed.
git -C "$tmp" init -q
git -C "$tmp" add -A
if ! (cd "$tmp" && "$GO" generate ./...) >"$tmp.log" 2>&1; then
  cat "$tmp.log"; rm -f "$tmp.log"; echo "go generate ./... failed"; exit 1
fi
rm -f "$tmp.log"

changed=$(git -C "$tmp" diff --name-only; git -C "$tmp" ls-files --others --exclude-standard)
if [ -n "$changed" ]; then
  echo "generated files are not current (make generate, then commit them):"
  git -C "$tmp" --no-pager diff --stat
  git -C "$tmp" ls-files --others --exclude-standard | sed 's/^/ new: /'
  exit 1
fi
echo "generated files are current"
