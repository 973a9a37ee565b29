#!/usr/bin/env bash
# Fails when README.md is over 200 lines, or when a relative markdown link
# in README.md, CHANGELOG.md, docs/*.md or any other README.md points to a
# file that does not exist. Links to web pages (http:, https:, mailto:) and
# to anchors of the same page are not checked; for a link to another file
# only the file is, not the anchor after '#'. Code spans and fenced code
# blocks are skipped. Run by `make docs-check`, part of `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."

max_readme_lines=200
status=0

lines=$(wc -l < README.md)
if (( lines > max_readme_lines )); then
  echo "docs-check: README.md has $lines lines, over $max_readme_lines: move detail into docs/ and link it" >&2
  status=1
fi

# The files to check: tracked or new (not ignored), so a doc added but not
# yet committed is checked too.
if git rev-parse --git-dir >/dev/null 2>&1; then
  list() { git ls-files --cached --others --exclude-standard -- "$@"; }
else
  list() { find . -path ./.git -prune -o -type f -print | sed 's|^\./||' | grep -E "$(printf '%s|' "$@" | sed 's/\*/.*/g; s/|$//')"; }
fi
files=$( { echo README.md; echo CHANGELOG.md; list 'docs/*.md' '*README.md'; } | sort -u)

for f in $files; do
  [[ -f "$f" ]] || continue # listed by git but deleted in the work tree
  dir=$(dirname "$f")
  # One "line<TAB>target" per relative link: inline links and images
  # [text](target "title"), and reference definitions [id]: target.
  while IFS=$'\t' read -r line target; do
    path=${target%%#*}
    path=${path%%\?*}
    path=${path//%20/ }
    [[ -n "$path" ]] || continue # an anchor of the same page
    if [[ "$path" == /* ]]; then
      resolved=".$path" # GitHub resolves a leading / at the repository's root
    else
      resolved="$dir/$path"
    fi
    if [[ ! -e "$resolved" ]]; then
      echo "docs-check: $f:$line: link to $target: no such file ($resolved)" >&2
      status=1
    fi
  done < <(awk '
    /^[ \t]*(```|~~~)/ { fence = !fence; next }
    fence { next }
    {
      s = $0
      gsub(/`[^`]*`/, "", s) # code spans
      if (match(s, /^[ \t]*\[[^]]+\]:[ \t]*[^ \t]+/)) {
        t = substr(s, RSTART, RLENGTH)
        sub(/^[ \t]*\[[^]]+\]:[ \t]*/, "", t)
        emit(t)
      }
      while (match(s, /\]\([^) \t]+/)) {
        t = substr(s, RSTART + 2, RLENGTH - 2)
        s = substr(s, RSTART + RLENGTH)
        emit(t)
      }
    }
    function emit(t) {
      sub(/^</, "", t); sub(/>$/, "", t)
      if (t ~ /^(https?|mailto|ftp):/ || t ~ /^#/) return
      printf "%d\t%s\n", NR, t
    }
  ' "$f")
done

if (( status == 0 )); then
  echo "docs-check: README.md $lines lines; relative links resolve in $(echo "$files" | wc -w) files"
fi
exit $status
