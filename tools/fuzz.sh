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
# Environment: FUZZ_WORK (default build/fuzz/fuzz-work) holds the corpus copies and crash
# files, FUZZ_ARGS adds libFuzzer flags (e.g. FUZZ_ARGS=-jobs=2).
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
failed=()
for t in "${targets[@]}"; do
  corpus=$work/$t/corpus
  artifacts=$work/$t/artifacts
  rm -rf "${work:?}/$t"
  mkdir -p "$corpus" "$artifacts"
  cp -r tests/fuzz/corpus/"$t"/. "$corpus"/
  seeds=()
  [[ -d tests/fuzz/regressions/$t ]] && seeds+=(tests/fuzz/regressions/"$t")
  echo "fuzz: $t for ${seconds} s (corpus copy in $corpus)"
  # shellcheck disable=SC2086
  if build/fuzz/tests/fuzz/"$t" -max_total_time="$seconds" -max_len="$(max_len "$t")" \
      -rss_limit_mb=2048 -timeout=60 -print_final_stats=1 -artifact_prefix="$artifacts"/ \
      ${FUZZ_ARGS:-} "$corpus" "${seeds[@]}"; then
    echo "fuzz: $t passed"
  else
    failed+=("$t")
    echo "fuzz: $t FAILED; crashing inputs:" >&2
    ls -1 "$artifacts"/* >&2 || true
  fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: failed: ${failed[*]}" >&2
  exit 1
fi
