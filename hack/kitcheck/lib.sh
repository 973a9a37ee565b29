# Sourced by run.sh (make kit-check) and modulecheck.sh (make
# module-check): publish the checkout's modules into a file:// module proxy
# at a fresh local version, and make a scratch module outside the checkout
# that resolves them only from there.
#
# After sourcing: $root (the checkout), $work (a temporary directory,
# removed on exit), $version (the local version), $scratch (the scratch
# module's directory, once scratch_module ran).

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$root/hack/kitcheck/forget.sh"
work=$(mktemp -d /tmp/kshard-kitcheck-XXXXXX)
# The pid keeps two checks started in the same second apart: both use the
# one module cache.
version="v0.0.0-local.$(date -u +%Y%m%d%H%M%S).$$"
published=()

cleanup() {
  # The version exists only for this run: drop it from the module cache,
  # including the download cache's list of the versions it holds.
  forget_version "$version" "$work" "${published[@]}"
  rm -rf "$work"
}
trap cleanup EXIT

# check_tidy [DIR...]: fail unless the modules in DIR... (default: every
# module but hack/tools) are tidy (hack/tidy.sh). The scratch module's go mod
# tidy needs what tidying the published modules needs (every go.mod of the
# graph, and the modules of its dependencies' tests); a module cache filled
# by builds alone lacks some (seen: go-spew v1.1.1's go.mod,
# gopkg.in/check.v1), and this dry tidy fetches them first.
check_tidy() {
  "$root/hack/tidy.sh" -diff "$@"
}

# publish [NESTED_DIR...]: the root module and the nested modules in the
# given directories, at $version, into file://$work/proxy (see main.go).
publish() {
  local dir
  published=(github.com/kshard/kshard)
  for dir in "$@"; do published+=("github.com/kshard/kshard/$dir"); done
  echo "kit-check: publishing ${published[*]} at $version in file://$work/proxy"
  local flags=()
  for dir in "$@"; do flags+=(-nested "$dir"); done
  go -C "$root/hack/kitcheck" run . -root "$root" -proxy "$work/proxy" -version "$version" "${flags[@]}"
}

# scratch_module MODULE_PATH TEMPLATE REQUIRE...: a module outside the
# checkout requiring the given module paths at $version, with TEMPLATE (a
# file in hack/kitcheck) as its test; tidied from the proxy alone.
scratch_module() {
  local path=$1 template=$2 req
  shift 2
  scratch="$work/scratch"
  mkdir "$scratch"
  cp "$root/hack/kitcheck/$template" "$scratch/$(basename "$template" .in)"
  {
    printf 'module %s\n\ngo 1.26.0\n\nrequire (\n' "$path"
    for req in "$@"; do printf '\t%s %s\n' "$req" "$version"; done
    printf ')\n'
  } > "$scratch/go.mod"

  # The published modules come only from the file proxy (no checksum
  # database knows this version); every other module from the module
  # cache, as the checkout's go.sum files pin them.
  export GOPROXY="file://$work/proxy" GONOSUMDB=github.com/kshard/kshard GOFLAGS=-mod=mod GOWORK=off
  unset KSHARD_TOOLS_DIR
  # The scratch go.sum starts from the published modules': the same
  # versions, already verified when the checkout's modules were downloaded.
  local dir sums=("$root/go.sum")
  for dir in "${published[@]:1}"; do sums+=("$root/${dir#github.com/kshard/kshard/}/go.sum"); done
  sort -u "${sums[@]}" > "$scratch/go.sum"
  (cd "$scratch" && go mod tidy)
  if grep -rq "$root" "$scratch/go.mod" "$scratch/go.sum"; then
    echo "kit-check: the scratch module refers to the checkout" >&2
    exit 1
  fi
}
