#!/usr/bin/env bash
# Installs the Debian packages memwall builds with, if any are missing.
# The CUDA toolkit is optional: when nvcc is in /usr/local/cuda or on PATH the
# CUDA backend is compiled too (it runs only where a GPU is present).
# `fortunes` is data, not code: the English text the model stack is trained
# on (model/corpus.hpp). Open MPI (openmpi-bin, libopenmpi-dev) runs
# the MoE lever's expert_parallel rung under `mpirun`; the build works without it.
# oneDNN (libdnnl-dev) is the CPU's second vendor library (its rungs are
# loaded at run time, harness/onednn.hpp); ocl-icd-opencl-dev because
# Debian's dnnl-config.cmake asks for OpenCL's headers and loader.
# `--browser` adds Debian's chromium, which the test of `memwall report --html`
# loads the page in (headless); scripts/test.sh (and so CI) asks for it, the
# main job does not need it.
# `--notebooks` adds what executes the C++ notebooks in a Jupyter kernel: see
# the block marked "notebooks" below.
# `--nccl` adds NCCL, for the MoE lever's GPU expert_parallel_nccl rung. It
# has no Debian package: its header and library come from PyPI's
# nvidia-nccl-cu13 wheel (about 345 MB), installed with Debian's pip
# (python3-pip) into .deps/nccl of this checkout (`pip install --target`:
# Debian's Python is externally managed, and this leaves it alone), where
# CMake looks for it; only where nvcc is present, since the rung is a GPU
# rung. Optional: without it the rung is not built and everything else is.
# scripts/test.sh (CI compiles the rung) and, on a GPU machine, the main job
# ask for it.
# `--kit` adds patchelf, which scripts/gpu-kit.sh points the GPU kit's
# binaries at the libraries packed beside them with; scripts/test.sh (the
# kit's dry-run test) asks for it.
set -euo pipefail
NOTEBOOKS=0
NCCL=0

PACKAGES=(g++ cmake ninja-build git libgtest-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev
          libopenblas-dev libboost-context-dev gnuplot-nox python3 bubblewrap fortunes
          openmpi-bin libopenmpi-dev libseccomp-dev pkg-config libssl-dev zip unzip
          libdnnl-dev ocl-icd-opencl-dev)
for arg in "$@"; do
  case "$arg" in
    --browser) PACKAGES+=(chromium) ;;
    --notebooks) NOTEBOOKS=1; PACKAGES+=(clang-tools-19 python3-venv) ;;
    --nccl) NCCL=1; PACKAGES+=(python3-pip) ;;
    --kit) PACKAGES+=(patchelf) ;;
    *) echo "install-deps.sh: unknown option '$arg'; valid: --browser, --notebooks, --nccl, --kit" >&2; exit 2 ;;
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

# --- notebooks (--notebooks) -------------------------------------------------
# The C++ notebooks (notebooks-cpp/) run in the `clang_repl` Jupyter kernel:
# PyPI's clang-repl 1.0.4 (a kernel over the clang-repl prompt) with Debian's
# clang-repl-19 (clang-tools-19), executed by jupyter nbconvert. Debian's
# python is externally managed, so the PyPI packages go into a virtual
# environment, .venv-notebooks/ in the repository root (MEMWALL_NB_VENV
# overrides); tests/lessons/CMakeLists.txt finds the kernel there.
if [ "$NOTEBOOKS" = 1 ]; then
  NB_VENV="${MEMWALL_NB_VENV:-$(cd "$(dirname "$0")/.." && pwd)/.venv-notebooks}"
  NB_PIP=(clang-repl==1.0.4 nbconvert)   # clang-repl brings notebook 7, so JupyterLab too
  if [ ! -f "$NB_VENV/share/jupyter/kernels/clang_repl/kernel.json" ] || [ ! -x "$NB_VENV/bin/jupyter-nbconvert" ]; then
    echo "installing the notebook kernel into $NB_VENV: ${NB_PIP[*]}"
    /usr/bin/python3 -m venv "$NB_VENV"
    "$NB_VENV/bin/pip" install -q "${NB_PIP[@]}"
  fi
fi
# --- end notebooks -----------------------------------------------------------

# --- NCCL (--nccl) -----------------------------------------------------------
# Once per checkout, and only where the CUDA backend is built (nvcc present).
nccl_dir="$(cd "$(dirname "$0")/.." && pwd)/.deps/nccl"
if [ "$NCCL" = 1 ] && { [ -x /usr/local/cuda/bin/nvcc ] || command -v nvcc >/dev/null; } &&
   [ ! -f "$nccl_dir/nvidia/nccl/include/nccl.h" ]; then
  echo "installing PyPI's nvidia-nccl-cu13 into .deps/nccl"
  /usr/bin/python3 -m pip install --quiet --no-deps --disable-pip-version-check --root-user-action=ignore --target "$nccl_dir" nvidia-nccl-cu13 ||
    echo "install-deps.sh: could not install nvidia-nccl-cu13 (no network?); the expert_parallel_nccl rung will not be built" >&2
fi
# --- end NCCL ----------------------------------------------------------------
