#!/usr/bin/env bash
# Installs the Debian packages memwall builds with, if any are missing.
# The CUDA toolkit is optional: when nvcc is in /usr/local/cuda or on PATH the
# CUDA backend is compiled too (it runs only where a GPU is present).
# `fortunes` is data, not code: the English text the model stack is trained
# on (reference/model/corpus.hpp). Open MPI (openmpi-bin, libopenmpi-dev) runs
# the MoE lever's expert_parallel rung under `mpirun`; the build works without it.
# NCCL, for the MoE lever's GPU expert_parallel_nccl rung, has no Debian
# package: its header and library come from PyPI's nvidia-nccl-cu13 wheel,
# installed with Debian's pip (python3-pip) into .deps/nccl of this checkout
# (`pip install --target`: Debian's Python is externally managed, and this
# leaves it alone), where CMake looks for it. Optional: without it, or
# without network, the rung is not built and everything else is.
# `--browser` adds Debian's chromium, which the test of `memwall report --html`
# loads the page in (headless); scripts/test.sh (and so CI) asks for it, the
# main job does not need it.
set -euo pipefail

PACKAGES=(g++ cmake ninja-build git libgtest-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev
          libopenblas-dev libboost-context-dev gnuplot-nox python3 bubblewrap fortunes
          openmpi-bin libopenmpi-dev python3-pip)
for arg in "$@"; do
  case "$arg" in
    --browser) PACKAGES+=(chromium) ;;
    *) echo "install-deps.sh: unknown option '$arg'; valid: --browser" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing missing packages: ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    SUDO="sudo"
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# NCCL from PyPI (see above), once per checkout, and only where the CUDA
# backend is built (nvcc present): the rung that needs it is a GPU rung.
nccl_dir="$(cd "$(dirname "$0")/.." && pwd)/.deps/nccl"
if { [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc >/dev/null; } &&
   [ ! -f "$nccl_dir/nvidia/nccl/include/nccl.h" ]; then
  echo "installing PyPI's nvidia-nccl-cu13 into .deps/nccl"
  /usr/bin/python3 -m pip install --quiet --no-deps --disable-pip-version-check --root-user-action=ignore --target "$nccl_dir" nvidia-nccl-cu13 ||
    echo "install-deps.sh: could not install nvidia-nccl-cu13 (no network?); the expert_parallel_nccl rung will not be built" >&2
fi
