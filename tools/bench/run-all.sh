#!/usr/bin/env bash
# The whole benchmark report in one command: builds what it needs (release preset, -j2), then
# runs tools/bench/run_report.py, which writes docs/benchmarks.md, docs/benchmarks.json and
# docs/benchmarks/*.png (20-25 minutes on the 2-core build machine).
#   tools/bench/run-all.sh [--quick] [--build-dir DIR] [--out DIR] [--no-build] [--broad]
#                          [--broad-only]
# --quick: fewer models and repetitions, a few minutes, written to DIR/bench/quick.
# --broad: then tools/bench/broad_zoo.py writes the section "Broad zoo against ONNX Runtime
# (issue 21)" of the same benchmarks.md (one pass over the broad zoo took 35 minutes on the
# 2-core machine; the default is two; with --quick one pass of 0.3 s runs). --broad-only: that
# section alone.
# `cmake --build --preset release --target bench` runs it too (with --no-build).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build/release
build_it=1
report=1
broad=0
quick=
out=
args=()
broad_args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --no-build) build_it=0; shift ;;
    --quick) args+=(--quick); broad_args+=(--reps 1 --budget-s 0.3); quick=1; shift ;;
    --out) args+=(--out "$2"); out=$2; shift 2 ;;
    --broad) broad=1; shift ;;
    --broad-only) broad=1; report=0; shift ;;
    *) echo "run-all.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [[ $build_it == 1 ]]; then
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
  [[ -f $build/CMakeCache.txt ]] || cmake --preset release >/dev/null
  if [[ $report == 1 ]]; then
    cmake --build "$build" -j2 --target reprise-server reprise-run reprise-bench reprise-echo
  else
    cmake --build "$build" -j2 --target reprise-run
  fi
fi
# The broad section goes into the benchmarks.md that run_report.py writes (or has written).
if [[ -n $out ]]; then broad_args+=(--out "$out");
elif [[ -n $quick ]]; then broad_args+=(--out "$build/bench/quick"); fi
# The Python driver stops the servers it starts; this stops the driver itself on any exit.
pid=
cleanup() { if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid"; wait "$pid" || true; fi; }
trap cleanup EXIT INT TERM
status=0
if [[ $report == 1 ]]; then
  /usr/bin/python3 tools/bench/run_report.py --build-dir "$build" "${args[@]}" &
  pid=$!
  wait "$pid" || status=$?
  pid=
fi
if [[ $broad == 1 && $status == 0 ]]; then
  /usr/bin/python3 tools/bench/broad_zoo.py --build-dir "$build" "${broad_args[@]}" &
  pid=$!
  wait "$pid" || status=$?
  pid=
fi
exit $status
