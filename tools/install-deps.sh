#!/usr/bin/env bash
# Installs every Debian package that Reprise's build, tests and tools need.
# Idempotent and quiet when everything is present. Run as root (or through sudo).
# Nothing is downloaded from anywhere but Debian's apt repositories.
set -euo pipefail

packages=(
  # build
  g++ cmake ninja-build ccache pkg-config clang-format clang-tidy
  # C++ libraries
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev libssl-dev
  libyaml-cpp-dev prometheus-cpp-dev libdnnl-dev libopenblas-dev libgtest-dev
  libbenchmark-dev libonnx-dev libonnx-testdata libspdlog-dev
  # Python used by tests and tools (always /usr/bin/python3)
  python3-onnx python3-numpy python3-grpcio python3-grpc-tools
  # real architectures for the engine's zoo tests (tools/models/export_zoo.py), about 900 MB
  python3-torch python3-torchvision
  # observability and deployment checks: Prometheus (started on 127.0.0.1 by a test, promtool),
  # docker-compose (validates deploy/docker-compose.yml without an engine), YAML for manifests
  prometheus docker-compose python3-yaml
  # benchmark report: plots
  python3-matplotlib
)
# npm fetches ONNX Runtime for the benchmark comparison (tools/bench). Debian's npm package
# brings Node.js; a Node.js that already ships npm (e.g. from another repository) is kept.
command -v npm >/dev/null || packages+=(npm)

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
