#!/usr/bin/env bash
# Prepares the GPU check on a machine without a GPU: builds the CUDA test binaries,
# cuda_zoo_bench, the daemon and its CLI (release preset), and packs them with every shared library they load that a
# stock CUDA image may lack into build/gpu-bundle/bundle.tar.xz. Carry build/gpu-bundle to the
# GPU machine and run tools/gpu-check.sh there (docs: runtime/core/cuda/README.md).
#
# Left out on purpose: the C library and the C++ runtime (the GPU image has newer, compatible
# ones), the driver (libcuda) and cuBLAS / cuBLASLt (over 500 MB; gpu-check.sh finds the GPU
# image's own copy, CUDA 13 like ours).
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
targets=(cuda_probe_test cuda_backend_test cuda_capture_test cuda_kernels_diff_test cuda_zoo_bench
         reprise reprise-server cuda_serving_test)
[[ -d build/release ]] || cmake --preset release >/dev/null
cmake --build --preset release -j2 --target "${targets[@]}"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
for t in "${targets[@]}"; do
  bin=$(find build/release -name "$t" -type f -perm -u+x | head -1)
  cp "$bin" "$stage/bin/"
  ldd "$bin" | awk '/=> \//{print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*|\
      libcuda.so*|libcublas.so*|libcublasLt.so*) ;;
      *) cp -L -n "$lib" "$stage/lib/" ;;
    esac
  done
done
mkdir -p build/gpu-bundle
tar -C "$stage" -cJf build/gpu-bundle/bundle.tar.xz bin lib
git rev-parse HEAD > build/gpu-bundle/COMMIT
du -h build/gpu-bundle/bundle.tar.xz
echo "carry build/gpu-bundle; on the GPU machine: tools/gpu-check.sh build/gpu-bundle"
