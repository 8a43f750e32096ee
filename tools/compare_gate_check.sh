#!/usr/bin/env bash
# Issue 48's GPU check of --gemm-compare / --gemm-compare-fail, in one command (about 5 min on an
# H200; run from the repository root on the GPU machine):
#
#   bash tools/compare_gate_check.sh
#
# 1. base:   the speed checks of GATE_RUNGS (a subset of the ladder, below), --gemm-report base.json
# 2. again:  the same command, nothing changed, with --gemm-compare base.json --gemm-compare-fail=2%:
#            must exit 0 and call no kernel slower
# 3. slowed: the same, with one rung (GATE_SLOW, default warptile) built from a scratch copy of its
#            .cu that spins GATE_SPIN clock cycles (default 200000, ~0.1 ms) at the start of every
#            block: must exit 1 and call that rung alone slower
# and one line per step: OK or WRONG.
#
# GATE_NOISE (e.g. 3%) passes --gemm-compare-noise to steps 2 and 3 and --noise to their summaries;
# unset, the default band (1 %, the H200's) is used. On a card whose rungs move more between fresh
# processes (docs/compare.md: on an H100 mma-fp16 moved 2.44 % with nothing changed), set it above
# the largest move a run against itself shows, as docs/compare.md tells a user to.
#
# The scratch build lives in a temporary folder: a kernels file
# that declares the rungs (`rungs`: the ladder's own declarations) and, for step 3, `slowed`: the
# same list with the one rung's source replaced by the patched copy (-I to the ladder's folder for
# its includes, -DGEMM_GATE_SPIN for the cycles). Nothing shipped changes.
#
# Why a subset: the full ladder's conformance run takes ~340 s, its speed checks alone two minutes
# or more, and three runs must fit one device call. GATE_RUNGS keeps the rungs from tiled32 up
# (the naive rungs take seconds a call at 4096^3) across fp32 and fp16, the Hopper rung, and cuBLAS
# fp32/fp16 timed as kernels (a control: the same code as the baseline it is compared with).
# Logs, reports and comparisons (tools/compare_reports.py --out) go to $OUT/compare-gate.
set -uo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;; esac
export PYTHONUNBUFFERED=1
out="${OUT:-gpu-out}/compare-gate"
mkdir -p "$out"
rungs="${GATE_RUNGS:-tiled32 regtile2d vectorized warptile warptile-256 wmma-fp16 mma-fp16 cpasync3 wgmma-fp16 cublas-fp32 cublas-fp16}"
slow="${GATE_SLOW:-warptile}"
noise=(${GATE_NOISE:+--gemm-compare-noise="$GATE_NOISE"})  # unset: no option, the plugin's default band
tool_noise=(${GATE_NOISE:+--noise "$GATE_NOISE"})             # the same for tools/compare_reports.py
spin="${GATE_SPIN:-200000}"
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -2
work=$(mktemp -d /tmp/compare-gate.XXXXXX)
python3 - "$work" "$slow" "$spin" $rungs <<'PY' || { echo "could not write the scratch build"; exit 2; }
import re, sys
from pathlib import Path
from reference_kernels import by_name

work, slow, spin, names = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
for name in names:
    by_name(name)  # a name the ladder does not have ends the check here, with the valid names
rung = by_name(slow)
source = rung.source_path()
text = source.read_text()
entry = rung.entry.split("<")[0]
first = text.index("__global__")
at = first + re.search(r"\b%s\s*\(" % re.escape(entry), text[first:]).end()
body = text.index("{", at) + 1  # the first brace after the entry's parameter list opens its body
spin_code = ("\n    { const long long gemm_gate_t0 = clock64();"  # the scratch build's slowdown
             " while (clock64() - gemm_gate_t0 < GEMM_GATE_SPIN) { } }\n")
(work / "slowed.cu").write_text(text[:body] + spin_code + text[body:])
(work / "gate_kernels.py").write_text(f'''"""tools/compare_gate_check.sh's kernels: rungs, and slowed (the same, {slow} from slowed.cu)."""
import dataclasses
from pathlib import Path
from reference_kernels import by_name

HERE = Path(__file__).resolve().parent
rungs = [by_name(n) for n in {names!r}]
slowed = [dataclasses.replace(k, source=str(HERE / "slowed.cu"),
                              options=(*k.options, "-DGEMM_GATE_SPIN={spin}", "-I{source.parent}"))
          if k.name == {slow!r} else k for k in rungs]
''')
print(f"scratch build: {work}/slowed.cu ({slow}: {source.name} with a {spin}-cycle spin at the start of "
      f"{entry}'s body)")
PY
select="speed and ($(echo $rungs | sed 's/ / or /g'))"
suite() {  # suite NAME ATTR [options...]: the speed checks of gate_kernels.py:ATTR, the report in $out/NAME.json
  local name=$1 attr=$2; shift 2
  local t0=$SECONDS
  timeout -k 15 280 python3 -m pytest -p no:cacheprovider -p no:randomly -rfE --gemm-kernel "$work/gate_kernels.py:$attr" \
    -k "$select" --gemm-report "$out/$name.json" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc in $((SECONDS - t0)) s"
  return $rc
}
summary() {  # summary NAME: the calls, from the same code (tools/compare_reports.py)
  python3 tools/compare_reports.py "$out/base.json" "$out/$1.json" --fail 2% "${tool_noise[@]}" --out "$out/$1-compare.json" \
    > "$out/$1-compare.txt" 2>&1
  python3 - "$out/$1-compare.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
calls = {}
for r in c["rows"]:
    calls.setdefault(r["call"], []).append(f"{r['kernel']} ({100 * (r['ratio'] - 1):+.2f}%)" if r["ratio"] else r["kernel"])
print("  " + "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(calls.items())))
print("  slower: " + (", ".join(r["kernel"] for r in c["rows"] if r["call"] == "slower") or "none"))
PY
}
suite base rungs
suite again rungs --gemm-compare "$out/base.json" --gemm-compare-fail=2% "${noise[@]}"; again=$?
summary again | tee "$out/again-calls.txt"
suite slowed slowed --gemm-compare "$out/base.json" --gemm-compare-fail=2% "${noise[@]}"; slowed=$?
summary slowed | tee "$out/slowed-calls.txt"
grep -A 40 -- "--gemm-compare:" "$out/slowed.log" | head -40
ok_again=$([ "$again" = 0 ] && grep -q "slower: none" "$out/again-calls.txt" && echo OK || echo WRONG)
ok_slowed=$([ "$slowed" = 1 ] && grep -qx "  slower: $slow" "$out/slowed-calls.txt" && echo OK || echo WRONG)
echo "GATE CHECK again (no change, --gemm-compare-fail=2%, noise band ${GATE_NOISE:-the default}): exit $again, $(tail -1 "$out/again-calls.txt" | xargs): $ok_again"
echo "GATE CHECK slowed ($slow spun $spin cycles a block): exit $slowed, $(tail -1 "$out/slowed-calls.txt" | xargs): $ok_slowed"
rm -rf "$work"
