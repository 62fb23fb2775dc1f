#!/usr/bin/env bash
# Installs what is missing, builds the release preset and starts reprise-server on the shipped
# example model repository (tools/models/repository) with config/reprise.yaml:
#   tools/start-server.sh [reprise-server flags...]     e.g. --grpc-port 9001
# Extra arguments go to reprise-server (they override the config; see config/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target reprise-server reprise
exec build/release/server/reprise-server --config config/reprise.yaml \
  --model-repository tools/models/repository "$@"
