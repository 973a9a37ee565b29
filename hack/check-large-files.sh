#!/usr/bin/env bash
# Fails when git tracks a file over 1 MiB: binaries and run outputs belong in
# .gitignore, not in every clone's pack. A generated file that must stay
# large is named in ALLOWED with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=$((1024 * 1024))
# ALLOWED: none today. Add "path" entries here, each with a comment saying why.
ALLOWED=()
status=0
while IFS= read -r -d '' f; do
  [[ -f "$f" ]] || continue # deleted in the work tree, not yet committed
  size=$(stat -c %s "$f")
  if (( size > limit )); then
    for a in "${ALLOWED[@]+"${ALLOWED[@]}"}"; do [[ "$f" == "$a" ]] && continue 2; done
    echo "large-files: $f is $((size / 1024)) KiB, over the 1 MiB limit; remove it from git (git rm --cached) and add it to .gitignore, or name it in hack/check-large-files.sh ALLOWED with the reason" >&2
    status=1
  fi
done < <(git ls-files -z)
exit $status
