#!/usr/bin/env bash
# The Gradescope autograder, end to end (docs/course.md, "A Gradescope
# autograder"): `memwall course autograder 03` packs level 03 with a secret;
# the zip is unpacked into a fresh /autograder tree seen through a bubblewrap
# view, as in the platform's container: root, no network, this machine's
# /usr and /etc read-only (setup.sh's installs find the packages present),
# its /proc and /sys, none of its other files. setup.sh builds the grader from the zip's sources, then
# run_autograder grades five submissions, each in a fresh view as Gradescope
# gives each its own container, and one more in a view whose /proc the
# grader's sandbox cannot use: an honest blocked transpose (full marks; the
# instructor's reference solution calls the project's rung, which a
# submission's compiler never sees, so a student-written one stands in), the
# naive stub (its correctness points, its speed test failed), a compile
# error (zero, saying so), an attack that reaches for /autograder (zero; the
# secret, a forged results.json and a marker file nowhere) and a wrongly
# named file (zero, saying what to name it); the last gets zero with the
# grader's reason. Every results.json is checked
# against Gradescope's format (check_results.py).
#   autograder_test.sh MEMWALL_BINARY SOURCE_DIR
set -euo pipefail
memwall=$1
root=$2
here=$root/tests/course/autograder
[ "$(id -u)" -eq 0 ] || { echo "SKIPPED: the autograder runs as root, and so must this test"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
secret="autograder-test-secret-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')"
printf '%s\n' "$secret" > "$T/seed"
"$memwall" course autograder 03 --exercise transpose-cpu --out "$T/autograder.zip" --secret-seed-file "$T/seed"
ag=$T/autograder
mkdir -p "$ag/source"
unzip -q "$T/autograder.zip" -d "$ag/source"
[ "$(stat -c %a "$ag/source/secret-seed")" = 600 ] || { echo "FAIL: secret-seed is not mode 0600"; exit 1; }
if [ ! -x "$ag/source/setup.sh" ] || [ ! -x "$ag/source/run_autograder" ]; then echo "FAIL: the scripts lost their execute bits"; exit 1; fi
if find "$ag/source/memwall" -name '*.ipynb' -o -name 'results' -type d | grep -q .; then
  echo "FAIL: the zip carries notebooks or results"; exit 1
fi

# The host's /proc, not a fresh one: the grader's own bubblewrap mounts a
# proc of its own, which the kernel refuses under a proc with covered paths
# (bwrap --proc covers /proc/sys and others, as Docker masks some): see
# docs/course.md on what the platform's container must allow.
view() {
  bwrap --die-with-parent --unshare-net --unshare-ipc --unshare-uts --cap-add ALL \
    --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 \
    --symlink usr/sbin /sbin --ro-bind /etc /etc --ro-bind /var/lib/dpkg /var/lib/dpkg \
    --bind /proc /proc --dev /dev --tmpfs /tmp --ro-bind /sys /sys --bind /sys/fs/cgroup /sys/fs/cgroup \
    --bind "$ag" /autograder --chdir /autograder/source --clearenv \
    --setenv PATH /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin --setenv HOME /tmp "$@"
}

t0=$(date +%s)
view bash /autograder/source/setup.sh > "$T/setup.log" 2>&1 || { tail -40 "$T/setup.log"; echo "FAIL: setup.sh"; exit 1; }
echo "setup.sh: built the grader in $(( $(date +%s) - t0 )) s"
cp "$ag/source/run_autograder" "$ag/run_autograder"   # where Gradescope puts it

failed=0
# grade NAME FILE AS check_results.py-arguments... (VIEW=view_masked_proc:
# the view a container with a covered /proc gives)
view_masked_proc() {
  bwrap --die-with-parent --unshare-net --unshare-pid --unshare-ipc --unshare-uts --cap-add ALL \
    --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 \
    --symlink usr/sbin /sbin --ro-bind /etc /etc --proc /proc --dev /dev --tmpfs /tmp --ro-bind /sys /sys \
    --bind "$ag" /autograder --chdir /autograder/source --clearenv --setenv PATH /usr/sbin:/usr/bin "$@"
}
grade() {
  local name=$1 file=$2 as=$3
  shift 3
  rm -rf "$ag/submission" "$ag/results"
  mkdir -p "$ag/submission"
  cp "$file" "$ag/submission/$as"
  local t
  t=$(date +%s)
  ${VIEW:-view} /autograder/run_autograder > "$T/$name.log" 2>&1 || { cat "$T/$name.log"; echo "FAIL: $name: run_autograder exited non-zero"; failed=1; return; }
  echo "$name: graded in $(( $(date +%s) - t )) s"
  if [ -e "$ag/results/ATTACK-MARKER" ]; then echo "FAIL: $name: a file of the submission's is in results/"; failed=1; fi
  if grep -rqF "$secret" "$ag/results" "$T/$name.log"; then echo "FAIL: $name: the secret seed reached the results or the log"; failed=1; fi
  cp "$ag/results/results.json" "$T/$name.json" 2>/dev/null || true
  python3 "$here/check_results.py" "$ag/results/results.json" "$@" --absent FORGED || { failed=1; head -c 3000 "$ag/results/results.json"; echo; }
}

exercise=$root/levels/03-layout/exercise
grade honest "$root/tests/course/class03/blocked_a.cpp" transpose_cpu.cpp \
  --score-min 99 --score-max 100 --status correctness=passed --status speed=passed
# The naive stub: its correctness points only. A transpose does no
# arithmetic and naive is only 2-8x slower than blocked (0.13-0.52 of the
# reference's speed on the CPUs measured), so level 03's speed points start
# at 0.60 of it (level.json zero_credit_ratio).
grade naive "$exercise/transpose_cpu.cpp" transpose_cpu.cpp --score-min 60 --score-max 60 \
  --status correctness=passed --status speed=failed
printf '%s\n' "$(cat "$exercise/transpose_cpu.cpp")" 'this line is not C++;' > "$T/broken.cpp"
grade compile-error "$T/broken.cpp" transpose_cpu.cpp --score-min 0 --score-max 0 --output-has 'not C++'
grade attack "$here/attack_reach_autograder.cpp" transpose_cpu.cpp --score-min 0 --score-max 0
grade misnamed "$exercise/transpose_cpu.cpp" solution.cpp --score-min 0 --score-max 0 \
  --output-has 'No file named transpose_cpu.cpp'
# Where the grader's sandbox cannot start (a proc it may not mount): zero
# points and the grader's reason, never an unmarked crash.
VIEW=view_masked_proc grade no-sandbox "$exercise/transpose_cpu.cpp" transpose_cpu.cpp --score-min 0 \
  --score-max 0 --output-has 'bubblewrap cannot make its sandbox' --output-has 'tell your instructor'
[ "$failed" = 0 ] || { echo "FAIL"; exit 1; }
echo "PASS: six schema-valid results.json"
