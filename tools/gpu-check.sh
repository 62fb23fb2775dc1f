#!/usr/bin/env bash
# The CUDA backend's check on a machine with an NVIDIA GPU and no package access (issue 10):
# one run, well under 8 minutes on an H200. Prepare it where there is no GPU with
# tools/gpu-bundle.sh, carry build/gpu-bundle, then from the repository root:
#
#   tools/gpu-check.sh [BUNDLE_DIR]        (default build/gpu-bundle)
#
# Runs: the gpu-labelled test binaries (probe, backend, capture semantics incl. the seed sample,
# the GPU-vs-CPU differential kernel test, serving on cuda:0), the daemon serving the MLP on
# cuda:0 (KIND_GPU) and on the CPU, answered by the CLI and compared, the zoo models (MLP, transformer, ResNet-18 exported
# there when torch can) on the GPU against the CPU backend, with eager-vs-graph-replay timing at
# batch 1, and PyTorch's eager vs CUDA-graph timing of the same architectures when torch sees
# the GPU. Everything it prints also goes to $OUT/gpu-check.log when $OUT is set. Exit status:
# the number of failed steps (0: all green).
set -uo pipefail
cd "$(dirname "$0")/.."
bundle=${1:-build/gpu-bundle}
work=$(mktemp -d /tmp/reprise-gpu.XXXXXX)
log=${OUT:-$work}/gpu-check.log
exec > >(tee "$log") 2>&1
failures=0
step() { echo; echo "=== $* ($(date +%T))"; }
result() {  # result NAME STATUS
  if [[ $2 -eq 0 ]]; then echo "--- $1: OK"; else echo "--- $1: FAILED ($2)"; failures=$((failures + 1)); fi
}

step "machine"
nvidia-smi -L || echo "nvidia-smi: not available"
tar -C "$work" -xJf "$bundle/bundle.tar.xz" || { echo "no bundle at $bundle"; exit 1; }
echo "bundle of commit $(cat "$bundle/COMMIT" 2>/dev/null), tree at $(git rev-parse HEAD 2>/dev/null)"

# cuBLAS from the GPU image: the CUDA toolkit, or the nvidia-cublas wheel of its Python.
cublas_dir=""
for dir in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [[ -e $dir/libcublasLt.so.13 ]] && cublas_dir=$dir && break
done
if [[ -z $cublas_dir ]]; then
  found=$(find /usr /opt -name 'libcublasLt.so.13' 2>/dev/null | head -1)
  [[ -n $found ]] && cublas_dir=$(dirname "$found")
fi
echo "cuBLAS from: ${cublas_dir:-NOT FOUND}"
export LD_LIBRARY_PATH="$work/lib${cublas_dir:+:$cublas_dir}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export REPRISE_PYTHON=$(command -v python3 || echo /usr/bin/python3)
bin=$work/bin

for t in cuda_probe_test cuda_backend_test cuda_capture_test cuda_kernels_diff_test \
         cuda_serving_test; do
  step "$t"
  timeout 120 "$bin/$t" --gtest_brief=1 >"$work/$t.out" 2>&1
  status=$?
  cat "$work/$t.out"
  # A skipped test means no GPU was usable: that is a failure of this check.
  if [[ $status -eq 0 ]] && grep -q 'SKIPPED' "$work/$t.out"; then status=99; fi
  result "$t" "$status"
done

step "daemon: reprise-server serving the MLP on cuda:0 (KIND_GPU) and on the CPU, via the CLI"
daemon_check() {
  local repo=$work/repo addr=127.0.0.1:18001 kind
  for kind in gpu cpu; do
    mkdir -p "$repo/mlp_$kind/1" && cp tools/models/repository/mlp/1/model.onnx "$repo/mlp_$kind/1/"
  done
  printf 'name: mlp_gpu\nmax_batch_size: 8\ninstance_group: [{count: 2, kind: KIND_GPU, gpus: [0]}]\n' \
    >"$repo/mlp_gpu/config.yaml"
  printf 'name: mlp_cpu\nmax_batch_size: 8\ninstance_group: [{count: 1, kind: KIND_CPU}]\n' \
    >"$repo/mlp_cpu/config.yaml"
  OMP_NUM_THREADS=1 "$bin/reprise-server" --model-repository "$repo" --grpc-address=127.0.0.1 \
    --grpc-port=18001 --http-port=0 --metrics-address=127.0.0.1 --metrics-port=18002 \
    >"$work/server.log" 2>&1 &
  local pid=$! ready=""
  for _ in $(seq 1 120); do
    if "$bin/reprise" --addr "$addr" health 2>/dev/null | grep -q '^ready: yes'; then ready=1; break; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  local status=1
  if [[ -n $ready ]]; then
    status=0
    "$bin/reprise" --addr "$addr" models || status=1
    for batch in b1 b4; do
      for kind in gpu cpu; do
        timeout 60 "$bin/reprise" --addr "$addr" infer "mlp_$kind" \
          --input "input=tools/models/zoo/mlp/input_$batch.npy" --output-dir "$work/out_${kind}_$batch" ||
          status=1
      done
      python3 - "$work/out_gpu_$batch/output.npy" "$work/out_cpu_$batch/output.npy" <<'PY' || status=1
import sys
import numpy as np
got, want = np.load(sys.argv[1]), np.load(sys.argv[2])
assert got.shape == want.shape, (got.shape, want.shape)
diff = float(np.abs(got - want).max())
limit = 1e-4 * max(float(np.abs(want).max()), 1.0)
print(f"{sys.argv[1]}: shape {got.shape}, max |gpu - cpu| = {diff:.3g} (limit {limit:.3g})")
sys.exit(0 if diff <= limit else 1)
PY
    done
    "$bin/reprise" --addr "$addr" instances mlp_gpu || status=1
    # The metrics endpoint serves alongside cuBLAS, and counts the GPU model's requests.
    python3 - <<'PY' || status=1
import re
import sys
import urllib.request
text = urllib.request.urlopen("http://127.0.0.1:18002/metrics", timeout=10).read().decode()
count = sum(float(m.group(1)) for m in re.finditer(
    r'^reprise_requests_total\{[^}]*model="mlp_gpu"[^}]*outcome="success"[^}]*\} (\S+)$', text, re.M))
print(f"/metrics: {len(text)} bytes, successful mlp_gpu requests: {count:g}")
sys.exit(0 if count >= 2 else 1)
PY
  else
    echo "the daemon did not become ready"
  fi
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  echo "--- server log (tail)"
  tail -n 30 "$work/server.log"
  return "$status"
}
daemon_check
result "daemon on cuda:0 vs CPU" $?

step "zoo models: GPU vs CPU, eager launch vs graph replay at batch 1"
zoo=tools/models/zoo
if [[ ! -f $zoo/resnet18/model.onnx ]]; then
  timeout 180 python3 tools/gpu/torch_bench.py --export-resnet18 "$work/resnet18" &&
    zoo_resnet=$work/resnet18
else
  zoo_resnet=$zoo/resnet18
fi
for name in mlp transformer resnet18; do
  dir=$zoo/$name
  [[ $name == resnet18 ]] && dir=${zoo_resnet:-}
  if [[ -z $dir || ! -f $dir/model.onnx ]]; then
    echo "$name: SKIP (no model; torch could not export it)"
    continue
  fi
  timeout 180 "$bin/cuda_zoo_bench" --model "$dir/model.onnx" --input "$dir/input_b1.npy" \
    --expected "$dir/output_b1.npy" --iters 200 --warmup 20 --name "$name"
  result "zoo $name" $?
done

step "PyTorch on the same architectures (eager vs CUDA graph, batch 1)"
timeout 240 python3 tools/gpu/torch_bench.py --iters 200 --warmup 20
result "torch bench" $?

step "summary"
echo "failed steps: $failures"
rm -rf "$work"
exit "$failures"
