#!/usr/bin/env bash
# The main job: calibrate this machine, run the vectorization lever on the CPU,
# and write results JSON + markdown + CSV + roofline and speedup plots.
#   OUT=results/mine ./scripts/main-job.sh     (default: results/local-<host>)
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
OUT=${OUT:-results/local-$(hostname -s)}
mkdir -p "$OUT"
MW=./build/memwall
$MW calibrate --out "$OUT/ceilings.json"
$MW run vectorization --backend cpu --threads "$(nproc)" --ceilings "$OUT/ceilings.json" \
    --out "$OUT/vectorization-cpu.json"
$MW plot "$OUT/vectorization-cpu.json" --out-dir "$OUT"
echo
echo "Results are in $OUT/:"
ls -1 "$OUT" | sed 's/^/  /'
echo "Summary: $OUT/vectorization-cpu.md"
