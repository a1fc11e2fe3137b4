#!/usr/bin/env bash
# Speed points of each level's naive stub, graded with and without a
# CPU-bound process (one busy shell loop) running beside the grader,
# alternating quiet and loaded runs so that slow drift of the host hits
# both. Writes one JSON line per grade to OUT and a summary (median speed
# points per level and condition) to stdout.
#
#   scripts/grade-noise-check.sh build/memwall results/<machine>/grade-noise.jsonl [runs]
set -euo pipefail
cd "$(dirname "$0")/.."
MEMWALL=${1:?usage: grade-noise-check.sh MEMWALL OUT.jsonl [runs]}
OUT=${2:?usage: grade-noise-check.sh MEMWALL OUT.jsonl [runs]}
RUNS=${3:-3}
STUBS=("01 levels/01-vectorization/exercise/gemm_cpu.cpp"
       "02 levels/02-fusion/exercise/bias_gelu_ln_cpu.cpp"
       "03 levels/03-layout/exercise/transpose_cpu.cpp"
       "04 levels/04-precision/exercise/dequant_gemv_int4_g64_cpu.cpp")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; [ -n "${HOG:-}" ] && kill "$HOG" 2>/dev/null || true' EXIT
: > "$tmp/out.jsonl"
for run in $(seq 1 "$RUNS"); do
  for cond in quiet loaded; do
    HOG=""
    if [ "$cond" = loaded ]; then
      sh -c 'while :; do :; done' &
      HOG=$!
    fi
    for s in "${STUBS[@]}"; do
      set -- $s
      "$MEMWALL" grade "$1" --submission "$2" --seed "$run" --format json --out "$tmp/r.json" 2>/dev/null || true
      python3 - "$tmp/r.json" "$1" "$cond" "$run" "$*" >> "$tmp/out.jsonl" <<'PY'
import json, os, sys
d = json.load(open(sys.argv[1]))
model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
sp = [t for t in d["tests"] if t["kind"] == "speed"][0]
print(json.dumps({"level": sys.argv[2], "condition": sys.argv[3], "run": int(sys.argv[4]),
                  "speed_points": sp["score"], "ratio": sp.get("speed", {}).get("ratio"),
                  "reference_best_s": sp.get("speed", {}).get("reference_best_s"),
                  "submission_best_s": sp.get("speed", {}).get("submission_best_s"),
                  "sandbox": d["sandbox"]["description"],
                  "machine": f"{model}, {os.cpu_count()} cores",
                  "command": f"memwall grade {sys.argv[2]} --submission {sys.argv[5].split()[1]} --seed {sys.argv[4]}"
                             + (" (beside: sh -c 'while :; do :; done')" if sys.argv[3] == "loaded" else "")}))
PY
    done
    if [ -n "$HOG" ]; then kill "$HOG"; wait "$HOG" 2>/dev/null || true; HOG=""; fi
  done
done
mkdir -p "$(dirname "$OUT")"
mv "$tmp/out.jsonl" "$OUT"
python3 - "$OUT" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("level  quiet(median pts)  loaded(median pts)  change")
for lv in sorted({r["level"] for r in rows}):
    q = statistics.median(r["speed_points"] for r in rows if r["level"] == lv and r["condition"] == "quiet")
    l = statistics.median(r["speed_points"] for r in rows if r["level"] == lv and r["condition"] == "loaded")
    print(f"{lv}     {q:8.2f}           {l:8.2f}          {(l / q - 1) * 100 if q else float('nan'):+6.1f}%")
PY
