#!/usr/bin/env bash
# Formats the project's C++ and CUDA sources with clang-format (.clang-format).
# With --check: changes nothing and fails, listing the files, if any is unformatted.
set -euo pipefail
cd "$(dirname "$0")/.."

mapfile -t files < <(git ls-files --cached --others --exclude-standard -- \
  '*.cc' '*.h' '*.cu' '*.cuh' | while read -r f; do [[ -f "$f" ]] && echo "$f"; done)
[[ ${#files[@]} -eq 0 ]] && exit 0

if [[ "${1:-}" == "--check" ]]; then
  bad=()
  for f in "${files[@]}"; do
    clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
  done
  if [[ ${#bad[@]} -gt 0 ]]; then
    echo "format: not formatted (run tools/format.sh): ${bad[*]}" >&2
    exit 1
  fi
  echo "format: ${#files[@]} files formatted"
else
  clang-format -i "${files[@]}"
fi
