# shellcheck shell=bash
# `scripts/gpu/check.sh run` (sourced by gpu/check.sh): the kit's one call on the device. Also run
# by `--dry-run` here with DSP_KIT_DRY=1 (DRY), where a step that needs a GPU must report "no GPU".

gtest_counts() {  # LOG -> "<passed> <failed> <skipped>", summed over a (multi-rank) gtest log
  local p f s plain
  plain="$(sed -E 's/\x1b\[[0-9;]*m//g' "$1")"  # colour codes, should a rank still print them
  p=$(grep -oE '\[  PASSED  \] [0-9]+ test' <<<"$plain" | grep -oE '[0-9]+' | awk '{s+=$1} END {print s+0}')
  f=$(grep -cE '^\[  FAILED  \] [A-Za-z]' <<<"$plain")
  s=$(grep -oE '\[  SKIPPED \] [0-9]+ test' <<<"$plain" | grep -oE '[0-9]+' | awk '{s+=$1} END {print s+0}')
  echo "${p:-0} ${f:-0} ${s:-0}"
}

# not_started NAME: true (and a row) when the deadline leaves no time to start a step.
not_started() {
  (($(left) >= 5)) && return 1
  row "$1" FAIL "not started: the ${DSP_KIT_DEADLINE:-480} s deadline passed"
  status=1
}

# group NAME LOG SECONDS cmd...: a gtest group; fails on a non-zero exit (77: skipped), a failed
# test, a timeout, or zero tests run (on the device; in the dry run that is what must happen).
group() {
  local name=$1 log=$2 secs=$3 t p f s rc detail
  shift 3
  not_started "$name" && return
  t=$(date +%s)
  timed "$secs" "$@" >"$LOGS/$log" 2>&1
  rc=$?
  read -r p f s < <(gtest_counts "$LOGS/$log")
  detail="$p passed, $f failed, $s skipped, $(elapsed "$t")"
  if ((rc == 124 || rc == 137)); then
    row "$name" FAIL "timed out after $secs s ($detail), see $log"; status=1
  elif ((rc != 0 && rc != 77 || f != 0)); then
    row "$name" FAIL "exit $rc, $detail, see $log"; status=1
    grep -E '^\[  FAILED  \]|Failure|rror' "$LOGS/$log" | head -n 8
  elif ((p == 0)); then
    if ((DRY)); then row "$name" skip "no GPU: nothing ran, as it must here"
    else row "$name" FAIL "ran zero tests ($s skipped), see $log"; status=1; fi
  else
    row "$name" ok "$detail"
  fi
}

# cmd_step NAME LOG SECONDS cmd...: a command that must exit 0.
cmd_step() {
  local name=$1 log=$2 secs=$3 t rc
  shift 3
  not_started "$name" && return 1
  t=$(date +%s)
  timed "$secs" "$@" >"$LOGS/$log" 2>&1
  rc=$?
  ((rc == 0)) && return 0
  row "$name" FAIL "exit $rc$( ((rc == 124)) && echo " (timed out after $secs s)"), see $log"
  tail -n 5 "$LOGS/$log"
  status=1
  return 1
}

# The kit against the tree it runs in: the digest of the sources it was built from (KIT.txt) must
# be the tree's, else the run stops here (a kit of an older commit measures old code).
kit_matches_tree() {
  local built mine commit
  built="$(sed -n 's/^source: //p' "$KIT/KIT.txt" 2>/dev/null)"
  commit="$(sed -n 's/^commit: //p' "$KIT/KIT.txt" 2>/dev/null)"
  mine="$(source_digest)"
  if [[ -z "$built" || "$built" != "$mine" ]]; then
    row kit FAIL "built from ${commit:-?} (sources ${built:-unrecorded}), the tree's sources are $mine: rebuild it (scripts/gpu/check.sh bundle)"
    status=1
    return 1
  fi
  row kit ok "commit $commit, sources $mine, $(sed -n 's/^built: //p' "$KIT/KIT.txt")"
}

preamble() {
  local gpu b n=0 listed=0 rc label line
  nvidia-smi >"$LOGS/nvidia-smi.txt" 2>&1 || echo "nvidia-smi: not found or failed" >>"$LOGS/nvidia-smi.txt"
  if gpu="$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null)"; then
    row GPU ok "$gpu"
  elif ((DRY)); then row GPU skip "no GPU (dry run)"
  else row GPU FAIL "nvidia-smi: $(head -1 "$LOGS/nvidia-smi.txt")"; status=1; fi
  if cmd_step "mpiexec -n 2 hostname" mpiexec.log 30 "$MPIEXEC" -n 2 hostname; then
    row "mpiexec -n 2 hostname" ok "$(sort -u "$LOGS/mpiexec.log" | paste -sd ' ') ($(wc -l <"$LOGS/mpiexec.log") lines)"
  fi
  # Every binary loads with the kit's library path and lists its tests, from another directory
  # (a CUDA-only MPI suite exits 77 before listing when no GPU is visible: it loaded and ran).
  for b in "${bins[@]}"; do
    [[ $b == dsp ]] && continue
    n=$((n + 1))
    (cd /tmp && timed 30 "$KR/bin/$b" --gtest_list_tests) >"$LOGS/list_$b.log" 2>&1
    rc=$?
    if ((rc == 0 || DRY && rc == 77)); then
      listed=$((listed + $(grep -cE '^  ' "$LOGS/list_$b.log")))
    else
      row "load $b" FAIL "exit $rc: $(grep -m1 -E 'error|not found' "$LOGS/list_$b.log")"; status=1
    fi
  done
  (cd /tmp && timed 30 "$KR/bin/dsp" --help) >"$LOGS/dsp_help.log" 2>&1 ||
    { row "load dsp" FAIL "$(head -1 "$LOGS/dsp_help.log")"; status=1; }
  row "binaries load ($n tests + dsp)" ok "$listed tests listed"
  group "host registration" registration.log 60 "$KR/bin/test_cuda" --gtest_filter='CudaMemory.*'
  # lines test_cuda prints as "<label>: ...", one row each
  for label in "read-only host registration supported" "NUMA nodes" "staged uploads"; do
    line="$(grep -m1 -oE "$label: .*" "$LOGS/registration.log")"
    if [[ -n "$line" ]]; then row "  $label" "" "${line#"$label: "}"; fi
  done
}

# The sampler and feature backends against the CPU's: what the performance rows measure is right.
backend_groups() {
  group "sampler backends vs CPU" csp_backends.log 180 "$KR/bin/test_csp_backends_cuda"
  group "feature backends vs features[ids]" layout_backends.log 180 "$KR/bin/test_layout_backends_cuda"
  group "trainer: no host sync a step, GPU = CPU" cuda_trainer.log 120 "$KR/bin/test_cuda_train" \
    --gtest_filter='CudaTrainer.*'
}

test_groups() {
  local np
  group "test_cuda (RNG)" test_cuda.log 60 "$KR/bin/test_cuda" --gtest_filter='-CudaMemory.*'
  for np in 1 2; do
    group "P-invariance, $np rank(s) on the GPU" "csp_mpi_np$np.log" 180 "$MPIEXEC" -n $np "$KR/bin/test_csp_mpi_cuda"
    group "gathers, $np rank(s) on the GPU" "layout_mpi_np$np.log" 180 "$MPIEXEC" -n $np "$KR/bin/test_layout_mpi_cuda"
  done
  group "NCCL conformance, 1 rank" nccl.log 90 "$MPIEXEC" -n 1 "$KR/bin/test_nccl"
  for np in 1 2; do  # the MPI transport of device buffers (pinned staging): ranks share the GPU
    group "staged MPI conformance, $np rank(s)" "staged_np$np.log" 90 "$MPIEXEC" -n $np "$KR/bin/test_nccl" --staged
  done
  fault_groups
}

# fault NAME LOG TIMEOUT REGEX cmd...: one fault case of the conformance suite
# (tests/ccc/conformance_faults.hpp) through tests/ccc/faults/expect_fault.sh: exit 1 within 20 s
# and exactly one "dsp:" line, REGEX (tests/CMakeLists.txt's ccc_fault_cuda_* messages); DSP_COMM_TIMEOUT=TIMEOUT.
fault() {
  local name=$1 log=$2 secs=$3 regex=$4 rc
  shift 4
  not_started "$name" && return
  timed 60 env DSP_COMM_TIMEOUT="$secs" tests/ccc/faults/expect_fault.sh 20 "$regex" "$@" >"$LOGS/$log" 2>&1
  rc=$?
  if ((rc == 0)); then row "$name" ok "$(grep -m1 -oE 'exit [0-9]+ after [0-9]+ ms' "$LOGS/$log")"
  elif ((rc == 77 && DRY)); then row "$name" skip "no GPU: nothing ran, as it must here"
  else row "$name" FAIL "exit $rc, see $log"; tail -n 4 "$LOGS/$log"; status=1; fi
}

# The fault cases on the GPU: NCCL's abort (main thread, another thread) at 1 rank, the pinned
# staged transport's abort and timeout at 2 ranks sharing the GPU.
fault_groups() {
  local nccl=("$MPIEXEC" -n 1 "$KR/bin/test_nccl") staged=("$MPIEXEC" --oversubscribe -n 2 "$KR/bin/test_nccl" --staged)
  fault "NCCL abort, 1 rank" fault_nccl_abort.log 60 "dsp: conformance: rank 0 ends the job" \
    "${nccl[@]}" --fault abort 0
  fault "NCCL abort from a thread, 1 rank" fault_nccl_thread.log 60 \
    "dsp: conformance: a thread of rank 0 ends the job" "${nccl[@]}" --fault abort-thread 0
  fault "staged abort, 2 ranks" fault_staged_abort.log 60 "dsp: conformance: rank 1 ends the job" \
    "${staged[@]}" --fault abort 1
  fault "staged timeout, 2 ranks" fault_staged_timeout.log 1 \
    "dsp: collective 'all_reduce' \\(op #2, label 'conformance: rank 1 never arrives'\\) timed out after 1\\.[0-9] s on rank 0; ranks that did not arrive: 1 \\(idle after op #1\\)" \
    "${staged[@]}" --fault timeout 1
}

# `dsp train` on Cora end to end (tests/train/e2e/cora_mpi.sh: the CPU build's band, >= 0.78) at
# 1 rank (NCCL channels) and 2 ranks on the one GPU (staged MPI); on the CPU in the dry run.
cora_steps() {
  local np dev=cuda name
  ((DRY)) && dev=cpu
  for np in 1 2; do
    name="dsp train cora --device $dev, $np rank(s)"
    cmd_step "$name" "cora_e2e_np$np.log" 150 tests/train/e2e/cora_mpi.sh "$KR/bin/dsp" "$MPIEXEC" \
      tests/data $np sage default --device $dev &&
      row "$name" ok "test acc $(awk '/test acc at best/ {print $5}' "$LOGS/cora_e2e_np$np.log" | tail -1)"
  done
  group "Cora in LibTorch on the GPU (sage)" cora_gpu.log 240 "$KR/bin/test_cuda_train" \
    --gtest_filter='Models/CudaCoraAccuracy.*/sage'
  grep -oE 'model=[a-z]+ mean test=[0-9.]+' "$LOGS/cora_gpu.log" | while read -r l; do echo "$l"; done >"$LOGS/cora_gpu_mean.txt"
  [[ -s "$LOGS/cora_gpu_mean.txt" ]] && row "  $(cut -d' ' -f1 "$LOGS/cora_gpu_mean.txt")" "" "$(cut -d' ' -f2- "$LOGS/cora_gpu_mean.txt")"
}

# `dsp train --task link` on the GPU: the embedding table in device memory, edge exclusion in the
# device sampler, at 1 rank (NCCL) and 2 ranks sharing the GPU (staged MPI), on a featureless
# planted graph whose best test Hits@50 (link_hits_bound) the CPU build reaches within 0.9
# (test_train Job/LinkModels); on the CPU in the dry run.
link_steps() {
  local np dev=cuda W=/tmp/dsp-gpu-link name hits bound
  ((DRY)) && dev=cpu
  rm -rf "$W" && mkdir -p "$W"
  cmd_step "link: planted graph" link_gen.log 60 "$KR/bin/dsp" generate community "$W/g" \
    --nodes 5000 --edges 50000 --features 0 --classes 0 --communities 16 \
    --link-split 0.85,0.05,0.10 || return
  bound="$(grep -oE '"link_hits_bound": *[0-9.]+' "$W/g/dataset.json" | grep -oE '[0-9.]+$')"
  for np in 1 2; do
    name="dsp train --task link --device $dev, $np rank(s)"
    cmd_step "$name" "link_np$np.log" 120 "$MPIEXEC" -n $np "$KR/bin/dsp" train "$W/g" --task link \
      --device $dev --fanouts 10,5 --hidden 64 --batch-size $((256 / np)) --epochs 4 --dropout 0 \
      --weight-decay 0 --embedding-lr 0.05 --no-progress || continue
    hits="$(awk '/test hits@50 \(best\)/ {print $4}' "$LOGS/link_np$np.log" | tail -1)"
    local res
    res="$(awk -v h="$hits" -v b="$bound" 'BEGIN {print (h != "" && h >= 0.9 * b) ? "ok" : "FAIL"}')"
    [[ $res == ok ]] || status=1
    row "$name" "$res" \
      "test hits@50 $hits (bound $bound; $(grep -m1 -oE 'in (host|device) memory' "$LOGS/link_np$np.log"))"
  done
}

# `dsp train --model rgcn` on a generated MAG-shaped graph on the GPU: the heterogeneous
# sampler's (node, relation) tasks on the device backend, the per-type feature stores' one gather
# round, the featureless types' embedding rows; 1 rank (NCCL) and 2 ranks sharing the GPU (staged
# MPI), in the CPU build's band (test accuracy >= the generator's bound - 0.06; the CPU gives
# 0.90 of 0.92: test_train HeteroTrain); on the CPU in the dry run.
hetero_steps() {
  local np dev=cuda W=/tmp/dsp-gpu-hetero name acc bound res
  ((DRY)) && dev=cpu
  rm -rf "$W" && mkdir -p "$W"
  cmd_step "hetero: MAG-shaped graph" hetero_gen.log 60 "$KR/bin/dsp" generate hetero "$W/g" \
    --papers 3000 --authors 2000 --institutions 100 --fields 50 -c 5 --feature-dim 32 \
    --train-frac 0.3 --valid-frac 0.1 -s 1 || return
  bound="$(grep -oE '"accuracy_bound": *[0-9.]+' "$W/g/dataset.json" | grep -oE '[0-9.]+$')"
  bound="$(printf '%.3f' "$bound")"
  for np in 1 2; do
    name="dsp train --model rgcn --device $dev, $np rank(s)"
    cmd_step "$name" "hetero_np$np.log" 120 "$MPIEXEC" -n $np "$KR/bin/dsp" train "$W/g" \
      --model rgcn --device $dev --fanouts 10,10 --hidden 64 --batch-size $((128 / np)) \
      --epochs 10 --seed 1 --no-progress || continue
    acc="$(awk '/test acc at best/ {print $5}' "$LOGS/hetero_np$np.log" | tail -1)"
    res="$(awk -v a="$acc" -v b="$bound" 'BEGIN {print (a != "" && a >= b - 0.06) ? "ok" : "FAIL"}')"
    [[ $res == ok ]] || status=1
    row "$name" "$res" "test acc $acc (bound $bound)"
  done
}

# The extension compiled for the device's Python against the kit (py_recipe.py), then
# dsp.Loader(device="cuda") against the CPU Loader (loader_check.py); on the CPU in the dry run.
python_steps() {
  local dev=cuda work
  ((DRY)) && dev=cpu
  cmd_step "python extension for $PY" py_build.log 150 "$PY" scripts/gpu/kit/py_recipe.py build \
    "$KR/py" "$KR/root" "$KR/bin/dsp" "$KR/pyout" || return
  row "python extension for $PY" ok "$(tail -1 "$LOGS/py_build.log")"
  work="$(mktemp -d)"
  cmd_step "dsp.Loader(device=\"$dev\")" loader.log 120 "$PY" scripts/gpu/kit/loader_check.py \
    "$KR/pyout" tests/data/cora "$work" $dev && row "dsp.Loader(device=\"$dev\")" ok "$(tail -1 "$LOGS/loader.log")"
  rm -rf "$work"
  wheel_step "$dev"
}

# The kit's pip wheel (bundle_wheel: `pip install .` with nvcc, for CPython 3.12) installed for $PY
# with pip as a user installs it, then the same Loader check on it. Skipped, and said, where the
# kit has none or $PY is another Python (the dry run's).
wheel_step() {
  local whl tag work
  whl=("$KIT"/wheel/dsp-*.whl)
  if [[ ! -f ${whl[0]} ]]; then row "pip wheel" skip "the kit carries none"; return; fi
  tag="$("$PY" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')"
  if [[ ${whl[0]} != *-"$tag"-* ]]; then row "pip wheel" skip "$(basename "${whl[0]}") is not for $PY ($tag)"; return; fi
  cmd_step "pip install $(basename "${whl[0]}")" wheel_install.log 120 "$PY" -m pip install --no-deps \
    --no-index --target "$KR/pywheel" "${whl[0]}" || return
  work="$(mktemp -d)"
  cmd_step "dsp.Loader(device=\"$1\") from the wheel" wheel_loader.log 120 "$PY" scripts/gpu/kit/loader_check.py \
    "$KR/pywheel" tests/data/cora "$work" "$1" &&
    row "dsp.Loader(device=\"$1\") from the wheel" ok "$(tail -1 "$LOGS/wheel_loader.log")"
  rm -rf "$work"
}

memcheck_steps() {
  local suite t
  for suite in csp_backends layout_backends; do
    not_started "memcheck $suite" && continue
    if ! command -v compute-sanitizer >/dev/null; then
      if ((DRY)); then row "memcheck $suite" skip "no compute-sanitizer here"
      else row "memcheck $suite" FAIL "compute-sanitizer not on PATH"; status=1; fi
      continue
    fi
    t=$(date +%s)
    timed 150 compute-sanitizer --tool memcheck --error-exitcode 3 --leak-check no \
      "$KR/bin/test_${suite}_cuda" --gtest_filter='*cuda*' >"$LOGS/memcheck_$suite.log" 2>&1
    local rc=$? errs
    errs="$(grep -m1 -oE 'ERROR SUMMARY: [0-9]+ errors?' "$LOGS/memcheck_$suite.log")"
    if ((rc == 0)) && [[ -n "$errs" ]]; then row "memcheck $suite" ok "$errs, $(elapsed "$t")"
    else row "memcheck $suite" FAIL "exit $rc, ${errs:-no summary}, see memcheck_$suite.log"; status=1; fi
  done
}

# bench NAME LOG ARGS...: a `dsp bench` run; its headline figures go into the row.
bench() {
  local name=$1 log=$2
  shift 2
  cmd_step "$name" "$log.log" 150 "$KR/bin/dsp" bench "$@" --json "$LOGS/$log.json" &&
    row "$name" ok "$(grep -E 'M sampled edges/s|stages ms/batch|host round trips|FeatureStore::gather|/ d2d|/ h2d|^  (on|off) |speedup' \
      "$LOGS/$log.log" | head -n 5 | tr -s ' ' | cut -c1-110 | paste -sd ';')"
}

# The host round trips a batch costs (core/host_traffic.hpp), as `dsp bench sample` prints them.
round_trips() { grep -m1 -oE '[0-9.]+ blocking syncs, [0-9.]+ device-to-host reads' "$LOGS/$1.log"; }

# The products-sized graph (DSP_GPU_BENCH_NODES / _EDGES) generated and partitioned with every row
# cached (--cache-ratio 1: the rows a GPU rank gathers are all in device memory).
bench_graph() {
  local G=/tmp/dsp-gpu-bench
  cmd_step "bench graph" bench_data.log 200 bash -c "rm -rf $G && '$KR/bin/dsp' generate community $G/ds \
    --nodes ${DSP_GPU_BENCH_NODES:-2.4M} --edges ${DSP_GPU_BENCH_EDGES:-62M} --classes 47 &&
    '$KR/bin/dsp' partition $G/ds $G/p1 --parts 1 --cache-ratio 1" || return 1
  row "bench graph (${DSP_GPU_BENCH_NODES:-2.4M} nodes, ${DSP_GPU_BENCH_EDGES:-62M} edges)" ok "every row cached"
}

# Performance first: sampling with and without captured graphs, the emulated device's round trips
# asserted equal to the GPU's, the gather against the device copy, two epochs of `dsp train`
# (epoch_s from --metrics), the pipeline on and off. On the CPU in the dry run.
perf_steps() {
  local G=/tmp/dsp-gpu-bench dev=cuda th emu gpu short=()
  th=$(nproc)
  ((DRY)) && dev=cpu short=(--warmup 0 --max-steps 4)
  bench_graph || return
  bench "sample $dev" "sample_$dev" sample $G/p1 --device $dev --batches 40 --threads "$th"
  if ((!DRY)); then
    bench "sample cuda, captured graphs" sample_cuda_graphs sample $G/p1 --device cuda --batches 40 \
      --threads "$th" --cuda-graphs
  fi
  # The device path executed on the host counts what the GPU's issues: equal, or the CPU tests
  # that pin the counts do not describe the GPU.
  bench "sample emulated" sample_emulated sample $G/p1 --emulate-device --batches 5 --threads "$th"
  if ((DRY)); then row "round trips: emulated = cuda" skip "no GPU (dry run)"
  else
    emu="$(round_trips sample_emulated)" gpu="$(round_trips sample_cuda)"
    if [[ -n "$emu" && "$emu" == "$gpu" ]]; then row "round trips: emulated = cuda" ok "$gpu"
    else row "round trips: emulated = cuda" FAIL "emulated '$emu', cuda '$gpu'"; status=1; fi
  fi
  bench "gather $dev, every row cached" "gather_$dev" gather $G/p1 --device $dev --threads "$th"
  # The gather dsp train runs on a GPU: the ids a device sampler left in device memory.
  bench "gather $dev resident, every row cached" "gather_resident_$dev" gather $G/p1 --device $dev \
    --threads "$th" --resident
  cmd_step "dsp train --device $dev, 2 epochs" train_bench.log 240 "$KR/bin/dsp" train $G/p1 \
    --device $dev --fanouts 15,10,5 --hidden 256 --batch-size 1024 --epochs 2 --eval sampled \
    --eval-max-nodes 20000 --metrics "$LOGS/train_bench_metrics.jsonl" --no-progress &&
    row "dsp train --device $dev, 2 epochs" ok "epoch_s $(grep -oE '"epoch_s": *[0-9.]+' \
      "$LOGS/train_bench_metrics.jsonl" | grep -oE '[0-9.]+$' | paste -sd ' '); $(grep -m1 -oE 'test acc[^|]*' "$LOGS/train_bench.log" | tail -1)"
  bench "pipeline $dev, on vs off" "pipeline_$dev" pipeline $G/p1 --device $dev --hidden 256 --epochs 1 \
    "${short[@]}"
  nsys_step "$dev"
}

# `nsys profile` of 20 train steps, its CUDA kernel and API summaries (where the image has nsys).
nsys_step() {
  local G=/tmp/dsp-gpu-bench
  [[ $1 == cuda ]] || return
  if ! command -v nsys >/dev/null; then row "nsys, 20 steps" skip "no nsys in the image"; return; fi
  cmd_step "nsys, 20 steps" nsys.log 180 nsys profile -o "$LOGS/steps" --force-overwrite true \
    --stats=true "$KR/bin/dsp" train $G/p1 --device cuda --fanouts 15,10,5 --hidden 256 --epochs 1 \
    --max-steps 20 --eval sampled --eval-max-nodes 1000 --no-progress &&
    row "nsys, 20 steps" ok "$(grep -m3 -E '^ +[0-9.]+ +[0-9]+ ' "$LOGS/nsys.log" | tr -s ' ' | cut -c1-60 | paste -sd ';')"
}

# What the performance rows leave out: the UVA neighbour array, TurboGNN's kernel, the partition's
# default cache (10% of rows) for gather and pipeline.
bench_steps() {
  local G=/tmp/dsp-gpu-bench th
  th=$(nproc)
  ((DRY)) && { row "sample cuda uva, turbo; default cache" skip "no GPU (dry run)"; return; }
  [[ -d $G/p1 ]] || return
  bench "sample cuda uva" sample_cuda_uva sample $G/p1 --device cuda --batches 40 --threads "$th" --topology-memory 0
  bench "sample cuda turbo" sample_cuda_turbo sample $G/p1 --device cuda --batches 40 --threads "$th" --sample-kernel turbo
  cmd_step "partition, default cache" bench_data_10.log 60 "$KR/bin/dsp" partition $G/ds $G/p10 --parts 1 || return
  bench "gather cuda, 10% of rows cached" gather_cuda_10 gather $G/p10 --device cuda --threads "$th"
  bench "pipeline cuda, 10% of rows cached" pipeline_cuda_10 pipeline $G/p10 --device cuda --hidden 256 --epochs 1
}

# Layer-wise inference (dsp embed, as --eval full and dsp predict run it) on the GPU: a Cora
# model's embeddings at 1 and at 2 ranks sharing the GPU compared bit for bit, then every node's
# embedding of the bench graph, timed. On the CPU in the dry run.
inference_steps() {
  local dev=cuda W=/tmp/dsp-gpu-infer G=/tmp/dsp-gpu-bench t same
  ((DRY)) && dev=cpu
  rm -rf "$W" && mkdir -p "$W"
  cmd_step "inference: cora model" infer_cora.log 90 bash -c "'$KR/bin/dsp' convert tests/data/cora \
    $W/cora --from ogb && '$KR/bin/dsp' train $W/cora --device $dev --epochs 2 --fanouts 5,5 \
    --checkpoint-dir $W/ck --no-progress" || return
  cmd_step "dsp embed cora, 1 rank" infer_np1.log 60 "$KR/bin/dsp" embed $W/cora --checkpoint $W/ck/best.pt \
    --out $W/e1 --device $dev || return
  cmd_step "dsp embed cora, 2 ranks" infer_np2.log 90 "$MPIEXEC" -n 2 "$KR/bin/dsp" embed $W/cora \
    --checkpoint $W/ck/best.pt --out $W/e2 --device $dev || return
  same="$("$PY" -c "import numpy as np; a, b = (np.load('$W/' + e + '/embeddings.npy') for e in ('e1', 'e2'))
print(f'{int((a != b).sum())} of {a.size} values differ (max {float(abs(a - b).max()):.3g})')" 2>&1 | tail -1)"
  row "dsp embed cora --device $dev, 1 vs 2 ranks" "$([[ $same == 0\ of* ]] && echo ok || echo note)" "$same"
  [[ -d $G/p1 ]] || return
  # The model comes from a small graph of the same shape (100 features), so that training adds no
  # full-neighbour test of the bench graph (a sampled job tests its best model in full at the end).
  cmd_step "inference: model for the bench graph" infer_bench_train.log 90 bash -c "'$KR/bin/dsp' \
    generate community $W/small --nodes 100k --edges 1M --classes 47 && '$KR/bin/dsp' train $W/small \
    --device $dev --epochs 1 --max-steps 5 --fanouts 15,10,5 --hidden 256 --checkpoint-dir $W/ckb \
    --no-progress" || return
  t=$(date +%s)
  cmd_step "dsp embed bench graph" infer_bench.log 240 "$KR/bin/dsp" embed $G/p1 --checkpoint $W/ckb/best.pt \
    --out $W/eb --device $dev || return
  row "dsp embed bench graph --device $dev" ok "every node's layer-1 embedding (hidden 256) in $(elapsed "$t") \
($(grep -m1 -oE 'an estimated .*' "$LOGS/infer_bench.log"))"
}

finish() {
  local rc=$?
  ((rc != 0)) && status=1
  if [[ -d "${LOGS:-}" ]]; then
    tar -czf "$OUT/logs.tar.gz" -C "$LOGS" . && rm -rf "$LOGS"
  fi
  table | tee "$OUT/summary.txt"
  exit "$status"
}

run_kit() {  # [EXTRA_FN]: more checks run last, before the summary (the dry run's)
  DRY="${DSP_KIT_DRY:-0}"
  OUT="${OUT:-$here/out/gpu-check}"
  LOGS="$OUT/logs"
  rm -rf "$LOGS" && mkdir -p "$LOGS"
  rm -f "$OUT/rows.txt"
  trap finish EXIT
  if [[ -z "${KIT_READY:-}" ]]; then kit_unpack || exit 1; else cp "$KR"/*.log "$LOGS/" 2>/dev/null; fi
  kit_env || exit 1
  [[ -n "${KIT_READY:-}" ]] || kit_matches_tree || exit 1  # built on the device: the tree's
  preamble
  backend_groups
  perf_steps
  test_groups
  cora_steps
  link_steps
  hetero_steps
  inference_steps
  bench_steps
  python_steps
  memcheck_steps
  [[ -n "${1:-}" ]] && "$1"
  return 0
}
