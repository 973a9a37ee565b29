# Sourced by hack/kitcheck/lib.sh and hack/release/release.sh.
# forget_version VERSION TMPDIR PATH...: drop the module versions PATH@VERSION
# from the module cache, including the download cache's list of versions,
# so that a version that existed only for one local run is never served
# from the cache later. TMPDIR holds a scratch file.
forget_version() {
  local version=$1 tmp=$2 path dl modcache
  shift 2
  modcache=$(go env GOMODCACHE)
  for path in "$@"; do
    dl="$modcache/cache/download/$path/@v"
    chmod -R u+w "$modcache/$path@$version" 2>/dev/null || true
    rm -rf "$modcache/$path@$version" "$dl/$version".*
    if [[ -f "$dl/list" ]]; then
      grep -vxF "$version" "$dl/list" > "$tmp/list" || true
      if [[ -s "$tmp/list" ]]; then cp "$tmp/list" "$dl/list"; else rm -f "$dl/list"; fi
    fi
  done
}
