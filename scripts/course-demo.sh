#!/usr/bin/env bash
# A class of 30 for `memwall course grade-all` (docs/course.md): level 03's
# transpose-cpu, made from tests/course/class03 and class03-more, then graded.
#   scripts/course-demo.sh OUT [memwall grade-all options, e.g. --seed 3]
# writes OUT/submissions/ (the class) and OUT/class/ (grades, scores.csv,
# summary.json, index.html). What is in the class, by name:
#   stub_NN.cpp          8 unchanged copies of the stub (the base: not copies of one another)
#   blocked_a, strips_b, recursive_c, gather_d: 4 independent solutions
#   student_f/           a renamed, reformatted copy of blocked_a (planted)
#   copy_of_rung.cpp     a renamed copy of the project's blocked rung (planted)
#   b_copy_N.cpp         3 copies of strips_b: renamed, commented, reordered (planted)
#   c_copy.cpp           recursive_c with its names and its threshold changed (planted)
#   a_copy_2.cpp         blocked_a renamed, with another tile size (planted)
#   rung_copy_2.cpp      the rung's tile loop with other names and layout (planted)
#   broken_*.cpp         7 that fail: 3 compile errors, 4 wrong answers; broken_compile_2 is
#                        gather_d with its semicolons removed, flagged a copy of it too
#   naive_stub.cpp, rows_outer.cpp, cols_outer.cpp: 3 more honest loops
# Every planted copy must be flagged, and nothing else.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: scripts/course-demo.sh OUT [grade-all options]}
shift
memwall=${MEMWALL:-$here/build/memwall}
[ -e "$out" ] && { echo "course-demo: $out exists; give a new folder" >&2; exit 2; }
s="$out/submissions"
mkdir -p "$s"
cp -r "$here"/tests/course/class03/. "$s"/
cp "$here"/tests/course/class03-more/*.cpp "$s"/
stub="$here/levels/03-layout/exercise/transpose_cpu.cpp"
cp "$stub" "$s/naive_stub.cpp"
for i in 01 02 03 04 05 06 07 08; do cp "$stub" "$s/stub_$i.cpp"; done
# Planted copies, each by a different disguise.
sed -e 's/strip/band/g; s/r0/lo/g; s/r1/hi/g; s/dst/o/g' "$here/tests/course/class03/strips_b.cpp" > "$s/b_copy_1.cpp"
sed -e 's|^//.*|// my own transpose, row bands|; s/{$/{  \/\/ open/' "$here/tests/course/class03/strips_b.cpp" > "$s/b_copy_2.cpp"
{ echo '#include <cstddef>'; echo 'static int unused_helper(int x) { return x * 2 + 1; }';
  sed -e 's/rows/n_rows/g; s/cols/n_cols/g' "$here/tests/course/class03/strips_b.cpp"; } > "$s/b_copy_3.cpp"
sed -e 's/piece/split_copy/g; s/mid/half/g; s/256/512/' "$here/tests/course/class03-more/recursive_c.cpp" > "$s/c_copy.cpp"
sed -e 's/TS/BLK/g; s/tile/scratch/g; s/src/input/g; s/dst/output/g; s/nti/tr/g; s/ntj/tc/g; s/hh/height/g; s/ww/width/g' \
    "$here/tests/course/class03/copy_of_rung.cpp" | tr -s ' ' > "$s/rung_copy_2.cpp"
sed -e 's/ib/rb/g; s/jb/cb/g; s/ie/re/g; s/je/ce/g; s/\bB\b/TILE/g; s/16/64/' \
    "$here/tests/course/class03/blocked_a.cpp" > "$s/a_copy_2.cpp"
# Honest loops in other orders.
cat > "$s/rows_outer.cpp" <<'C'
extern "C" void student_transpose(const float* in, float* out, int rows, int cols) {
    for (long i = 0; i < rows; ++i) {
        const float* row = in + i * cols;
        for (long j = 0; j < cols; ++j) out[j * rows + i] = row[j];
    }
}
C
cat > "$s/cols_outer.cpp" <<'C'
#include <cstddef>
extern "C" void student_transpose(const float* in, float* out, int rows, int cols) {
#pragma omp parallel for
    for (int j = 0; j < cols; ++j) {
        float* dst = out + static_cast<std::size_t>(j) * rows;
        for (int i = 0; i < rows; ++i) dst[i] = in[static_cast<std::size_t>(i) * cols + j];
    }
}
C
# Broken ones.
sed -e 's/;$//' "$here/tests/course/class03-more/gather_d.cpp" > "$s/broken_compile_2.cpp"
echo 'extern "C" void student_transpose(const float*, float*, int, int) { undefined_name(); }' > "$s/broken_compile_3.cpp"
cat > "$s/broken_off_by_one.cpp" <<'C'
extern "C" void student_transpose(const float* in, float* out, int rows, int cols) {
    for (int i = 0; i < rows; ++i)
        for (int j = 0; j + 1 < cols; ++j) out[j * rows + i] = in[i * cols + j];
}
C
cat > "$s/broken_zero.cpp" <<'C'
#include <cstring>
extern "C" void student_transpose(const float*, float* out, int rows, int cols) {
    std::memset(out, 0, sizeof(float) * static_cast<unsigned long>(rows) * cols);
}
C
cat > "$s/broken_swapped.cpp" <<'C'
extern "C" void student_transpose(const float* in, float* out, int rows, int cols) {
    for (int i = 0; i < rows; ++i)
        for (int j = 0; j < cols; ++j) out[i * cols + j] = in[j * rows + i];
}
C
n=$(find "$s" -maxdepth 1 -mindepth 1 | wc -l)
echo "course-demo: $n submissions in $s"
"$memwall" course grade-all 03 "$s" --out "$out/class" "$@"
