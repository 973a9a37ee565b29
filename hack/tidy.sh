#!/usr/bin/env bash
# make tidy: go mod tidy in the given module directories (default: every
# module of the repository but hack/tools and its compat pins, which
# hack/tools/pin.sh writes).
# With -diff, change nothing: print what tidying would change and fail if
# anything would.
#
# controller/crshard requires github.com/kshard/kshard at the release
# version both modules share (docs/install.md), which is not published
# before it is tagged, and go mod tidy ignores go.work; so there tidy runs
# on a copy of go.mod that replaces github.com/kshard/kshard with the
# checkout, and the replace is dropped again before the copy is compared or
# written back. That copy is passed with -modfile, which the go command
# refuses in workspace mode: hence GOWORK=off. The adapter's go.sum holds no
# line for github.com/kshard/kshard (the workspace resolves it from the
# checkout; a user's go.sum gets it from the checksum database), and -diff
# ignores such lines should a tidy after the release have added them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
diff=false
if [[ "${1:-}" == -diff ]]; then diff=true; shift; fi
dirs=("$@")
if (( ${#dirs[@]} == 0 )); then
  mapfile -t dirs < <(cd "$root" && git ls-files --cached --others --exclude-standard -- go.mod '*/go.mod' |
    xargs -n1 dirname | grep -Ev '^hack/tools(/|$)' | sort -u)
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# requiresRoot DIR: whether DIR's go.mod requires github.com/kshard/kshard
# without replacing it.
requiresRoot() {
  grep -Eq '^(require[[:space:]]+|[[:space:]]+)github\.com/kshard/kshard[[:space:]]+v' "$1/go.mod" &&
    ! grep -Eq 'github\.com/kshard/kshard[[:space:]]+(v[^[:space:]]+[[:space:]]+)?=>' "$1/go.mod"
}

# withoutRoot FILE: FILE without its lines for github.com/kshard/kshard.
withoutRoot() { grep -v '^github.com/kshard/kshard ' "$1" || true; }

status=0
for dir in "${dirs[@]}"; do
  mod="$root/$dir"
  if ! requiresRoot "$mod"; then
    if $diff; then
      go -C "$mod" mod tidy -diff || { echo "tidy: $dir is not tidy (make tidy)" >&2; status=1; }
    else
      go -C "$mod" mod tidy
    fi
    continue
  fi
  rm -f "$tmp/go.mod" "$tmp/go.sum"
  cp "$mod/go.mod" "$tmp/go.mod"
  if [[ -f "$mod/go.sum" ]]; then cp "$mod/go.sum" "$tmp/go.sum"; fi
  (
    cd "$mod"
    export GOWORK=off
    go mod edit -modfile="$tmp/go.mod" -replace=github.com/kshard/kshard="$root"
    go mod tidy -modfile="$tmp/go.mod"
    go mod edit -modfile="$tmp/go.mod" -dropreplace=github.com/kshard/kshard
  )
  if $diff; then
    if ! diff -u "$mod/go.mod" "$tmp/go.mod" ||
      ! diff -u <(withoutRoot "$mod/go.sum") <(withoutRoot "$tmp/go.sum"); then
      echo "tidy: $dir is not tidy (make tidy)" >&2
      status=1
    fi
  else
    cp "$tmp/go.mod" "$mod/go.mod"
    cp "$tmp/go.sum" "$mod/go.sum"
  fi
done
exit $status
