#!/usr/bin/env bash
# The course autograder's setup (`memwall course autograder`, docs/course.md).
# Gradescope runs this once per autograder upload, as root, in
# /autograder/source on its image (Ubuntu 22.04; see docs/course.md for what
# differs from the Debian 12 it is tested on): it installs what building and
# grading need and builds the grader from the sources in memwall/, only the
# targets grading needs (autograder.conf names them). It must leave a working
# grader or fail loudly: a failed setup is shown to the instructor on upload,
# a broken grader only later to every student.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=/dev/null # written by memwall course autograder
. "$here/autograder.conf"

packages=(g++ cmake ninja-build pkg-config libcli11-dev nlohmann-json3-dev libopenblas-dev libbenchmark-dev
          libseccomp-dev libssl-dev bubblewrap python3)
[ "$EMU" = ON ] && packages+=(libboost-context-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
install() {
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup.sh: installing ${missing[*]}"
  install "${missing[@]}"
fi

# The project needs g++ 12 or newer (C++20) and CMake 3.25 or newer; Ubuntu
# 22.04 ships g++ 11 and CMake 3.22. Its g++-12 package becomes the g++ the
# grader compiles submissions with (found on PATH, and inside the sandbox
# under /usr); CMake comes from PyPI (no newer Ubuntu package) into a
# virtual environment here.
major() { "$1" -dumpversion 2>/dev/null | cut -d. -f1; }
if [ "$(major g++)" -lt 12 ]; then
  echo "setup.sh: g++ $(g++ -dumpversion) is older than 12: installing g++-12 as g++"
  install g++-12
  update-alternatives --install /usr/bin/gcc gcc /usr/bin/gcc-12 100
  update-alternatives --install /usr/bin/g++ g++ /usr/bin/g++-12 100
fi
cmake=cmake
version_at_least() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" = "$2" ]; }
if ! version_at_least "$(cmake --version | sed -n 's/^cmake version //p')" 3.25; then
  echo "setup.sh: $(cmake --version | head -1) is older than 3.25: installing PyPI's cmake into $here/.tools"
  install python3-venv
  python3 -m venv "$here/.tools"
  "$here/.tools/bin/pip" install -q 'cmake>=3.25,<4'
  cmake="$here/.tools/bin/cmake"
fi

rm -rf "$here/build"
"$cmake" -S "$here/memwall" -B "$here/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEMWALL_CUDA=OFF \
  -DMEMWALL_TESTS=OFF -DMEMWALL_ASAN_EMU=OFF -DMEMWALL_EMU="$EMU" -DMEMWALL_EMU_KERNELS=OFF >/dev/null
# shellcheck disable=SC2086 # TARGETS is a list of target names
"$cmake" --build "$here/build" -j "$(nproc)" --target memwall $TARGETS
"$here/build/memwall" --help >/dev/null
echo "setup.sh: the grader of level $LEVEL is built: $here/build/memwall"
