#!/usr/bin/env bash
# Installs what is missing, builds and runs every test: tools/run-tests.sh [PRESET]
# PRESET is one of release (default), debug, asan, tsan (see CMakePresets.json).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-release}
# ccache hits across checkouts in other folders (CI clones afresh each run).
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1

tools/install-deps.sh --test
# ON: a tree first configured by tools/start-server.sh (no tests) gets them.
cmake --preset "$preset" -DREPRISE_BUILD_TESTS=ON >/dev/null
cmake --build --preset "$preset"
# GoogleTest prints only the failures: a failing binary's whole log (outputOnFailure) is long
# enough that the failure itself was cut from CI's excerpt.
GTEST_BRIEF=1 ctest --preset "$preset"
