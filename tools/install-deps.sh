#!/usr/bin/env bash
# Installs every Debian package that Reprise's build, tests and tools need.
# Idempotent and quiet when everything is present. Run as root (or through sudo).
# Nothing is downloaded from anywhere but Debian's apt repositories.
set -euo pipefail

packages=(
  # build
  g++ cmake ninja-build ccache pkg-config clang-format clang-tidy
  # C++ libraries
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  libyaml-cpp-dev prometheus-cpp-dev libdnnl-dev libopenblas-dev libgtest-dev
  libbenchmark-dev libonnx-dev libonnx-testdata libspdlog-dev
  # Python used by tests and tools (always /usr/bin/python3)
  python3-onnx python3-numpy python3-grpcio python3-grpc-tools
  # real architectures for the engine's zoo tests (tools/models/export_zoo.py), about 900 MB
  python3-torch python3-torchvision
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null; then
    exec sudo "$0" "$@"
  fi
  echo "install-deps: missing packages (${missing[*]}); run as root" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
