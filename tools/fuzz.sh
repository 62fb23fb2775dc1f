#!/usr/bin/env bash
# Runs a libFuzzer target (tests/fuzz) for a while under ASan + UBSan.
#
#   tools/fuzz.sh TARGET [SECONDS]   TARGET: fuzz_infer_request, fuzz_onnx_model,
#                                    fuzz_yaml_config, fuzz_npy,
#                                    fuzz_http_request (the fuzz_ prefix may be left out)
#   tools/fuzz.sh all [SECONDS]      each of the five in turn
#
# SECONDS defaults to 60. Configures and builds the `fuzz` preset (clang-14; installs clang-14
# and libfuzzer-14-dev when missing), then runs the target on a fresh copy of
# tests/fuzz/corpus/<target>/ (the committed corpus never grows) plus the replayed inputs of
# tests/fuzz/regressions/<target>/. Exits non-zero when a target crashes, leaks, runs out of
# memory (-rss_limit_mb=2048) or times out, and prints where the crashing input was written.
#
# Several targets run at once, each one process on its own CPU for SECONDS: FUZZ_PARALLEL of
# them (default: the CPUs this process may use), so `all` on two CPUs takes three rounds, not
# five. Each target's output goes to FUZZ_WORK/TARGET.log and is printed when all have ended.
#
# Environment: FUZZ_WORK (default build/fuzz/fuzz-work) holds the corpus copies, logs and crash
# files, FUZZ_ARGS adds libFuzzer flags (e.g. FUZZ_ARGS=-jobs=2), FUZZ_PARALLEL the targets
# fuzzed at once (1: one after another, the output as it comes).
set -euo pipefail
cd "$(dirname "$0")/.."

all_targets=(fuzz_infer_request fuzz_onnx_model fuzz_yaml_config fuzz_npy fuzz_http_request)

usage() {
  echo "usage: tools/fuzz.sh TARGET|all [SECONDS]; targets: ${all_targets[*]}" >&2
  exit 2
}

[[ $# -ge 1 && $# -le 2 ]] || usage
seconds=${2:-60}
[[ $seconds =~ ^[0-9]+$ ]] || usage

if [[ $1 == all ]]; then
  targets=("${all_targets[@]}")
else
  t=$1
  [[ $t == fuzz_* ]] || t=fuzz_$t
  found=0
  for known in "${all_targets[@]}"; do [[ $known == "$t" ]] && found=1; done
  [[ $found == 1 ]] || usage
  targets=("$t")
fi

parallel=${FUZZ_PARALLEL:-$(nproc)}
[[ $parallel =~ ^[1-9][0-9]*$ ]] || { echo "fuzz: FUZZ_PARALLEL must be a positive number" >&2; exit 2; }

# Longest input per target: big enough for the seeds' structure, small enough to keep
# executions fast.
max_len() {
  case $1 in
    fuzz_infer_request) echo 4096 ;;
    fuzz_onnx_model) echo 16384 ;;
    fuzz_yaml_config) echo 4096 ;;
    fuzz_npy) echo 2048 ;;
    fuzz_http_request) echo 4096 ;;
  esac
}

fuzzer_lib=$(ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a 2>/dev/null || true)
if ! command -v clang++-14 >/dev/null || [[ -z $fuzzer_lib ]]; then
  echo "fuzz: installing clang-14 and libfuzzer-14-dev" >&2
  sudo_cmd=()
  [[ $(id -u) == 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get install -y --no-install-recommends clang-14 libfuzzer-14-dev
fi

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz --target "${targets[@]}"

work=${FUZZ_WORK:-build/fuzz/fuzz-work}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# Fuzzes target $1 for `seconds` on a fresh copy of its corpus; its status is libFuzzer's.
fuzz_one() {
  local t=$1
  local corpus=$work/$t/corpus artifacts=$work/$t/artifacts
  rm -rf "${work:?}/$t"
  mkdir -p "$corpus" "$artifacts"
  cp -r tests/fuzz/corpus/"$t"/. "$corpus"/
  local seeds=()
  [[ -d tests/fuzz/regressions/$t ]] && seeds+=(tests/fuzz/regressions/"$t")
  echo "fuzz: $t for ${seconds} s (corpus copy in $corpus)"
  # shellcheck disable=SC2086
  build/fuzz/tests/fuzz/"$t" -max_total_time="$seconds" -max_len="$(max_len "$t")" \
    -rss_limit_mb=2048 -timeout=60 -print_final_stats=1 -artifact_prefix="$artifacts"/ \
    ${FUZZ_ARGS:-} "$corpus" "${seeds[@]}"
}

# Records the outcome of target $1 from status $2.
failed=()
outcome() {
  if [[ $2 == 0 ]]; then
    echo "fuzz: $1 passed"
  else
    failed+=("$1")
    echo "fuzz: $1 FAILED (status $2); crashing inputs:" >&2
    ls -1 "$work/$1/artifacts"/* >&2 || true
  fi
}

mkdir -p "$work"
if [[ $parallel == 1 || ${#targets[@]} == 1 ]]; then
  for t in "${targets[@]}"; do
    status=0
    fuzz_one "$t" || status=$?
    outcome "$t" "$status"
  done
else
  # Up to `parallel` targets at once; each one's status in FUZZ_WORK/TARGET.status.
  running=0
  for t in "${targets[@]}"; do
    if [[ $running -ge $parallel ]]; then
      wait -n || true
      running=$((running - 1))
    fi
    rm -f "$work/$t.status"
    (
      status=0
      fuzz_one "$t" >"$work/$t.log" 2>&1 || status=$?
      echo "$status" >"$work/$t.status"
    ) &
    running=$((running + 1))
  done
  wait
  for t in "${targets[@]}"; do
    cat "$work/$t.log"
    outcome "$t" "$(cat "$work/$t.status" 2>/dev/null || echo "no status")"
  done
fi

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: failed: ${failed[*]}" >&2
  exit 1
fi
