#!/usr/bin/env bash
# The GPU kit's one command (copied to gpu-kit/run.sh by scripts/gpu-kit.sh).
# On a machine with an NVIDIA GPU, beside the repository it came with:
#   gpu-kit/run.sh --out DIR            (at most about 8 minutes)
#   gpu-kit/run.sh --out DIR --emulate  (this flow on a CPU under cuda-emu, small shapes: the dry run)
# It records the GPU (nvidia-smi, clocks, driver), runs every CUDA test of the
# kit (GoogleTest XML), calibrates the GPU, runs every lever's CUDA rungs at
# the shapes of gpu-kit/shapes (memory-bound working sets several times an
# H100/H200's 50-60 MB L2), the claims that need a GPU, a peer column from
# PyTorch when the machine has it, and the HTML page; then packs it all into
# DIR/memwall-gpu-<gpu>.tar.gz (at most 16 MiB) and prints a one-screen summary.
# Exit 0; 1 when a library came from outside the kit or the archive is too
# big; 2 on bad options; 3 when the kit cannot start (no GPU, a missing library).
#
# The binaries travel as gpu-kit/payload.tar.xz (bin/memwall, tests/, lib/),
# unpacked into a temporary folder. Everything they need that such a machine
# lacks is in lib/ (their RPATH is $ORIGIN/../lib). cuBLAS, the CUDA runtime and
# NCCL come from the GPU machine: MEMWALL_CUDA_LIBS (folders, ':'-separated),
# then /usr/local/cuda/lib64, /usr/local/cuda/targets/x86_64-linux/lib, then
# the lib folders of python3's NVIDIA wheels (nvidia/*/lib: PyTorch's cuBLAS
# and NCCL), then the system's own (ldconfig).
set -uo pipefail
KIT=$(cd "$(dirname "$0")" && pwd)
TREE=${MEMWALL_SOURCE_DIR:-$(cd "$KIT/.." && pwd)}   # the repository the kit travels with
OUT="" EMULATE=0 LIMIT=${MEMWALL_KIT_SECONDS:-480}
usage() { echo "usage: gpu-kit/run.sh --out DIR [--emulate]" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --out) [ $# -ge 2 ] || usage; OUT=$2; shift 2 ;;
    --emulate) EMULATE=1; shift ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "gpu-kit/run.sh: unknown option '$1' (valid: --out DIR, --emulate)" >&2; exit 2 ;;
  esac
done
[ -n "$OUT" ] || usage
mkdir -p "$OUT" || { echo "gpu-kit/run.sh: cannot create --out '$OUT'" >&2; exit 2; }
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/memwall-gpu.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
RES=$WORK/results
mkdir -p "$RES/tests"
START=$(date +%s)
export MEMWALL_SOURCE_DIR=$TREE OMP_WAIT_POLICY=passive
BIN=$WORK/kit
mkdir -p "$BIN"
MW=$BIN/bin/memwall
left() { echo $((LIMIT - ($(date +%s) - START))); }
# part NAME SECONDS COMMAND...: runs it under a time limit (never past the kit's
# own), prints and records how long it took and how it ended.
part() {
  local name=$1 secs=$2; shift 2
  local budget; budget=$(left)
  [ "$budget" -lt "$secs" ] && secs=$budget
  if [ "$secs" -le 5 ]; then
    echo "== $name: skipped (the kit's $LIMIT s are spent)"; printf '%s\tskipped\t0\n' "$name" >> "$RES/parts.tsv"; return 0
  fi
  echo "== $name (at most ${secs} s)"
  local t0 rc=0; t0=$(date +%s)
  timeout --kill-after=10 "$secs" "$@" || rc=$?
  local dt=$(($(date +%s) - t0)) how=ok
  [ $rc -ne 0 ] && how="exit $rc"
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && how="stopped after ${secs} s"
  echo "== $name: ${dt} s, $how"
  printf '%s\t%s\t%s\n' "$name" "$how" "$dt" >> "$RES/parts.tsv"
  return 0
}

flow() {
# --- the CUDA libraries of this machine ------------------------------------------
cuda_dirs() {
  local IFS=:
  for d in ${MEMWALL_CUDA_LIBS:-}; do echo "$d"; done
  echo /usr/local/cuda/lib64; echo /usr/local/cuda/lib; echo /usr/local/cuda/targets/x86_64-linux/lib
  command -v python3 >/dev/null && python3 - <<'EOF' 2>/dev/null
import glob, importlib.util, os
spec = importlib.util.find_spec("nvidia")
for root in (spec.submodule_search_locations if spec else []):
    for d in sorted(glob.glob(os.path.join(root, "*", "lib")) + glob.glob(os.path.join(root, "*", "*", "lib"))):
        print(d)
EOF
}
LIBS=""
for lib in libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  for d in $(cuda_dirs); do
    if [ -e "$d/$lib" ]; then
      case ":$LIBS:" in *":$d:"*) ;; *) LIBS=${LIBS:+$LIBS:}$d ;; esac
      break
    fi
  done
done
export LD_LIBRARY_PATH=${LIBS}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "CUDA libraries from: ${LIBS:-the system ones (ldconfig)}"
"$KIT/check_ldd.sh" "$BIN" > "$RES/ldd.txt" 2>&1
LDD=$?
cat "$RES/ldd.txt"
for b in "$BIN"/bin/* "$BIN"/tests/*; do echo "== $(basename "$b")"; ldd "$b"; done >> "$RES/ldd.txt" 2>&1
if ! "$MW" list --json >/dev/null 2>&1; then
  echo "gpu-kit/run.sh: $MW does not start here (ldd.txt says why)" >&2
  return 3
fi

# --- the machine --------------------------------------------------------------------
{
  echo "date: $(date -u +%FT%TZ)"; echo "kernel: $(uname -srm)"; echo "cpus: $(nproc)"
  echo "kit: $(cat "$KIT/kit.txt" 2>/dev/null | tr '\n' ' ')"
  echo "cuda libraries: ${LIBS:-system}"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.limit,temperature.gpu --format=csv
    nvidia-smi -q 2>&1 | head -200
  else
    echo "no nvidia-smi"
  fi
} > "$RES/machine.txt" 2>&1
GPU=0
if [ "$EMULATE" = 0 ] && command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then GPU=1; fi
if [ "$EMULATE" = 0 ] && [ "$GPU" = 0 ]; then
  echo "gpu-kit/run.sh: no GPU answers nvidia-smi here; for the dry run on a CPU pass --emulate" >&2
  return 3
fi
NAME=emulated
[ "$GPU" = 1 ] && NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr 'A-Z' 'a-z' | tr -cs 'a-z0-9' '-' | sed 's/^-//; s/-$//')
BACKEND=cuda
[ "$EMULATE" = 1 ] && BACKEND=cuda-emu
echo "$NAME" > "$WORK/name"
echo "GPU: $NAME; backend $BACKEND; $(left) s left"

# --- the CUDA tests -----------------------------------------------------------------
# The GPU tests (test-filter: Cuda or Gpu in the name, and the Hugging Face
# export loaded by transformers where torch is installed) of every kit test
# executable; under --emulate the same, which must then say SKIPPED. A test
# that runs memwall or reads the tree finds them through MEMWALL_BIN and
# MEMWALL_SOURCE_DIR.
tests() {
  for t in "$BIN"/tests/*; do
    local n; n=$(basename "$t")
    "$t" --gtest_filter="$(cat "$KIT/test-filter")" --gtest_output="xml:$RES/tests/$n.xml" > "$RES/tests/$n.log" 2>&1 ||
      echo "  $n: failures (see tests/$n.log)"
  done
}
export BIN RES KIT
export MEMWALL_BIN="$BIN/bin/memwall" MEMWALL_SOURCE_DIR="$TREE"
part "CUDA tests" 150 bash -c "$(declare -f tests); tests"

# --- ceilings, rungs, claims ------------------------------------------------------
QUICK=()
[ "$EMULATE" = 1 ] && QUICK=(--quick)
part "calibrate" 60 "$MW" calibrate "${QUICK[@]}" --out "$RES/ceilings.json"
SHAPES=()
while read -r op gpu emu _; do
  case $op in ''|\#*) continue ;; esac
  shape=$gpu; [ "$EMULATE" = 1 ] && shape=$emu
  SHAPES+=(--shape "$op:$shape")
done < "$KIT/shapes"
BUDGET=0.2
[ "$EMULATE" = 1 ] && BUDGET=0.01
part "run all levers ($BACKEND)" 200 "$MW" run all --backend "$BACKEND" --budget "$BUDGET" \
  --ceilings "$RES/ceilings.json" "${SHAPES[@]}" --out-dir "$RES"
part "GPU claims (memwall reproduce --kind gpu-only --run-experiments)" 60 \
  sh -c '"$0" reproduce --kind gpu-only --run-experiments --out "$1" > /dev/null' "$MW" "$RES/claims.json"

# --- the peer column: PyTorch's own kernels at our shapes, when the machine has them --
if [ "$GPU" = 1 ] && python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  part "peers (PyTorch)" 60 python3 "$KIT/peers.py" --results "$RES" --out "$RES/peers.json"
else
  echo "== peers: no PyTorch with CUDA here"
fi

# No gnuplot on the GPU machine: the page without plots; --import draws them.
part "report (memwall report --html --no-plots)" 60 "$MW" report "$RES" --html --no-plots

# --- the archive and the summary ----------------------------------------------------
python3 "$KIT/summary.py" "$RES"
[ "$LDD" = 0 ] || echo "ldd: the kit loads a library from outside itself (ldd.txt)"
return "$LDD"
}

main() {
  echo "kit: gpu-kit/ of $(head -1 "$KIT/kit.txt" 2>/dev/null)"
  # tar's xz, else python3's lzma (a minimal image may lack the xz program)
  tar -xJf "$KIT/payload.tar.xz" -C "$BIN" 2>/dev/null ||
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' "$KIT/payload.tar.xz" "$BIN" ||
    { echo "gpu-kit/run.sh: cannot unpack gpu-kit/payload.tar.xz" >&2; return 3; }
  flow
}
main 2>&1 | tee "$RES/kit.raw"
RC=${PIPESTATUS[0]}
# No path of this machine in what travels back: the kit's temporary folder and
# the repository's place become <kit> and <tree>.
for f in "$RES"/kit.raw "$RES"/*.txt "$RES"/tests/*.log; do
  [ -f "$f" ] && sed -i "s|$BIN|<kit>|g; s|$WORK|<work>|g; s|$TREE|<tree>|g" "$f"
done
mv "$RES/kit.raw" "$RES/kit.log"
sed -n '/^== summary/,$p' "$RES/kit.log" > "$RES/summary.txt"
ARCHIVE=$OUT/memwall-gpu-$(cat "$WORK/name" 2>/dev/null || echo unknown).tar.gz
tar -czf "$ARCHIVE.tmp" -C "$RES" . && mv "$ARCHIVE.tmp" "$ARCHIVE"
SIZE=$(stat -c %s "$ARCHIVE")
NOW=$(date +%s)
echo "archive: $ARCHIVE ($((SIZE / 1024)) KiB, $((NOW - START)) s in all)"
if [ "$SIZE" -gt $((16 * 1024 * 1024)) ]; then
  echo "gpu-kit/run.sh: the archive is over 16 MiB" >&2
  exit 1
fi
exit "$RC"
