#!/usr/bin/env bash
# The whole benchmark report in one command: builds what it needs (release preset, -j2), then
# runs tools/bench/run_report.py, which writes docs/benchmarks.md, docs/benchmarks.json and
# docs/benchmarks/*.png (20-25 minutes on the 2-core build machine).
#   tools/bench/run-all.sh [--quick] [--build-dir DIR] [--out DIR] [--no-build]
# --quick: fewer models and repetitions, a few minutes, written to DIR/bench/quick.
# `cmake --build --preset release --target bench` runs it too (with --no-build).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build/release
build_it=1
args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --no-build) build_it=0; shift ;;
    --quick) args+=(--quick); shift ;;
    --out) args+=(--out "$2"); shift 2 ;;
    *) echo "run-all.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [[ $build_it == 1 ]]; then
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
  [[ -f $build/CMakeCache.txt ]] || cmake --preset release >/dev/null
  cmake --build "$build" -j2 --target reprise-server reprise-run reprise-bench reprise-echo
fi
# The Python driver stops the servers it starts; this stops the driver itself on any exit.
pid=
cleanup() { if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid"; wait "$pid" || true; fi; }
trap cleanup EXIT INT TERM
/usr/bin/python3 tools/bench/run_report.py --build-dir "$build" "${args[@]}" &
pid=$!
wait "$pid"
status=$?
pid=
exit $status
