#!/usr/bin/env bash
# What the GPU kit's binaries may load from outside the kit: the C and C++
# runtime, zlib, the CUDA driver and the CUDA libraries (cudart, cuBLAS and
# cuBLASLt, NCCL), which the GPU machine brings itself.
#   check_ldd.sh --provided        print that list as an extended regex over sonames
#   check_ldd.sh KIT_PAYLOAD_DIR   ldd every binary of an unpacked kit (bin/, tests/, lib/): exit 0 when
#                                  each library resolves inside the kit or is on that list, else 1 naming it
set -uo pipefail
PROVIDED='^(linux-vdso\.so|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|ld-linux-x86-64\.so|libstdc\+\+\.so|libgcc_s\.so|libz\.so|libcuda\.so|libcudart\.so|libcublas\.so|libcublasLt\.so|libnccl\.so)'
if [ "${1:-}" = --provided ]; then echo "$PROVIDED"; exit 0; fi
[ $# -eq 1 ] && [ -d "$1" ] || { echo "usage: check_ldd.sh --provided | KIT_PAYLOAD_DIR" >&2; exit 2; }
DIR=$(cd "$1" && pwd)
bad=0 n=0
for b in "$DIR"/bin/* "$DIR"/tests/* "$DIR"/lib/*; do
  [ -f "$b" ] || continue
  n=$((n + 1))
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    if [ "$path" = "not" ]; then
      echo "ldd: $(basename "$b") needs $name: not found" >&2; bad=1
    elif [[ $path == "$DIR"/* ]]; then
      :
    elif ! [[ $name =~ $PROVIDED ]]; then
      echo "ldd: $(basename "$b") loads $name from $path, outside the kit (not the C/C++ runtime, zlib or CUDA)" >&2; bad=1
    fi
  done < <(ldd "$b" 2>&1)
done
[ $bad = 0 ] && echo "ldd: the $n binaries of the kit load only the kit's libraries, the C/C++ runtime, zlib and CUDA's"
exit $bad
