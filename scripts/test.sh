#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite. GPU tests
# are reported as skipped (never passed) on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
ctest --preset release -j "$(nproc)" --timeout 600
