#!/usr/bin/env bash
# Configures and builds memwall in ./build (Release; CUDA sources compiled for
# sm_80 and sm_90 whenever nvcc is found).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
