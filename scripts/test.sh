#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite. GPU tests
# are reported as skipped (never passed) on a machine without a GPU.
# Chromium is installed too, for the headless-browser test of the HTML report,
# and the clang_repl Jupyter kernel the notebook tests execute the notebooks in.
# The emulated CUDA kernels' tests run under AddressSanitizer (ctest names
# asan:<test>; tests/CMakeLists.txt, memwall_asan_twin), which turns an
# out-of-bounds global or shared access into a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh --browser --notebooks --nccl --kit   # chromium: the HTML report's headless test; the notebooks' Jupyter kernel; NCCL for the GPU MoE rung (compiled, run only on GPUs); patchelf for the GPU kit's dry-run test
./scripts/build.sh
ctest --preset release -j "$(nproc)" --timeout 600
