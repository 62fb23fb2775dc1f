#!/usr/bin/env bash
# Installs what is missing, builds the release preset and starts reprise-server on the shipped
# example model repository (tools/models/repository) with config/reprise.yaml:
#   tools/start-server.sh [reprise-server flags...]     e.g. --grpc-port 9001
# Extra arguments go to reprise-server (they override the config; see config/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."

# Each stream runs one request on one thread; oneDNN's OpenMP pool (one thread per core by
# default) only competes with the other streams and raises the tail latency many times over
# (measured in the daemon issue's closing note). Set OMP_NUM_THREADS yourself to override.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
# ccache hits across checkouts in other folders (as tools/run-tests.sh).
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1

tools/install-deps.sh --serve
# A first configure builds no tests (REPRISE_BUILD_TESTS=OFF: no GoogleTest needed); a build
# tree that tools/run-tests.sh configured keeps its tests.
if [[ -f build/release/CMakeCache.txt ]]; then
  cmake --preset release >/dev/null
else
  cmake --preset release -DREPRISE_BUILD_TESTS=OFF >/dev/null
fi
cmake --build --preset release --target reprise-server reprise
exec build/release/server/reprise-server --config config/reprise.yaml \
  --model-repository tools/models/repository "$@"
