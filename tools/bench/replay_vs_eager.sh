#!/usr/bin/env bash
# reprise-run in replay and in eager mode, alternated, on the shipped MLP and transformer:
# batch 1, one thread, 200 iterations after 10 warm-up runs, 3 repetitions (default).
# Usage: tools/bench/replay_vs_eager.sh [REPETITIONS]   (after a release build)
set -euo pipefail
cd "$(dirname "$0")/../.."
reps=${1:-3}
run=build/release/tools/reprise-run
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
for rep in $(seq 1 "$reps"); do
  for model in mlp transformer; do
    for mode in replay eager; do
      out=$("$run" --model "tools/models/zoo/$model/model.onnx" \
        --input "tools/models/zoo/$model/input_b1.npy" --threads 1 --iterations 200 --warmup 10 \
        --mode "$mode" --json)
      /usr/bin/python3 -c "import json,sys; d=json.loads(sys.argv[1]); print('rep=$rep model=$model mode=$mode median_us=%.1f min_us=%.1f p90_us=%.1f capture_us=%.1f steps=%d' % (d['median_us'], d['min_us'], d['p90_us'], d['capture_us'], d['steps']))" "$out"
    done
  done
done
