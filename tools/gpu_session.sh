#!/usr/bin/env bash
# Everything that needs a GPU to be verified, in stages; several stages can share one device
# call (10 minutes). Run from the repository root on the GPU machine:
#   bash tools/gpu_session.sh gpu-tests # EVERY GPU test of the project (pytest -m gemm_gpu), at most 6 minutes on one
#                                       # H200, ending in one line: passed / failed / skipped, wall time, commit
#                                       # (GPU_TESTS="tests/test_x.py ...": those files' GPU tests only;
#                                       # GPU_TESTS_LIMIT: its limit in seconds, 540 by default)
#   bash tools/gpu_session.sh tests     # every test in tests/ with -n 8 (the CPU tests too; slower than gpu-tests)
#   bash tools/gpu_session.sh untrusted # the cheats and faults (tests/test_untrusted_kernels.py) and the launch
#                                       # guard, one worker per GPU: with 4 workers per GPU (-n 8 on 2) the
#                                       # timings are shared and 'memoized' read 12.4 ms, not faster than physics
#   bash tools/gpu_session.sh ladder    # the ladder's conformance run (-n 0, with 4 broken kernels) and its table  ~6 min
#   bash tools/gpu_session.sh one       # one kernel's full conformance run, its wall time  ~30 s
#   bash tools/gpu_session.sh parallel  # the same ladder run with -n 2 (one worker per GPU)  ~2 min
#   bash tools/gpu_session.sh perf      # edge cost, timing fidelity, performance candidates  ~5 min
#   bash tools/gpu_session.sh followup  # what is still unverified: the combined untrusted test, the
#                                       # 8192^3 ranking, a sweep, --gemm-ladder's cost  ~6 min
#   bash tools/gpu_session.sh diagnose  # why medians move between processes: fidelity with clocks sampled for
#                                       # cuBLAS fp32/fp16 and our rungs, cuBLAS's kernel per process (ncu),
#                                       # the tensor candidates  ~4 min
#   bash tools/gpu_session.sh sizes     # the top rungs (warptile, mma-fp16, wgmma) and cuBLAS ranked at 2048^3 and 8192^3  ~2 min
#   bash tools/gpu_session.sh verdicts  # one root cause per kernel (tests/test_verdicts_gpu.py)  ~4 min
#   bash tools/gpu_session.sh hang      # a hanging student graded with default options (goal: < 60 s)
#   bash tools/gpu_session.sh scale     # 64 kernels in one -n 4 session, speed checks, no GPU lock  ~3 min
#   bash tools/gpu_session.sh class     # issue 47's targets (<= 120 s): a generated class of CLASS_SIZE (100) students with the
#                                       # gradebook's default --jobs (CLASS_JOBS sets one), CLASS_SOLO (3) graded again
#                                       # alone, CLASS_AGAIN (25, every wrong one first) graded a second time; one
#                                       # MET/MISSED line per target; at most CLASS_LIMIT (570) s, about 8 min: a call
#                                       # of its own (the whole class twice, CLASS_AGAIN=100 CLASS_SOLO=0, is ~10 min);
#                                       # CLASS_SCHEDULER=dask grades the class through Dask (a LocalCluster) and
#                                       # again on the local pool, and compares (issue 47), with the Dask wheels
#                                       # carried in .whl/ when the machine has no Dask (docs/distributed.md)
#                                       # CLASS_SEED (auto, the gradebook's default; on; off) sets
#                                       # PYTEST_GEMM_HARNESS_SEED, the seed of the harness's CuPy kernels for
#                                       # confined students (docs/courses.md), for issue 44's A/B
#   bash tools/gpu_session.sh class-ab  # issue 47's A/B in one call: the course (fills the CuPy cache the students share),
#                                       # then the class of CLASS_SIZE (100; no solo or second pass, CLASS_LIMIT 250 s
#                                       # each) once per setting in CLASS_AB: settings separated by ';', each a list
#                                       # of NAME=VALUE words, e.g.
#                                       # CLASS_AB="PYTEST_GEMM_CUDA_WAIT=auto;PYTEST_GEMM_CUDA_WAIT=blocking";
#                                       # each run's files in ab-N/, its CLASS line and GPU lock summary printed
#   bash tools/gpu_session.sh course    # the course example (examples/course, 5 students) with the gradebook's
#                                       # defaults, as its README gives it: target <= 60 s  ~1.5 min
#   bash tools/gpu_session.sh cutlass   # CUTLASS's own mma.sync GEMMs (bench/cutlass_sm80, built beforehand and
#                                       # carried) and the rung mma-fp16 through the suite, then Nsight Compute
#                                       # on CUTLASS_PROFILE (the rung, CUTLASS's 256x128x64_s3)  ~3 min
#   bash tools/gpu_session.sh ecosystems # examples/ecosystems/ through the suite: the Triton tutorial kernel
#                                       # (fp16 and fp32, default options, cold Triton caches: its wall time,
#                                       # goal <= 180 s), the rest with -n 4, Numba with the NumPy carried in
#                                       # .whl/ (carry .whl); then their table and verdict check  ~5 min
#   bash tools/gpu_session.sh warmup    # issue 43's bound: Triton's tutorial imported inside the launcher (fp16, fp32,
#                                       # fp32 ieee), default options, cold Triton caches, alone: <= 180 s
#                                       # (tests/test_warmup_gpu.py with GEMM_WARMUP_ALONE=1)  ~3 min
#   bash tools/gpu_session.sh ladder perf          # stages in order, one install (about 8 min)
# Compare the serial and parallel reports afterwards (anywhere, no GPU):
#   python3 tools/compare_reports.py ladder.json ladder_n2.json
# Logs and JSON go to $OUT (or ./gpu-out when OUT is unset). Each stage has its own time limit
# so that one stuck stage cannot take the others' results with it.
set -uo pipefail
export PYTHONUNBUFFERED=1
# The stages, one list: each has its branch in the case below (tests/test_tools.py checks both ways)
stages="gpu-tests tests untrusted ladder one parallel perf followup diagnose sizes verdicts hang scale class class-ab course cutlass ecosystems warmup"
usage="usage: bash tools/gpu_session.sh STAGE... (${stages// /|}; --help says what each does)"
case "${1:-}" in -h|--help) echo "$usage"; sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;; esac
[ $# -gt 0 ] || { echo "$usage" >&2; exit 2; }
for stage in "$@"; do
  case " $stages " in *" $stage "*) ;; *) echo "unknown stage: $stage; $usage" >&2; exit 2 ;; esac
done
out="${OUT:-gpu-out}"
mkdir -p "$out"
# class-ab runs this script again for each of its passes: installed once
[ -n "${GEMM_SESSION_NESTED:-}" ] || python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -2
# install_apart DIR WHEEL...: carried wheels into DIR alone (no index, no dependencies), to be put
# on PYTHONPATH: the machine's own packages stay as they are.
install_apart() { local dir=$1; shift; rm -rf "$dir"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$dir" "$@"; }
# The GPU tests read every report through its JSON Schema (jsonschema, in the test extra). A GPU
# machine with no package index gets it from wheels carried in .whl/ (CONTRIBUTING.md says how
# to download them), installed apart and put on PYTHONPATH for this call only.
if ! python3 -c "import jsonschema" 2>/dev/null; then
  if compgen -G ".whl/jsonschema-*.whl" > /dev/null; then
    install_apart /tmp/gemm-test-site \
      .whl/jsonschema-*.whl .whl/jsonschema_specifications-*.whl .whl/referencing-*.whl .whl/rpds_py-*.whl \
      $(compgen -G ".whl/attrs-*.whl") $(compgen -G ".whl/typing_extensions-*.whl") 2>&1 | tail -2
    export PYTHONPATH="/tmp/gemm-test-site${PYTHONPATH:+:$PYTHONPATH}"
  fi
  python3 -c "import jsonschema" 2>/dev/null || echo "jsonschema is not installed: every GPU test that reads a report" \
    "will fail; pip install 'pytest-gemm[test]', or, with no package index, carry its wheels in .whl/ (CONTRIBUTING.md)"
fi
# The launch trace (docs/launch-trace.md) needs NVIDIA's CUPTI binding (the trace13 extra); carried as
# .whl/cupti_python-*.whl where there is no package index, installed apart like jsonschema, with
# the pyelftools it imports (without it: "No module named 'elftools'", every trace skipped).
if ! python3 -c "import cupti" 2>/dev/null && compgen -G ".whl/cupti_python-*.whl" > /dev/null; then
  install_apart /tmp/gemm-trace-site .whl/cupti_python-*.whl $(compgen -G ".whl/pyelftools-*.whl") 2>&1 | tail -2
  export PYTHONPATH="/tmp/gemm-trace-site${PYTHONPATH:+:$PYTHONPATH}"
fi
python3 -c "import cupti" 2>/dev/null || echo "cupti-python is not installed: every check's launch trace is skipped" \
  "with its reason; pip install 'pytest-gemm[trace13]', or carry its wheel in .whl/ (CONTRIBUTING.md)"
# What every figure of this run was measured at (tools/readme_figures.py reads it)
python3 - "$out/meta.json" <<'PY'
import json, sys, time
sys.path.insert(0, "tools")
from gpu_tests_summary import commit, device
json.dump({"commit": commit(), "date": time.strftime("%Y-%m-%d", time.gmtime()), "device": device()},
          open(sys.argv[1], "w"))
PY
limit() { timeout -k 15 "$@"; }
# Kill what a stage left running (sandbox workers, xdist workers), but never this script or
# the shell that started it: their command lines may hold the same words (pkill -f would
# match them and end the whole call).
stop_leftovers() {
  local keep=" $$ " p=$$
  while [ "${p:-1}" -gt 1 ]; do p=$(ps -o ppid= -p "$p" 2>/dev/null | tr -d ' '); keep+="${p:-1} "; done
  for pid in $(pgrep -f "python3 -m pytest|perf_candidates|fidelity.py|edge_cost|cublas_kernels"); do
    [[ "$keep" == *" $pid "* ]] || kill "$pid" 2>/dev/null
  done
  return 0
}
# walled LABEL LIMIT CMD...: run CMD under LIMIT seconds and print its wall time
walled() { local label=$1 t0=$EPOCHREALTIME; shift; limit "$@"; local rc=$?
  python3 -c "import sys; print(f'{sys.argv[1]}, wall {float(sys.argv[3]) - float(sys.argv[2]):.1f} s (exit {sys.argv[4]})')" \
    "$label" "$t0" "$EPOCHREALTIME" "$rc"; }
# The ladder runs carry four broken kernels of ours (tests/untrusted) beside the ladder, each
# at one shape of the exact check: a fault, a hang, a misaligned float4 and exit() must each
# cost only their own test (issue: untrusted kernels). Same content with -n 0 and -n 2.
UNTRUSTED=(illegal_address endless_loop misaligned_float4 calls_exit)
ladder_args=(--gemm-kernel reference_kernels:LADDER --gemm-timeout 20 -p no:cacheprovider -q)
select="not ($(IFS='|'; echo "${UNTRUSTED[*]}" | sed 's/|/ or /g'))"
for k in "${UNTRUSTED[@]}"; do
  ladder_args+=(--gemm-kernel "tests/untrusted/kernels.py:$k"); select+=" or exact-$k-64x64x64"
done
ladder_args+=(-k "$select")
for stage in "$@"; do
  echo "=== $stage ($(date +%T))"
  case "$stage" in
    gpu-tests)
      # Every test marked gemm_gpu, one pytest process (-n 0): the suite runs of the broken,
      # untrusted and verdict kernels start together in the background (tests/gpu_runs.py),
      # each with its own workers, while the in-process GPU tests (ladder) run.
      t0=$EPOCHREALTIME
      rm -rf /tmp/gemm-gpu-tests
      if compgen -G ".whl/numpy-*.whl" > /dev/null; then  # a NumPy numba-cuda can use, for the Numba example only
        install_apart /tmp/gemm-numba-site .whl/numpy-*.whl && export GEMM_NUMBA_SITE=/tmp/gemm-numba-site
      fi
      # the target is 6 minutes (CONTRIBUTING); the limit is wider so that a slower run still ends in its
      # summary line, with its wall time, rather than in none
      # the GPU lock's log: where the GPU's time went (tools/lock_log.py reads it below)
      rm -f "$out/gpu-lock.jsonl"
      # GPU_TESTS: test files instead of all of tests/ (their suite runs only), e.g. to check one change
      # shortly; the summary line is then not the suite's
      PYTEST_GEMM_LOCK_LOG="$out/gpu-lock.jsonl" \
      limit "${GPU_TESTS_LIMIT:-540}" python3 -m pytest ${GPU_TESTS:-tests} -m gemm_gpu -p no:cacheprovider -rfEs --durations=30 \
        --basetemp /tmp/gemm-gpu-tests --junitxml "$out/gpu-tests.xml" > "$out/gpu-tests.txt" 2>&1
      # each suite run's log and JSON report (tests/gpu_runs.py), for reading afterwards
      (cd /tmp/gemm-gpu-tests && find . -path "*suite-runs*" \( -name log.txt -o -name report.json \) \
        | tar czf "$out/gpu-suite-runs.tgz" -T -) 2>/dev/null
      wall=$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$t0" "$EPOCHREALTIME")
      grep -E "^(FAILED|ERROR)" "$out/gpu-tests.txt" | cut -c1-300 | head -30
      python3 tools/lock_log.py "$out/gpu-lock.jsonl" > "$out/gpu-lock.txt" 2>&1; head -25 "$out/gpu-lock.txt"
      python3 tools/gpu_tests_summary.py "$out/gpu-tests.xml" --wall "$wall" | tee "$out/gpu-tests-summary.txt"
      [ -z "${GPU_TESTS:-}" ] || echo "  (only GPU_TESTS=$GPU_TESTS: not the whole suite)" | tee -a "$out/gpu-tests-summary.txt"
      ;;
    warmup)
      walled 'warm-up target, alone, cold' 400 env GEMM_WARMUP_ALONE=1 python3 -m pytest tests/test_warmup_gpu.py \
        -m gemm_gpu -k inside -v -p no:cacheprovider -rfEs --basetemp /tmp/gemm-warmup-alone > "$out/warmup.txt" 2>&1
      tail -15 "$out/warmup.txt"
      (cd /tmp/gemm-warmup-alone && find . -path "*suite-runs*" \( -name log.txt -o -name report.json \) \
        | tar czf "$out/warmup-runs.tgz" -T -) 2>/dev/null
      ;;
    tests)
      # -v: each result is in tests.txt as it finishes, so a run cut off still says what passed
      walled 'tests -n 8' 540 python3 -m pytest tests -n 8 -v -p no:cacheprovider -rfE --durations=15 \
        --ignore tests/test_untrusted_kernels.py --ignore tests/test_launch_guard.py \
        --ignore tests/test_ecosystems_gpu.py > "$out/tests.txt" 2>&1  # the ecosystems stage runs the examples
      grep -E "^(FAILED|ERROR)|passed|failed" "$out/tests.txt" | tail -15
      ;;
    untrusted)
      gpus=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU" || true)
      walled "untrusted -n ${gpus:-1}" 540 python3 -m pytest tests/test_untrusted_kernels.py tests/test_launch_guard.py \
        -n "${gpus:-1}" -v -p no:cacheprovider -rfE > "$out/untrusted.txt" 2>&1
      grep -E "^(FAILED|ERROR)|passed|failed" "$out/untrusted.txt" | tail -15
      ;;
    ladder)
      walled 'ladder -n 0' 540 python3 -m pytest "${ladder_args[@]}" --gemm-report "$out/ladder.json" > "$out/ladder.txt" 2>&1
      tail -45 "$out/ladder.txt"
      python3 tools/ladder_table.py "$out/ladder.json" | tee "$out/ladder.md"
      ;;
    one)
      walled 'one kernel' 75 python3 -m pytest --gemm-kernel examples/my_kernels.py:tiled -q \
        -p no:cacheprovider --durations=25 2>&1 | tail -40 | tee "$out/one_kernel.txt"
      ;;
    parallel)
      walled 'ladder -n 2' 220 python3 -m pytest "${ladder_args[@]}" -n 2 --gemm-report "$out/ladder_n2.json" > "$out/ladder_n2.txt" 2>&1
      tail -25 "$out/ladder_n2.txt"
      ;;
    followup)
      # What the 2026-11-30 session could not finish on the GPU (about 9 minutes at most).
      walled 'combined untrusted run (test)' 120 python3 -m pytest tests/test_untrusted_kernels.py -k faults_a_hang \
        -v -s -p no:cacheprovider -rfE 2>&1 | tail -30 | tee "$out/combined.txt"
      walled 'ranking at 8192' 120 python3 -m pytest --pyargs conformance -q -p no:cacheprovider \
        -k "speed-warptile or speed-mma-fp16" --gemm-bench-shape 8192 2>&1 | tail -12 | tee "$out/rank8192.txt"
      plot=(); python3 -c "import matplotlib" 2>/dev/null && plot=(--gemm-plot "$out/sweep.png")
      walled 'sweep' 90 python3 -m pytest --gemm-kernel examples/my_kernels.py:tiled -k sweep --gemm-sweep \
        512,1024,2048,1000x1000x1000 "${plot[@]}" -q -p no:cacheprovider 2>&1 | tail -20 | tee "$out/sweep.txt"
      walled 'one kernel with --gemm-ladder' 100 python3 -m pytest --gemm-kernel examples/my_kernels.py:tiled \
        --gemm-ladder -q -p no:cacheprovider 2>&1 | tail -22 | tee "$out/one_ladder.txt"
      ;;
    sizes)
      for size in 2048 8192; do
        walled "ranking at $size" 150 python3 -m pytest --pyargs conformance -q -p no:cacheprovider --gemm-bench-shape $size \
          -k "speed-warptile or speed-mma-fp16 or speed-wgmma or speed-cublas" 2>&1 | grep -E "^ +[0-9]+ |rank|passed|failed"
      done | tee "$out/sizes.txt"
      ;;
    diagnose)
      walled 'fidelity, 4 kernels' 200 python3 tools/fidelity.py --kernels cublas-fp32,warptile,cublas-fp16,mma-fp16 \
        --out "$out/fidelity.json" > /dev/null 2> "$out/fidelity.txt"
      tail -16 "$out/fidelity.txt"
      for i in 1 2; do
        limit 60 ncu --clock-control none --metrics gpu__time_duration.sum python3 bench/cublas_kernels.py 2>&1 \
          | grep -E "Device [0-9]|gpu__time_duration|ERR|rror" | cut -c1-220 | head -14
      done 2>&1 | tee "$out/cublas_kernels.txt"
      walled 'tensor candidates' 150 python3 bench/perf_candidates.py --only mma-fp16,mma-fp16-128x256x32-s4-cs1-lean \
        --sizes 4096 --rounds 3 --out "$out/candidates.json" 2>&1 | tail -14 | tee "$out/candidates.txt"
      ;;
    verdicts)
      # one root cause per kernel: the whole suite on tests/broken and tests/verdicts (~4 min);
      # VERDICT_KERNELS=own_stream,current_stream narrows it; VERDICT_TORCH=1 adds the torch and Triton
      # launchers (tests/verdicts THIRD_PARTY)
      PYTEST_GEMM_VERDICT_KERNELS="${VERDICT_KERNELS:-}" PYTEST_GEMM_TORCH="${VERDICT_TORCH:-}" \
        walled verdicts 420 python3 -m pytest tests/test_verdicts_gpu.py -p no:cacheprovider -q -rfEs \
        --basetemp=/tmp/gemm-verdicts > "$out/verdicts.txt" 2>&1
      cp /tmp/gemm-verdicts/verdicts0/report.json "$out/verdicts.json" 2>/dev/null
      tail -30 "$out/verdicts.txt"
      ;;
    hang)
      # a hanging student (examples/course carol) graded with default options: under 60 s
      rm -rf /tmp/gemm-hang && mkdir -p /tmp/gemm-hang && cp -r examples/course/submissions/carol /tmp/gemm-hang/
      walled 'hanging student' 120 python3 -m pytest_gemm.grading.gradebook /tmp/gemm-hang --ini examples/course/pytest.ini \
        --out "$out/hang.csv" --json "$out/hang.json" > "$out/hang.txt" 2>&1
      python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['students'][0]; o=json.dumps(s['results']); \
print(s['status'], s['elapsed_s'], s['score'], s['reason']); print('timeouts:', o.count('did not finish'), \
'not run:', o.count('not run: this kernel'))" "$out/hang.json" | tee -a "$out/hang.txt"
      ;;
    scale)
      # 64 kernels, one pytest -n 4 session, speed checks at 4096^3 without the GPU lock: memory at its worst
      walled 'scale, 64 kernels' 200 python3 tools/scale_benchmark.py --no-lock --out "$out/scale" -- -k speed \
        > "$out/scale.txt" 2>&1
      tail -25 "$out/scale.txt"
      ;;
    class)
      # issue 47 (issue 26 before it): a generated class (CLASS_SIZE students, default 100) graded with the course's own
      # configuration (the full suite) and the gradebook's defaults (CLASS_JOBS sets --jobs), then
      # CLASS_SOLO (3) of them one at a time and CLASS_AGAIN (25) a second time
      n="${CLASS_SIZE:-100}"; jobs=(); [ -n "${CLASS_JOBS:-}" ] && jobs=(--jobs "$CLASS_JOBS")
      sched=()
      if [ "${CLASS_SCHEDULER:-local}" = dask ]; then
        # Dask distributed and what it needs beyond the machine's packages, installed apart from them
        if ! python3 -c "import distributed" 2>/dev/null && compgen -G ".whl/distributed-*.whl" > /dev/null; then
          # distributed's other requirements, from .whl/ only where the machine lacks them (its own stay first)
          lacks=()
          for pair in click:click msgpack:msgpack psutil:psutil sortedcontainers:sortedcontainers yaml:pyyaml \
                      jinja2:jinja2 markupsafe:markupsafe fsspec:fsspec packaging:packaging; do
            python3 -c "import ${pair%%:*}" 2>/dev/null || lacks+=($(compgen -G ".whl/${pair#*:}-*.whl"))
          done
          install_apart /tmp/gemm-dask-site .whl/dask-*.whl .whl/distributed-*.whl .whl/tblib-*.whl .whl/zict-*.whl \
            .whl/tornado-*.whl .whl/locket-*.whl .whl/partd-*.whl .whl/cloudpickle-*.whl .whl/toolz-*.whl \
            "${lacks[@]}" 2>&1 | tail -2
          export PYTHONPATH="/tmp/gemm-dask-site${PYTHONPATH:+:$PYTHONPATH}"
        fi
        python3 -c "import distributed; print('dask: distributed', distributed.__version__)" 2>&1 | tail -1
        sched=(--scheduler dask --compare-local)
      fi
      # the seed of the harness's CuPy kernels for confined students: CLASS_SEED=on or off against auto (A/B)
      seed=(); [ -n "${CLASS_SEED:-}" ] && seed=(env "PYTEST_GEMM_HARNESS_SEED=$CLASS_SEED")
      rm -rf /tmp/gemm-class
      walled "class of $n" "${CLASS_LIMIT:-570}" "${seed[@]}" python3 tools/class_benchmark.py --students "$n" "${jobs[@]}" \
        --solo "${CLASS_SOLO:-3}" --again "${CLASS_AGAIN:-25}" --deadline "$(( ${CLASS_LIMIT:-570} - 15 ))" \
        "${sched[@]}" --lock-log --out /tmp/gemm-class > "$out/class.txt" 2>&1
      cp /tmp/gemm-class/class.json /tmp/gemm-class/solo.json /tmp/gemm-class/again.json \
        /tmp/gemm-class/local.json "$out/" 2>/dev/null
      # the GPU lock's holds of the class pass, kept even when the stage's limit cut the run
      if cp /tmp/gemm-class/class-lock.jsonl "$out/" 2>/dev/null && [ ! -f "$out/class.json" ]; then
        python3 tools/lock_log.py "$out/class-lock.jsonl" >> "$out/class.txt" 2>&1
      fi
      grep -E "^(CLASS|LOCAL|SOLO|AGAIN|RESULT|TARGETS|WHERE|GPU LOCK|gradebook: harness caches)|^  (MET|MISSED|correct|slow|wrong|hanging|faulting|alone|draining|held|shared|presumed)|DIFFERS|OUT OF" \
        "$out/class.txt" | tail -45
      ;;
    class-ab)
      IFS=';' read -ra settings <<< "${CLASS_AB:-}"
      if [ ${#settings[@]} -lt 2 ]; then
        echo "class-ab: CLASS_AB names ${#settings[@]} setting(s); give two or more, separated by ';'" \
          "(e.g. CLASS_AB=\"PYTEST_GEMM_CUDA_WAIT=auto;PYTEST_GEMM_CUDA_WAIT=blocking\")"
        continue
      fi
      GEMM_SESSION_NESTED=1 OUT="$out/ab-course" bash "$0" course | grep -E "^\[|MET|MISSED" | tail -3
      i=0
      for setting in "${settings[@]}"; do
        i=$((i + 1)); read -ra words <<< "$setting"
        echo "class-ab $i of ${#settings[@]}: ${setting:-(the environment as it is)}"
        env "${words[@]}" GEMM_SESSION_NESTED=1 OUT="$out/ab-$i" CLASS_SOLO=0 CLASS_AGAIN=0 \
          CLASS_LIMIT="${CLASS_LIMIT:-250}" bash "$0" class | grep -E "^CLASS|^GPU LOCK|^  (held|draining|shared|correct)"
      done
      ;;
    course)
      # the course example exactly as its README gives it, with the gradebook's defaults: <= 60 s (issue 47)
      walled 'course example' 300 python3 tools/course_benchmark.py --out /tmp/gemm-course > "$out/course.txt" 2>&1
      cp /tmp/gemm-course/g.json "$out/course.json" 2>/dev/null
      grep -E "^\[|^  " "$out/course.txt" | tail -14
      ;;
    cutlass)
      # CUTLASS_PROFILE: the kernels Nsight Compute looks at (rung or candidate names, or specs);
      # CUTLASS_SUITE=0 skips the suite, CUTLASS_PROFILE="" the profiles
      lib=bench/cutlass_sm80/build/libcutlass_sm80.so
      if [ ! -f "$lib" ]; then
        echo "cutlass: $lib is missing: build it with bench/cutlass_sm80/build.sh and carry bench/cutlass_sm80/build"
        continue
      fi
      if [ "${CUTLASS_SUITE:-1}" != 0 ]; then
        walled 'CUTLASS sm80 builds and mma-fp16, full suite, -n 4' 300 python3 -m pytest \
          --gemm-kernel bench/cutlass_sm80/launchers.py:ALL --gemm-kernel reference_kernels:mma_fp16 \
          --gemm-timeout 20 -n 4 -p no:cacheprovider -q -rfE --gemm-report "$out/cutlass.json" > "$out/cutlass.txt" 2>&1
        grep -E "passed|failed|error" "$out/cutlass.txt" | tail -12
        python3 tools/ladder_table.py "$out/cutlass.json" | tee "$out/cutlass.md"
      fi
      metrics=sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum
      metrics+=',regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
      metrics+=,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum
      metrics+=,lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct
      for k in ${CUTLASS_PROFILE-mma-fp16 bench/cutlass_sm80/launchers.py:ALL:256x128x64_s3}; do
        echo "=== ncu: $k"
        limit 90 ncu --clock-control none --kernel-name regex:'gemm_|Kernel' --launch-skip 1 --launch-count 1 \
          --section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis \
          --section MemoryWorkloadAnalysis --section InstructionStats --section LaunchStats --section Occupancy \
          --metrics "$metrics" \
          python3 bench/profile_kernel.py --kernel "$k" --size 4096 2>&1 | grep -v "^==PROF==" | cut -c1-160
      done > "$out/cutlass_ncu.txt" 2>&1
      grep -E "=== ncu|Duration|SM Frequency|hmma|stalled|wavefronts|conflicts|lts__|dram__|Issued Ipc|Registers Per" \
        "$out/cutlass_ncu.txt" | grep -vE " 0$" | head -120
      ;;
    ecosystems)
      eco=(-p no:cacheprovider -q -rfE)
      # 1. Triton's tutorial matmul with its autotuner, fp16 and fp32 inputs, default options, Triton's
      #    caches empty (compiling and tuning included): the wall time of the full default suite
      specs=$(python3 tools/ecosystems.py --specs --only triton)
      if [ -n "${specs// /}" ]; then
        walled 'Triton tutorial fp16 + fp32, default suite, cold caches, -n 2' 240 \
          env TRITON_CACHE_DIR="$(mktemp -d /tmp/gemm-triton-XXXX)" python3 -m pytest $specs -n 2 "${eco[@]}" --gemm-report "$out/eco_triton.json" > "$out/eco_triton.txt" 2>&1
        grep -E "autotune|passed|failed" "$out/eco_triton.txt" | tail -6
      fi
      # 2. CUDA C, CuPy RawModule, cupy.matmul, the torch extension (built on first import), KernelBench
      specs=$(python3 tools/ecosystems.py --specs --only rest)
      walled 'CUDA C, CuPy, torch extension, KernelBench, -n 4' 180 python3 -m pytest $specs -n 4 "${eco[@]}" \
        --gemm-report "$out/eco_rest.json" > "$out/eco_rest.txt" 2>&1
      grep -E "passed|failed" "$out/eco_rest.txt" | tail -4
      # 3. Numba: numba-cuda (<= 0.30.4) registers np.row_stack, which NumPy 2.5 removed: with the NumPy
      #    wheel carried in .whl/ (numpy 2.4.x) installed apart and put first on PYTHONPATH for this run only
      site=""
      if compgen -G ".whl/numpy-*.whl" > /dev/null; then
        install_apart /tmp/gemm-numba-site .whl/numpy-*.whl && site=/tmp/gemm-numba-site
      else
        echo "numba: no .whl/numpy-*.whl carried: the machine's own NumPy"
      fi
      PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" python3 -c "import numpy, importlib.metadata as m; \
print('numba run: numpy', numpy.__version__, '| numba', m.version('numba'), '| numba-cuda', m.version('numba-cuda'))" 2>&1 | tail -1
      specs=$(python3 tools/ecosystems.py --specs --only numba)
      if [ -n "${specs// /}" ]; then
        walled 'Numba shared-memory matmul' 120 env PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" python3 -m pytest $specs \
          "${eco[@]}" --gemm-report "$out/eco_numba.json" > "$out/eco_numba.txt" 2>&1
        grep -E "passed|failed|rror" "$out/eco_numba.txt" | tail -4
      fi
      python3 tools/ecosystems.py --check "$out"/eco_triton.json "$out"/eco_rest.json "$out"/eco_numba.json \
        | tee "$out/ecosystems.md"
      ;;
    perf)
      {
        limit 90 python3 bench/edge_cost.py --out "$out/edge_cost.json" 2>&1 | tail -20
        limit 150 python3 tools/fidelity.py --kernels cublas-fp32,warptile --out "$out/fidelity.json" 2>&1 | tail -20
        limit 250 python3 bench/perf_candidates.py --deadline-s 170 --out "$out/candidates.json" 2>&1 | tail -40
      } | tee "$out/perf.txt"
      ;;
  esac
  stop_leftovers
done
echo "=== done ($(date +%T))"
