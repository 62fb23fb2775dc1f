#!/usr/bin/env bash
# ctest check of an example: runs it in a fresh temporary directory and compares its standard
# output with the expected text; with a third argument, also runs that Python code on the
# modelRI.json it wrote (parsed into `d`).
# Usage: check_example_output.sh PATH_TO_EXAMPLE EXPECTED_OUTPUT_FILE [PYTHON_ASSERTIONS]
set -euo pipefail
binary=$(realpath "$1")
expected=$(realpath "$2")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
"$binary" > output.txt
if ! diff -u "$expected" output.txt; then
  echo "unexpected output of $(basename "$binary")"; exit 1
fi
echo "output ok: $(wc -l < output.txt) lines"
if [[ $# -ge 3 ]]; then
  /usr/bin/python3 -c "import json; d = json.load(open('modelRI.json')); $3"
  echo "modelRI.json ok"
fi
