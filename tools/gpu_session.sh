#!/usr/bin/env bash
# Everything that needs a GPU to be verified, in three stages that each fit one
# device call (10 minutes). Run from the repository root on the GPU machine:
#   bash tools/gpu_session.sh tests    # the project's GPU tests (broken, untrusted, ladder, plugin)
#   bash tools/gpu_session.sh ladder   # the ladder's conformance run, its table, one kernel's wall time
#   bash tools/gpu_session.sh perf     # edge cost, timing fidelity, performance candidates
# Logs and JSON go to $OUT (or ./gpu-out when OUT is unset).
set -uo pipefail
export PYTHONUNBUFFERED=1
out="${OUT:-gpu-out}"
mkdir -p "$out"
case "${1:-}" in
  tests|ladder|perf) python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -2 ;;
esac
case "${1:-}" in
  tests)
    python3 -m pytest tests -n 8 -q -p no:cacheprovider -rfE --junitxml="$out/tests.xml" 2>&1 | tee "$out/tests.txt" | tail -40
    ;;
  ladder)
    python3 -m pytest --pyargs conformance -q -p no:cacheprovider --gemm-report "$out/ladder.json" \
      > "$out/ladder.txt" 2>&1; tail -45 "$out/ladder.txt"
    python3 tools/ladder_table.py "$out/ladder.json" | tee "$out/ladder.md"
    /usr/bin/time -f 'one kernel, wall %e s' python3 -m pytest --gemm-kernel examples/my_kernels.py:tiled -q \
      -p no:cacheprovider 2>&1 | tail -3 | tee "$out/one_kernel.txt"
    ;;
  perf)
    python3 tools/edge_cost.py --out "$out/edge_cost.json" 2>&1 | tail -20
    python3 tools/fidelity.py --out "$out/fidelity.json" 2>&1 | tail -20
    [ -f tools/perf_candidates.py ] && python3 tools/perf_candidates.py --out "$out/candidates.json" 2>&1 | tail -40
    ;;
  *)
    echo "usage: bash tools/gpu_session.sh tests|ladder|perf" >&2
    exit 2
    ;;
esac
