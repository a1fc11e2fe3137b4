#!/usr/bin/env bash
# The checkpointing lever's memory-time curve: train_step's every_k rung for
# every segment length k = 1..L at the default stack (L = 16), each point's
# measured peak memory (beyond the problem's buffers) against its best step
# time over store_all's best in the same group (store_all, the reference,
# runs at every k too: a shared host's speed drifts between groups, a ratio
# within one group does not), beside the formula's curve: memory =
# (ceil(L/k) - 1) X + (k - 1) X + k R + 2 X + S (the rung's memory_model),
# time ratio = the rung's executed FLOPs / store_all's (every block outside
# the last segment forwarded twice).
#
# usage: scripts/checkpoint-sweep.sh [BUILD_DIR] [OUT_DIR] [CEILINGS_JSON]
#   env: LAYERS (default 16), THREADS (default 2), BUDGET (s per variant, default 2),
#        PLOT_ONLY=1 (re-plot OUT_DIR/checkpoint_sweep.json without running)
set -euo pipefail
build=${1:-build}
out=${2:-results/checkpoint-sweep}
ceilings=${3:-}
LAYERS=${LAYERS:-16}
THREADS=${THREADS:-2}
BUDGET=${BUDGET:-2}
[[ "$LAYERS" =~ ^[1-9][0-9]*$ ]] || { echo "checkpoint-sweep: LAYERS='$LAYERS' must be a positive whole number" >&2; exit 2; }
ceil_args=()
if [[ -n "$ceilings" ]]; then
  [[ -f "$ceilings" ]] || { echo "checkpoint-sweep: ceilings file '$ceilings' not found" >&2; exit 2; }
  ceil_args=(--ceilings "$ceilings")
fi
mkdir -p "$out"
shapes=()
for k in $(seq 1 "$LAYERS"); do shapes+=(--shape "layers=$LAYERS,every=$k"); done
[[ "${PLOT_ONLY:-0}" == 1 ]] || "$build/memwall" run train_step --variant every_k --budget "$BUDGET" --threads "$THREADS" "${ceil_args[@]}" \
  "${shapes[@]}" --out "$out/checkpoint_sweep.json"

# k, measured peak MiB, time / store_all's, model MiB, formula time ratio, store_all ms and MiB (same group)
python3 - "$out/checkpoint_sweep.json" > "$out/sweep.dat" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
groups = {}
for r in doc["runs"]:
    groups.setdefault(r["shape_str"], {})[r["variant"]] = r
print("# k peak_MiB time_vs_store_all model_MiB formula_ratio store_all_ms store_all_peak_MiB")
for g in sorted(groups.values(), key=lambda g: g["every_k"]["shape"]["every"]):
    e, s = g["every_k"], g["store_all"]
    if not (e["correct"] and s["correct"]):
        sys.exit("checkpoint-sweep: an incorrect run at " + e["shape_str"] + ": " + e.get("check_message", ""))
    t_s = s["time_s"]["best"]
    print(e["shape"]["every"], e["peak_extra_bytes"] / 2**20, e["time_s"]["best"] / t_s,
          e["memory_model"]["total"] / 2**20, e["executed_flops"] / s["executed_flops"], t_s * 1e3,
          s["peak_extra_bytes"] / 2**20)
PY

cpu=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["machine"]["cpu_model"])' "$out/checkpoint_sweep.json" 2>/dev/null || echo "this CPU")
cat > "$out/sweep.gp" <<GP
set terminal svg size 900,600 dynamic font 'sans,12'
set output '$out/checkpoint-sweep.svg'
set xlabel "step time / store_all's (best of each, same group)" noenhanced
set ylabel 'peak memory beyond inputs and outputs (MiB)'
set title "train\\\\_step every\\\\_k, L = $LAYERS, k = 1..$LAYERS: measured vs formula ($cpu, $THREADS threads)" noenhanced
set key right top
set grid
plot '$out/sweep.dat' u 5:4 w l lw 2 lc rgb '#999999' t 'formula: memory model, executed-FLOP ratio', \
     '$out/sweep.dat' u 3:2 w p pt 7 ps 1.2 lc rgb '#1f77b4' t 'every\\_k measured', \
     '$out/sweep.dat' u 3:2:(sprintf('k=%d', \$1)) w labels offset 1.2,0.6 font ',9' notitle, \
     '$out/sweep.dat' u (1):7 every ::0::0 w p pt 5 ps 1.4 lc rgb '#d62728' t 'store\\_all'
GP
gnuplot "$out/sweep.gp"
echo "plot: $out/checkpoint-sweep.svg   data: $out/sweep.dat, $out/checkpoint_sweep.json"
