#!/usr/bin/env bash
# Builds libcutlass_sm80.so (every tile configuration of gemm_sm80.cu) for sm_80 and sm_90.
# Needs nvcc and CUTLASS's headers: CUTLASS_DIR=/path/to/cutlass, a checkout (CUTLASS 4.7 was
# measured) or what `pip install nvidia-cutlass` ships (4.2 compiles too):
#   CUTLASS_DIR=$(python3 -c "import cutlass_library, os; print(os.path.dirname(cutlass_library.__file__))")/source
# Output: bench/cutlass_sm80/build/ (carry it to a GPU machine that has no nvcc or no CUTLASS).
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;; esac
here="$(cd "$(dirname "$0")" && pwd)"
: "${CUTLASS_DIR:?set CUTLASS_DIR to a CUTLASS checkout (with include/cutlass/cutlass.h)}"
out="$here/build"
mkdir -p "$out"
# name  BM BN BK  WM WN  stages
configs=(
  "128x256x64_s3 128 256 64 64 64 3"
  "256x128x64_s3 256 128 64 64 64 3"
  "128x256x32_s4 128 256 32 64 64 4"
  "256x128x32_s4 256 128 32 64 64 4"
  "128x128x64_s4 128 128 64 64 64 4"
  "128x128x32_s5 128 128 32 64 64 5"
  "128x256x64_s4 128 256 64 64 64 4"
)
objs=()
for c in "${configs[@]}"; do
  read -r name bm bn bk wm wn st <<<"$c"
  obj="$out/$name.o"
  objs+=("$obj")
  nvcc -O3 -std=c++17 --expt-relaxed-constexpr -Xcompiler -fPIC -c "$here/gemm_sm80.cu" -o "$obj" \
    -I"$CUTLASS_DIR/include" \
    -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
    -DCS_CONFIG="$name" -DCS_BM="$bm" -DCS_BN="$bn" -DCS_BK="$bk" -DCS_WM="$wm" -DCS_WN="$wn" \
    -DCS_STAGES="$st" &
  # two at a time: these translation units take a minute or more each
  if (( $(jobs -r | wc -l) >= ${CUTLASS_JOBS:-2} )); then wait -n; fi
done
wait
nvcc -shared -cudart static -o "$out/libcutlass_sm80.so" "${objs[@]}"
printf '%s\n' "${configs[@]}" | awk '{print $1}' > "$out/configs.txt"
echo "built $out/libcutlass_sm80.so"
