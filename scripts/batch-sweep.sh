#!/usr/bin/env bash
# Batch sweep of the precision lever's GEMV (decode at batch B): measured
# GFLOP/s of fp32, bf16, int8 and int4 weights for B = 1..256, against the
# roofline the decode-intensity formula predicts,
#   I(B) = 2 P B / (P b_param + B (n_in + n_out) 4)      (P = n_out * n_in)
# The seeds' formula has B d_model b_elem for the activations; a GEMV also
# writes its output, so both x (n_in) and y (n_out) fp32 rows are counted.
# The plot marks where each format's I(B) crosses the ridge peak / bandwidth.
#
# Every call runs cold (caches evicted before it, as in a decode step where
# the other layers' weights have pushed this one out): at N = 18432 the fp32
# weights are 1.27 GiB, over 4x a 300 MiB L3, and without eviction the
# int4 weights (~0.18 GiB) would be served from that L3 instead of DRAM.
#
# usage: scripts/batch-sweep.sh [BUILD_DIR] [OUT_DIR] [CEILINGS_JSON]
#   CEILINGS_JSON: from `memwall calibrate --out` (default
#        results/<machine>/ceilings.json is not guessed: without it, BW_GBS
#        and PEAK_GFLOPS must be set); its read-only DRAM bandwidth
#        (dram_read_gbps; the triad's dram_gbps in files that predate it: a
#        GEMV reads W and writes a vector) and all-thread fp32 peak draw the roof.
#   env: N (n_out = n_in, default 18432), THREADS (default 2),
#        BW_GBS, PEAK_GFLOPS (override the ceilings file),
#        BATCHES (default "1 2 4 8 16 32 64 128 256"), BUDGET (s per variant, default 1)
set -euo pipefail
build=${1:-build}
out=${2:-results/batch-sweep}
ceilings=${3:-}
N=${N:-18432}
THREADS=${THREADS:-2}
BATCHES=${BATCHES:-"1 2 4 8 16 32 64 128 256"}
BUDGET=${BUDGET:-1}
if [[ -n "$ceilings" ]]; then
  [[ -f "$ceilings" ]] || { echo "batch-sweep: ceilings file '$ceilings' not found" >&2; exit 2; }
  read -r cbw cpeak < <(python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))["ceilings"]
peak = max(p["gflops"] for p in c["peaks"] if p["dtype"] == "fp32")
print(c.get("dram_read_gbps", c["dram_gbps"]), peak)' "$ceilings")
  BW=${BW_GBS:-$cbw}
  PEAK=${PEAK_GFLOPS:-$cpeak}
  ceil_args=(--ceilings "$ceilings")
else
  [[ -n "${BW_GBS:-}" && -n "${PEAK_GFLOPS:-}" ]] || {
    echo "batch-sweep: give a ceilings JSON (memwall calibrate --out FILE) or set BW_GBS and PEAK_GFLOPS" >&2; exit 2; }
  BW=$BW_GBS
  PEAK=$PEAK_GFLOPS
  ceil_args=()
fi
mkdir -p "$out"
shapes=()
for b in $BATCHES; do shapes+=(--shape "n_out=$N,n_in=$N,b=$b"); done
"$build/memwall" run gemv_q --skip-naive --cold --budget "$BUDGET" "${ceil_args[@]}" --threads "$THREADS" --variant fp32 --variant bf16 --variant int8_channel \
  --variant int4_g64_sym --variant fp32_repacked --variant bf16_dot_repacked --variant int8_dot_repacked \
  --variant int4_g64_sym_dot_repacked "${shapes[@]}" --out "$out/gemv_q_sweep.json"

# variant, b, gflops from the CSV the run wrote next to the JSON (the quoted
# shape "b=..,n_in=..,n_out=.." spans three comma-separated fields: gflops is $20).
awk -F, 'NR > 1 && $3 != "naive" {
  match($0, /b=[0-9]+/); b = substr($0, RSTART + 2, RLENGTH - 2);
  print $3, b, $20 }' "$out/gemv_q_sweep.csv" > "$out/measured.dat"

# bytes per weight of each format (payload + metadata), for the formula.
cat > "$out/sweep.gp" <<GP
set terminal pngcairo size 1000,650
set output '$out/batch-sweep.png'
set logscale xy 2
set xlabel 'batch B'
set ylabel 'GFLOP/s'
set title sprintf('gemv\\_q n=%d, %d threads, cold: measured vs min(peak, I(B) x BW), BW=%.1f GB/s, peak=%.0f GFLOP/s', $N, $THREADS, $BW, $PEAK)
set key left top
P = $N.0 * $N.0
d = 2.0 * $N
I(B, bp) = 2 * P * B / (P * bp + B * d * 4)
roof(B, bp) = (I(B, bp) * $BW < $PEAK) ? I(B, bp) * $BW : $PEAK
R = $PEAK / $BW
cross(bp) = R * P * bp / (2 * P - R * d * 4)
set arrow from cross(4), graph 0 to cross(4), graph 1 nohead dt 2 lc 1
set arrow from cross(2), graph 0 to cross(2), graph 1 nohead dt 2 lc 2
set arrow from cross(1.0005), graph 0 to cross(1.0005), graph 1 nohead dt 2 lc 3
set arrow from cross(0.53125), graph 0 to cross(0.53125), graph 1 nohead dt 2 lc 4
set label sprintf('fp32 ridge B=%.1f', cross(4)) at cross(4), graph 0.05 rotate by 90 offset -1,0
set label sprintf('int4 ridge B=%.1f', cross(0.53125)) at cross(0.53125), graph 0.05 rotate by 90 offset -1,0
set xrange [1:256]
plot roof(x, 4) w l lc 1 t 'fp32 formula', roof(x, 2) w l lc 2 t 'bf16 formula', \
     roof(x, 1.0005) w l lc 3 t 'int8 formula', roof(x, 0.53125) w l lc 4 t 'int4 g64 formula', \
     '< grep "^fp32 " $out/measured.dat' u 2:3 w lp lc 1 pt 7 t 'fp32 measured', \
     '< grep "^bf16 " $out/measured.dat' u 2:3 w lp lc 2 pt 7 t 'bf16 measured', \
     '< grep "^int8_channel " $out/measured.dat' u 2:3 w lp lc 3 pt 7 t 'int8 measured', \
     '< grep "^int4_g64_sym " $out/measured.dat' u 2:3 w lp lc 4 pt 7 t 'int4 g64 measured', \
     '< grep "^fp32_repacked " $out/measured.dat' u 2:3 w lp lc 1 dt 2 pt 5 t 'fp32 repacked (rung 6)', \
     '< grep "^bf16_dot_repacked " $out/measured.dat' u 2:3 w lp lc 2 dt 2 pt 5 t 'bf16 dot repacked (rung 6)', \
     '< grep "^int8_dot_repacked " $out/measured.dat' u 2:3 w lp lc 3 dt 2 pt 5 t 'int8 dot repacked (rung 6)', \
     '< grep "^int4_g64_sym_dot_repacked " $out/measured.dat' u 2:3 w lp lc 4 dt 2 pt 5 t 'int4 g64 dot repacked (rung 6)'
GP
gnuplot "$out/sweep.gp"
awk -v bw="$BW" -v peak="$PEAK" -v n="$N" 'BEGIN { P = n * n; R = peak / bw; d = 2 * n;
  split("fp32 4 bf16 2 int8 1.0005 int4_g64 0.53125", f, " ");
  for (i = 1; i < 8; i += 2) printf "%-9s crosses the ridge (%.1f FLOP/B) at B = %.1f\n", f[i], R, R * P * f[i+1] / (2 * P - R * d * 4) }'
echo "plot: $out/batch-sweep.png   data: $out/measured.dat, $out/gemv_q_sweep.json"
