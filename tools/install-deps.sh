#!/usr/bin/env bash
# Installs the Debian 12 packages one purpose of Reprise needs, nothing from anywhere else:
#   tools/install-deps.sh [--serve|--test|--bench|--all] [--list]
#   --serve  build and run the daemon and its client (tools/start-server.sh, the image's build
#            stage): compilers, CMake, the C++ libraries. No test framework, Python, PyTorch,
#            Node.js or Prometheus.
#   --test   --serve plus everything the ctest suite uses (tools/run-tests.sh, .ci/run):
#            GoogleTest / GoogleMock, Google Benchmark, clang-format, clang-14 with libFuzzer,
#            openssl, Python with onnx / numpy / grpcio / PyTorch, the ONNX test data,
#            Prometheus (promtool), docker-compose (config checks only, no engine).
#   --bench  --serve plus the benchmark report (tools/bench/run-all.sh): PyTorch for the zoo
#            models, matplotlib, Node.js's npm for ONNX Runtime, perf for flame graphs.
#   --all    all of the above and clang-tidy (the default).
#   --list   print the packages of the chosen set and exit (no root needed).
# Idempotent and quiet when everything is present. Otherwise it prints what it will install
# (the packages asked for, how many come with them, the download size) before installing, as
# root (through sudo when available). Packages are installed without Recommends, so every
# package a step needs is named here.
set -euo pipefail

serve=(
  # build
  g++ cmake ninja-build ccache pkg-config
  # C++ libraries. libdnnl-dev's CMake config calls find_package(OpenCL), but the package only
  # recommends ocl-icd-opencl-dev, so it is named here.
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev libssl-dev
  libyaml-cpp-dev prometheus-cpp-dev libdnnl-dev ocl-icd-opencl-dev libonnx-dev libspdlog-dev
  # the HTTP/REST endpoint: Boost.Beast / Asio and RapidJSON (header-only), zlib (gzip, deflate)
  libboost-dev rapidjson-dev zlib1g-dev
)
test=(
  # test frameworks (libgtest-dev does not bring GoogleMock) and the benchmark binaries that
  # the full build compiles
  libgtest-dev libgmock-dev libbenchmark-dev
  # tools/format.sh --check (.ci/run); clang-14 and libFuzzer for the fuzz targets
  clang-format clang-14 libfuzzer-14-dev
  # the openssl command line makes the TLS tests' certificates
  openssl
  # Python used by tests and tools (always /usr/bin/python3)
  python3-onnx python3-numpy python3-grpcio python3-yaml
  # ONNX's node test data (the kernels' and the conformance tests)
  libonnx-testdata
  # real architectures for the engine's zoo tests (tools/models/export_zoo.py), about 900 MB
  python3-torch python3-torchvision
  # observability and deployment checks: Prometheus (started on 127.0.0.1 by a test, promtool),
  # docker-compose (validates deploy/docker-compose.yml without an engine)
  prometheus docker-compose
)
bench=(
  libbenchmark-dev python3-numpy python3-onnx python3-torch python3-torchvision
  python3-matplotlib
  # perf record for the request path's flame graphs (tools/bench/request_path.py --flame-svg)
  linux-perf
)
# by hand only (no script runs it): the .clang-tidy checks
dev=(clang-tidy)

purpose=all
list_only=0
for arg in "$@"; do
  case "$arg" in
    --serve | --test | --bench | --all) purpose=${arg#--} ;;
    --list) list_only=1 ;;
    -h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install-deps: unknown argument '$arg' (--serve, --test, --bench, --all, --list)" >&2
       exit 2 ;;
  esac
done

packages=("${serve[@]}")
case "$purpose" in
  test) packages+=("${test[@]}") ;;
  bench) packages+=("${bench[@]}") ;;
  all) packages+=("${test[@]}" "${bench[@]}" "${dev[@]}") ;;
esac
if [[ $purpose == bench || $purpose == all ]]; then
  # npm fetches ONNX Runtime for the benchmark comparison (tools/bench). Debian's npm package
  # brings Node.js; a Node.js that already ships npm (e.g. from another repository) is kept.
  command -v npm >/dev/null || packages+=(npm)
fi
mapfile -t packages < <(printf '%s\n' "${packages[@]}" | awk '!seen[$0]++')

if [[ $list_only == 1 ]]; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

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

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# What apt would fetch: one line per .deb, 'URI' file size checksum (nothing is downloaded).
uris=$(apt-get install -qq --print-uris --no-install-recommends "${missing[@]}" | grep "^'" || true)
count=$(grep -c . <<<"$uris" || true)
bytes=$(awk '{s += $3} END {printf "%d", s}' <<<"$uris")
echo "install-deps --$purpose: installing ${missing[*]}"
echo "install-deps: $count packages with their dependencies," \
  "$(( (bytes + 524288) / 1048576 )) MB to download"
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
