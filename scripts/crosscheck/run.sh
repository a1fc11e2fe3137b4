#!/usr/bin/env bash
# Cross-checks `memwall calibrate` against the plainest possible programs: a
# STREAM-style triad (3 x 512 MiB, 24 bytes per element, best of 10) and an
# FMA loop left to the compiler's vectorizer (-march=native), on 1 and all
# threads. The two sets of numbers should agree within a few percent on a
# quiet machine.
set -euo pipefail
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -O3 -march=native -fopenmp stream_plain.c -o "$tmp/stream_plain"
gcc -O3 -march=native -mprefer-vector-width=512 -fopenmp fma_plain.c -o "$tmp/fma_plain"
for t in 1 "$(nproc)"; do
  OMP_NUM_THREADS=$t "$tmp/stream_plain"
  OMP_NUM_THREADS=$t "$tmp/fma_plain"
done
echo "memwall calibrate (same machine):"
"${MEMWALL:-../../build/memwall}" calibrate --quick | grep -E "thread"
