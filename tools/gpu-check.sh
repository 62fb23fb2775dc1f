#!/usr/bin/env bash
# The CUDA backend's check on a machine with an NVIDIA GPU and no package access (issue 10):
# one run, well under 8 minutes on an H200. Prepare it where there is no GPU with
# tools/gpu-bundle.sh, carry build/gpu-bundle, then from the repository root:
#
#   tools/gpu-check.sh [BUNDLE_DIR]        (default build/gpu-bundle)
#
# Runs: the gpu-labelled test binaries (probe, backend, capture semantics incl. the seed sample,
# the GPU-vs-CPU differential kernel test), the zoo models (MLP, transformer, ResNet-18 exported
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

for t in cuda_probe_test cuda_backend_test cuda_capture_test cuda_kernels_diff_test; do
  step "$t"
  timeout 120 "$bin/$t" --gtest_brief=1 >"$work/$t.out" 2>&1
  status=$?
  cat "$work/$t.out"
  # A skipped test means no GPU was usable: that is a failure of this check.
  if [[ $status -eq 0 ]] && grep -q 'SKIPPED' "$work/$t.out"; then status=99; fi
  result "$t" "$status"
done

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
