#!/usr/bin/env bash
# ctest check of the simple_model example: runs it in a fresh temporary directory, compares its
# output with the expected lines and checks that modelRI.json parses and lists the 3 tasks.
# Usage: check_simple_model.sh PATH_TO_simple_model
set -euo pipefail
binary=$(realpath "$1")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
"$binary" > output.txt
expected=""
for n in 1 2 3 4; do
  expected+="execute model, loop count: $n."$'\n'
  expected+="6.4000 8.4000 10.4000 12.4000 14.4000 16.4000 18.4000 20.4000"$'\n'
done
if [[ "$(cat output.txt)"$'\n' != "$expected" ]]; then
  echo "unexpected output:"; cat output.txt; exit 1
fi
/usr/bin/python3 -c '
import json, sys
d = json.load(open("modelRI.json"))
kinds = [t["kind"] for s in d["streams"] for t in s["tasks"]]
assert kinds == ["copy", "kernel", "kernel"], kinds
print("modelRI.json ok:", kinds)
'
