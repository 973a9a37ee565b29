#!/usr/bin/env bash
# Fails when a published module (the root module and the adapter,
# controller/crshard: the two that `make module-check` publishes) lacks its
# LICENSE, or carries other text than the Apache License 2.0 verbatim, or
# lacks its NOTICE with the copyright line. The Go module zip of a module
# holds the LICENSE at its root only, and pkg.go.dev shows no documentation
# for a module whose zip has no license it recognises: each module needs its
# own copy. Run by `make license-check`, part of `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."

modules=(. controller/crshard)
# sha256 of the Apache License 2.0 as apache.org and Debian
# (/usr/share/common-licenses/Apache-2.0) ship it.
apache2=cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30
copyright="Copyright 2026 The kshard Authors"
status=0

for m in "${modules[@]}"; do
  if [[ ! -f "$m/go.mod" ]]; then
    echo "license-check: $m/go.mod does not exist: update the list of published modules in $0" >&2
    status=1
    continue
  fi
  if [[ ! -f "$m/LICENSE" ]]; then
    echo "license-check: $m/LICENSE is missing: copy the Apache License 2.0 there (cp LICENSE $m/LICENSE); its module zip would carry no license" >&2
    status=1
  elif [[ "$(sha256sum < "$m/LICENSE" | cut -d' ' -f1)" != "$apache2" ]]; then
    echo "license-check: $m/LICENSE is not the Apache License 2.0 verbatim (sha256 differs): restore it from /usr/share/common-licenses/Apache-2.0 or https://www.apache.org/licenses/LICENSE-2.0.txt" >&2
    status=1
  fi
  if ! grep -qxF "$copyright" "$m/NOTICE" 2>/dev/null; then
    echo "license-check: $m/NOTICE is missing or lacks the line \"$copyright\"" >&2
    status=1
  fi
done

if (( status == 0 )); then
  echo "license-check: LICENSE (Apache-2.0) and NOTICE in ${#modules[@]} published modules"
fi
exit $status
