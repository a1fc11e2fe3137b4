#!/usr/bin/env bash
# The main job: install what is missing, build the memwall binary, calibrate
# this machine, run every lever's CPU rungs (and the CUDA rungs when a GPU is
# present; cuda-emu rungs check correctness only and are not run here), check
# the published claims this machine can check, and write one HTML page.
#   OUT=results/mine ./scripts/main-job.sh     (default: results/local-<host>)
# Leaves in $OUT: index.html (open it in a browser), plots/, ceilings.json,
# <lever>-<backend>.json (+ .md, .csv) per lever, claims.json (+ .md), job.json
# (the files it made and how long each part took) and job.log.
# Shapes: scripts/main-job.shapes (an op not named there runs at its default).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-results/local-$(hostname -s)}
mkdir -p "$OUT"
exec > >(tee "$OUT/job.log") 2>&1
PARTS=()   # "name<TAB>wall seconds<TAB>CPU seconds"
now() { date +%s.%N; }
# CPU seconds (user + system) of the commands this shell has waited for. On a
# shared machine a part's wall time grows with the neighbours' load; its CPU
# time does not (much), so both are recorded.
TIMES=$(mktemp)
cpu_now() {  # sets CPU_NOW; `times` must run in this shell, not in a $(...) subshell
  times > "$TIMES"
  CPU_NOW=$(tail -1 "$TIMES" | awk '{ split($1, u, "m"); split($2, s, "m"); printf "%.1f", u[1] * 60 + u[2] + s[1] * 60 + s[2] }')
}
part() {  # part NAME COMMAND...: runs it, prints and records how long it took; its exit status
  local name=$1; shift
  echo "== $name"
  local t0 c0 rc=0; t0=$(now); cpu_now; c0=$CPU_NOW
  "$@" || rc=$?
  cpu_now
  local dt dc; dt=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
  dc=$(awk -v a="$c0" -v b="$CPU_NOW" 'BEGIN { printf "%.1f", b - a }')
  PARTS+=("$name	$dt	$dc")
  echo "== $name: ${dt} s (CPU ${dc} s)"
  return $rc
}

# A GPU: the CUDA backend, compiled for this GPU only (and NCCL for the MoE
# lever's GPU rung). None: no nvcc at all (its compiles would dominate the
# build and nothing could run them).
GPU=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then GPU=1; fi

if [ "$GPU" = 1 ]; then
  part "install packages (apt; NCCL from PyPI)" ./scripts/install-deps.sh --nccl
else
  part "install packages (apt)" ./scripts/install-deps.sh
fi
if [ "$GPU" = 1 ]; then
  CONFIG=(-DMEMWALL_CUDA=AUTO -DCMAKE_CUDA_ARCHITECTURES=native)
else
  CONFIG=(-DMEMWALL_CUDA=OFF)
fi
build() {
  cmake --preset job "${CONFIG[@]}" >/dev/null
  cmake --build --preset job -j "$(nproc)"
}
part "configure and build (memwall only$([ "$GPU" = 1 ] && echo ', CUDA' || echo ', no GPU: without CUDA'))" build
MW=./build-job/memwall

part "calibrate" "$MW" calibrate --out "$OUT/ceilings.json"

# Shapes: "--shape op:axes" for every line of main-job.shapes.
SHAPES=()
while read -r op axes _; do
  [ -z "$op" ] || [ "${op:0:1}" = "#" ] && continue
  SHAPES+=(--shape "$op:$axes")
done < scripts/main-job.shapes
# Only ops that exist in this build (a shapes line may name a lever not merged yet).
OPS=$("$MW" list --json | python3 -c 'import json,sys; print(" ".join(sorted({v["op"] for v in json.load(sys.stdin)})))')
KEEP=()
for ((i = 1; i < ${#SHAPES[@]}; i += 2)); do
  op=${SHAPES[$i]%%:*}
  case " $OPS " in *" $op "*) KEEP+=(--shape "${SHAPES[$i]}") ;; esac
done

BACKENDS=(cpu)
[ "$GPU" = 1 ] && BACKENDS+=(cuda)
STATUS=0
for be in "${BACKENDS[@]}"; do
  part "run all levers ($be)" "$MW" run all --backend "$be" --threads "$(nproc)" --budget "${BUDGET:-0.3}" \
      --ceilings "$OUT/ceilings.json" "${KEEP[@]}" --out-dir "$OUT" || STATUS=$?
done
[ "$STATUS" -le 1 ] || exit "$STATUS"   # 1: some variant is incorrect (the page shows which)

# Memory-bound ops (below the ridge) must stream more than the measured L3.
python3 - "$OUT" <<'EOF'
import glob, json, os, sys
out = sys.argv[1]
c = json.load(open(os.path.join(out, "ceilings.json")))["ceilings"]
l3 = c.get("caches_bytes", {}).get("l3", 0)
peak = max([p["gflops"] for p in c.get("peaks", []) if p["dtype"] == "fp32"] or [0])
dram = c.get("dram_gbps") or max(c.get("dram_triad_gbps") or [0])
ridge = peak / dram if dram else 0
def size(b):
    return f"{b / 2**20:.0f} MiB" if b >= 2**20 else f"{b / 1024:.0f} KiB"
for p in sorted(glob.glob(os.path.join(out, "*-cpu.json"))):
    for r in json.load(open(p))["runs"]:
        # Memory-bound: below the ridge by the op's compulsory bytes (a naive rung's own traffic says little).
        compulsory = r.get("compulsory_bytes") or r["bytes"]
        intensity = r["flops"] / compulsory if compulsory else 0
        if r.get("role") != "reference" or not r.get("ran", True) or intensity >= ridge:
            continue
        # The op's own buffers or the bytes it must read (weights, caches), whichever is larger.
        ws = max(r.get("problem_bytes") or 0, compulsory)
        verdict = "exceeds" if ws > l3 else "fits in"
        print(f"  {r['op']:14s} memory-bound (FLOP/B {intensity:.3g} < ridge {ridge:.3g}): {size(ws)} {verdict} "
              f"the {size(l3)} L3" + ("" if ws > l3 else ": its times are the L3's, not DRAM's"))
EOF

# Claims: the formula checks, and the CPU experiments (or GPU ones) run here.
# Exit status 1 means a claim could not be evaluated; the page shows it.
claims() {
  "$MW" reproduce --run-experiments --out "$OUT/claims.json" >/dev/null ||
    echo "some claims could not be evaluated: see $OUT/claims.md"
}
part "claims (memwall reproduce --run-experiments)" claims

# job.json: the files the page is made from, and the time of each part (the
# run of all levers split by lever from the results files' timelines).
write_job() {
  # The parts go in through the environment: the program itself is python's standard input.
  PARTS_TEXT=$(printf '%s\n' "${PARTS[@]}") python3 - "$OUT" "$GPU" <<'EOF'
import glob, json, os, sys
out, gpu = sys.argv[1], sys.argv[2] == "1"
parts = []
for line in os.environ["PARTS_TEXT"].splitlines():
    if not line.strip():
        continue
    name, secs, cpu = line.split("\t")
    parts.append({"name": name, "seconds": float(secs), "cpu_seconds": float(cpu)})
files, levers = ["ceilings.json"], []
for p in sorted(glob.glob(os.path.join(out, "*-cpu.json")) + glob.glob(os.path.join(out, "*-cuda.json"))):
    doc = json.load(open(p))
    if doc.get("schema") != "memwall.results/1":
        continue
    files.append(os.path.basename(p))
    secs = sum(t.get("wall_s", 0) for t in doc.get("timeline", []))
    levers.append({"name": "  lever " + os.path.basename(p)[:-5], "seconds": round(secs, 1)})
if os.path.exists(os.path.join(out, "claims.json")):
    files.append("claims.json")
# the per-lever lines go right after the part that ran them
for i, p in enumerate(parts):
    if p["name"].startswith("run all levers"):
        backend = p["name"][p["name"].rfind("(") + 1:-1]
        parts[i + 1:i + 1] = [l for l in levers if l["name"].endswith("-" + backend)]
doc = {"schema": "memwall.job/1", "files": files, "parts": parts, "gpu": gpu,
       "note": "Wall time grows with whatever else the machine runs; CPU time (user + system of the part's "
               "processes) much less. The lever lines are shares of the run above them (wall time, from the "
               "results files' timelines)."}
tmp = os.path.join(out, "job.json.tmp")
json.dump(doc, open(tmp, "w"), indent=2)
os.replace(tmp, os.path.join(out, "job.json"))
EOF
}
write_job
part "report (memwall report --html)" "$MW" report "$OUT" --html
write_job

echo
echo "Times:"
printf '  %-56s %9s %9s\n' part wall CPU
for p in "${PARTS[@]}"; do
  IFS=$'\t' read -r name wall cpu <<< "$p"
  printf '  %-56s %7s s %7s s\n' "$name" "$wall" "$cpu"
done
echo "Results are in $OUT/: open $OUT/index.html in a browser."
exit "$STATUS"
