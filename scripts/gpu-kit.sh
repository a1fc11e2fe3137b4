#!/usr/bin/env bash
# Builds the GPU kit: gpu-kit/ (ignored), everything a borrowed GPU machine
# needs to record the project's CUDA half with one command, gpu-kit/run.sh.
#   scripts/gpu-kit.sh             build (./scripts/build.sh: CUDA for sm_80 and sm_90) and pack gpu-kit/
#   scripts/gpu-kit.sh --dry-run   the same, then run gpu-kit/run.sh --emulate here, under cuda-emu at
#                                  small shapes, in a view where the libraries the kit must carry are
#                                  hidden (bubblewrap), and check the archive it makes
#   --no-build                     pack from the build that is there (tests; a build just made)
#   --fast                         pack with xz's preset 1 (tests: the xz step 22 s instead of 180 on 2 cores, ~12% bigger)
#   --out DIR                      where the dry run leaves its archive (default: a temporary folder)
#   --kit DIR                      pack the kit there instead of gpu-kit/ (tests)
#   scripts/gpu-kit.sh --import ARCHIVE
#                                  bring a GPU run home: unpack memwall-gpu-<gpu>.tar.gz into
#                                  results/<gpu>/ and re-render its page (memwall report --html)
# The kit: payload.tar.xz with bin/memwall and tests/ (each test executable
# with GPU suites), stripped, RPATH $ORIGIN/../lib, and lib/ with every
# library they load that the GPU machine lacks (OpenBLAS, gfortran, OpenMP,
# Google Benchmark, Open MPI, ...); run.sh (which unpacks it), the checks,
# peers.py, summary.py and the shapes from scripts/gpu-kit/.
# Not packed, found on the GPU machine (run.sh says where it looks): the C and
# C++ runtime, the CUDA driver, libcudart, cuBLAS(Lt) and NCCL. The trained
# model and the claims are read from the repository the kit travels with.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
DRY=0 BUILD=1 FAST=0 DRY_OUT="" IMPORT="" KIT_ARG=""
while [ $# -gt 0 ]; do
  case $1 in
    --import) [ $# -ge 2 ] || { echo "scripts/gpu-kit.sh: --import needs an archive" >&2; exit 2; }; IMPORT=$2; shift 2 ;;
    --dry-run) DRY=1; shift ;;
    --no-build) BUILD=0; shift ;;
    --fast) FAST=1; shift ;;
    --out) [ $# -ge 2 ] || { echo "scripts/gpu-kit.sh: --out needs a folder" >&2; exit 2; }; DRY_OUT=$2; shift 2 ;;
    --kit) [ $# -ge 2 ] || { echo "scripts/gpu-kit.sh: --kit needs a folder" >&2; exit 2; }; KIT_ARG=$2; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "scripts/gpu-kit.sh: unknown option '$1' (valid: --dry-run, --no-build, --fast, --out DIR, --kit DIR, --import ARCHIVE)" >&2; exit 2 ;;
  esac
done

# --- bringing a GPU run home --------------------------------------------------------------
if [ -n "$IMPORT" ]; then
  [ -f "$IMPORT" ] || { echo "scripts/gpu-kit.sh: --import '$IMPORT' is not a file" >&2; exit 2; }
  python3 scripts/gpu-kit/check_archive.py "$IMPORT" || { echo "scripts/gpu-kit.sh: not importing '$IMPORT'" >&2; exit 1; }
  name=$(basename "$IMPORT" .tar.gz); name=${name#memwall-gpu-}
  [[ $name =~ ^[a-z0-9][a-z0-9-]*$ ]] || { echo "scripts/gpu-kit.sh: cannot tell the GPU's name from '$IMPORT' (want memwall-gpu-<name>.tar.gz)" >&2; exit 2; }
  DEST=results/$name
  [ -e "$DEST" ] && { echo "scripts/gpu-kit.sh: $DEST exists; move it away first" >&2; exit 2; }
  mkdir -p "$DEST.tmp"
  tar -xzf "$IMPORT" -C "$DEST.tmp" --no-same-owner
  mv "$DEST.tmp" "$DEST"
  ./build/memwall report "$DEST" --html   # with the plots the GPU machine could not draw
  cat "$DEST/summary.txt"
  echo "imported into $DEST/ (open $DEST/index.html)"
  exit 0
fi
BUILD_DIR=$ROOT/build
KIT=$ROOT/gpu-kit
if [ -n "$KIT_ARG" ]; then mkdir -p "$(dirname "$KIT_ARG")" && KIT=$(cd "$(dirname "$KIT_ARG")" && pwd)/$(basename "$KIT_ARG"); fi
T0=$(date +%s)

if [ "$BUILD" = 1 ]; then
  ./scripts/install-deps.sh --kit
  ./scripts/build.sh
fi
for tool in patchelf strip ldd; do
  command -v "$tool" >/dev/null || { echo "scripts/gpu-kit.sh: '$tool' is missing (scripts/install-deps.sh --kit installs it)" >&2; exit 2; }
done
[ -x "$BUILD_DIR/memwall" ] || { echo "scripts/gpu-kit.sh: no $BUILD_DIR/memwall: build first (scripts/build.sh)" >&2; exit 2; }
if ! "$BUILD_DIR/memwall" list --json | python3 -c 'import json, sys; sys.exit(not any(v["backend"] == "cuda" for v in json.load(sys.stdin)))'; then
  echo "scripts/gpu-kit.sh: $BUILD_DIR was built without the CUDA backend (no nvcc?): the kit needs it" >&2
  exit 2
fi

# The libraries a GPU machine brings itself (the C/C++ runtime, zlib, CUDA's):
# everything else a binary loads is packed.
PROVIDED=$(scripts/gpu-kit/check_ldd.sh --provided)

# Which test executables hold GPU tests: scripts/gpu-kit/test-filter (Cuda or
# Gpu in the name; not the emulator's, not those that check a machine without one).
FILTER=$(cat scripts/gpu-kit/test-filter)
gpu_tests() {
  find "$BUILD_DIR/tests" -type f -name 'test_*' -perm -u+x ! -name '*_asan' ! -name '*.*' | sort | while read -r t; do
    # the whole listing first: grep -q would end the pipe early (and pipefail fail it)
    list=$("$t" --gtest_list_tests --gtest_filter="$FILTER" 2>/dev/null || true)
    if grep -q '^  ' <<< "$list"; then echo "$t"; fi
  done
}

echo "== packing $KIT"
rm -rf "$KIT.tmp"
P=$KIT.tmp/payload
mkdir -p "$P/bin" "$P/tests" "$P/lib"
cp "$BUILD_DIR/memwall" "$P/bin/"
for t in $(gpu_tests); do cp "$t" "$P/tests/"; done
cp scripts/gpu-kit/run.sh scripts/gpu-kit/peers.py scripts/gpu-kit/summary.py scripts/gpu-kit/check_archive.py \
   scripts/gpu-kit/check_ldd.sh scripts/gpu-kit/shapes scripts/gpu-kit/test-filter "$KIT.tmp/"
chmod +x "$KIT.tmp/run.sh" "$KIT.tmp/check_ldd.sh"
BINS=("$P/bin/memwall" "$P"/tests/*)
# Libraries to pack: what ldd resolves for the built binaries, less what the GPU machine brings.
ldd "${BINS[@]}" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u |
  while read -r name path; do
    if ! [[ $name =~ $PROVIDED ]]; then cp -L "$path" "$P/lib/$name"; fi
  done
# Debug sections only: cuda-emu reads the symbol table (the dry run's kernels),
# the file symbols included: they tell it which object's copy of a kernel's
# static __shared__ arrays is the kernel's own (without them it refuses).
for b in "${BINS[@]}" "$P"/lib/*; do strip --strip-debug --keep-file-symbols "$b"; done
# DT_RPATH (--force-rpath), not DT_RUNPATH: it also serves the packed
# libraries' own dependencies (OpenBLAS -> gfortran -> quadmath).
for b in "${BINS[@]}"; do patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$b"; done
for l in "$P"/lib/*; do patchelf --force-rpath --set-rpath '$ORIGIN' "$l"; done
{
  echo "memwall GPU kit of $(git rev-parse --short HEAD 2>/dev/null || echo 'an unknown commit')$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)'), built $(date -u +%FT%TZ)"
  echo "CUDA architectures: $(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$BUILD_DIR/CMakeCache.txt")"
  nvcc=$(sed -n 's/^set(CMAKE_CUDA_COMPILER "\(.*\)")$/\1/p' "$BUILD_DIR"/CMakeFiles/*/CMakeCUDACompiler.cmake | head -1)
  echo "nvcc: $("${nvcc:-nvcc}" --version 2>/dev/null | grep -o 'release [0-9.]*' || echo unknown)"
  echo "tests: $(cd "$P/tests" && ls | tr '\n' ' ')"
  echo "packed libraries: $(cd "$P/lib" && ls | tr '\n' ' ')"
  echo "payload: $(du -sh "$P" | cut -f1) unpacked"
} > "$KIT.tmp/kit.txt"
# One xz stream with a dictionary larger than a binary: the test executables
# share most of their bytes (every kernel and its sm_80/sm_90 code), which
# it stores once: about 21 MB packed (kit.txt, `du` of gpu-kit/).
# --fast: preset 1 with the same dictionary, 10 times quicker, a little bigger.
PRESET=9
[ "$FAST" = 1 ] && PRESET=1
tar -cf - -C "$P" bin tests lib | xz -T "$(nproc)" --lzma2=preset=$PRESET,dict=192MiB > "$KIT.tmp/payload.tar.xz"
rm -rf "$P"
rm -rf "$KIT"
mv "$KIT.tmp" "$KIT"
echo "kit: $(du -sh "$KIT" | cut -f1) in $KIT: $(sed -n 's/^tests: //p' "$KIT/kit.txt" | wc -w) test executables, $(sed -n 's/^packed libraries: //p' "$KIT/kit.txt" | wc -w) packed libraries, $(($(date +%s) - T0)) s"

# The tree and the kit travel together to a machine that takes 64 MiB (67.1 MB):
# at most 56 MB, 11 MB to spare (the GPU decoder's kernels, in sm_80 and
# sm_90 code in every binary, took the kit from 16 to 21 MB).
TREE_BYTES=$(git ls-files -z 2>/dev/null | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
KIT_BYTES=$(du -sb "$KIT" | cut -f1)
echo "tree ${TREE_BYTES:-0} B + kit $KIT_BYTES B = $(( (${TREE_BYTES:-0} + KIT_BYTES) / 1000000 )) MB (at most 56)"
if [ $(( ${TREE_BYTES:-0} + KIT_BYTES )) -gt 56000000 ]; then
  echo "scripts/gpu-kit.sh: the tree and the kit are over 56 MB together" >&2
  exit 1
fi

[ "$DRY" = 1 ] || exit 0

# --- the dry run ----------------------------------------------------------------------
# A view of this machine without what the kit must not need: every library
# the built binaries load from the system that the GPU machine lacks is
# replaced by an empty file, and gnuplot, mpirun and the build folder are out
# of sight. The kit must still run.
command -v bwrap >/dev/null || { echo "scripts/gpu-kit.sh: the dry run needs bubblewrap (bwrap)" >&2; exit 2; }
OUT=${DRY_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/memwall-kit-dry.XXXXXX")}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
HIDE=()
while read -r name path; do
  [[ $name =~ $PROVIDED ]] && continue
  for p in "$path" "$(readlink -f "$path")"; do HIDE+=(--ro-bind /dev/null "$p"); done
done < <(ldd "$BUILD_DIR/memwall" $(gpu_tests) | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u)
for tool in gnuplot mpirun mpiexec orterun; do
  p=$(command -v "$tool" || true)
  [ -n "$p" ] && HIDE+=(--ro-bind /dev/null "$(readlink -f "$p")")
done
HIDE+=(--tmpfs "$BUILD_DIR")
echo "== dry run: gpu-kit/run.sh --emulate in a view with $((${#HIDE[@]} / 3)) paths hidden"
T1=$(date +%s)
# NCCL is the GPU machine's: there python3's nvidia package holds it, here
# .deps/nccl (scripts/install-deps.sh --nccl); run.sh finds it through python3.
bwrap --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --ro-bind "$KIT" "$KIT" --bind "$OUT" "$OUT" "${HIDE[@]}" \
  --setenv MEMWALL_KIT_SECONDS 280 --setenv MEMWALL_SOURCE_DIR "$ROOT" \
  --setenv PYTHONPATH "$ROOT/.deps/nccl${PYTHONPATH:+:$PYTHONPATH}" -- "$KIT/run.sh" --emulate --out "$OUT"
ARCHIVE=$OUT/memwall-gpu-emulated.tar.gz
[ -f "$ARCHIVE" ] || { echo "scripts/gpu-kit.sh: the dry run left no archive in $OUT" >&2; exit 1; }
python3 scripts/gpu-kit/check_archive.py "$ARCHIVE" --tests "$(sed -n 's/^tests: //p' "$KIT/kit.txt")"
echo "dry run: $(($(date +%s) - T1)) s (kit and dry run: $(($(date +%s) - T0)) s); archive $ARCHIVE"
