#!/usr/bin/env bash
# The GPU kit: built and checked here (no GPU), run on a lent GPU machine in one call.
#
#   here:    scripts/gpu/check.sh bundle     builds .gpu-kit/ (see below); ~30 min on 2 cores cold
#            scripts/gpu/check.sh --dry-run  the device path as far as a CPU can run it
#   device:  run(command="bash scripts/gpu/check.sh run", carry=[".gpu-kit"], timeout_s=600)
#   device, fallback (a kit that cannot load): "bash scripts/gpu/check.sh build-run" builds on the
#            device from the kit's -dev packages (4-6 min), then runs.
#
# .gpu-kit/ (ignored; with the tree under 56 MiB): bin.tar.xz (dsp and the CUDA test binaries,
# built for sm_90 against PyPI's torch 2.11 cu130 and NCCL from its wheel, the shared CUDA runtime,
# stripped, no RPATH, tests/data read relative to the repository root), debs/ (the Debian runtime
# libraries the device image lacks: OpenMPI with mpiexec.openmpi, PMIx, hwloc, METIS, fmt, ...),
# debs-dev/ (headers for the fallback build) and KIT.txt (what it was built from).
#
# `run` (at most DSP_KIT_DEADLINE s, default 480; no step starts after it, each step's timeout is
# cut to what is left): first refuses a kit built from other sources than the tree's (KIT.txt's
# `source:` digest, scripts/gpu/kit/common.sh source_digest), then the environment (driver, GPU,
# read-only registration, `mpiexec -n 2`), the sampler, feature and trainer backends against the
# CPU, then performance first on a products-sized community graph with every row cached
# (sampling with and without captured graphs, the emulated device's round trips asserted equal to
# the GPU's, the gather against the device copy, two epochs of `dsp train --device cuda`, the
# pipeline on and off, nsys of 20 steps where the image has it), then the correctness groups, Cora,
# link prediction, typed graphs, inference, the remaining benchmarks, Python, compute-sanitizer,
# until the deadline. A group that ran zero tests fails. Every row is appended to $OUT/rows.txt as
# it is made; the summary table comes last; $OUT gets summary.txt and logs.tar.gz (every log and
# JSON). The bundle carries a pip wheel only with DSP_KIT_WHEEL=1.
#
# `--dry-run`: in a private mount namespace where the system's OpenMPI, ssh and rsh are hidden,
# unpacks the kit exactly as the device does, runs `mpiexec -n 2` from it, lists every binary's
# tests from another directory, then `run` itself (GPU steps report "no GPU"; dsp train and the
# benchmarks on the CPU through the kit's mpiexec), and checks that every shared library any
# process loaded came from the kit, torch, CUDA or the C/C++ runtime, that no path of this machine
# is in a binary, and the size.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$here"
KIT="$here/.gpu-kit"
KR="${DSP_KIT_ROOT:-/tmp/dsp-kit}"          # where the kit is unpacked
MAX_KIT_MB=56
bins=(dsp test_cuda test_csp_backends_cuda test_layout_backends_cuda test_csp_mpi_cuda
      test_layout_mpi_cuda test_nccl test_cuda_train)
runtime_debs=(openmpi-bin openmpi-common libopenmpi3 libpmix2 libhwloc15 libevent-core-2.1-7
              libevent-pthreads-2.1-7 libmunge2 libmetis5 libfmt9 libgomp1 libnuma1 libudev1
              libibverbs1 libnl-3-200 libnl-route-3-200 libfabric1 libucx0 libpsm2-2
              libpsm-infinipath1 librdmacm1 libgfortran5 libquadmath0)
dev_debs=(libfmt-dev nlohmann-json3-dev libcli11-dev librandom123-dev libgtest-dev libmetis-dev
          libopenmpi-dev libhwloc-dev libevent-dev zlib1g-dev)
step="${1:-}"

source "$here/scripts/gpu/kit/common.sh"

case "$step" in
  bundle) source "$here/scripts/gpu/kit/bundle.sh"; bundle ;;
  run) source "$here/scripts/gpu/kit/run.sh"; run_kit ;;
  build-run)
    source "$here/scripts/gpu/kit/bundle.sh"; source "$here/scripts/gpu/kit/run.sh"
    build_on_device || { table; exit 1; }
    run_kit ;;
  --dry-run) source "$here/scripts/gpu/kit/dry_run.sh"; dry_run ;;
  --dry-run-inner) source "$here/scripts/gpu/kit/dry_run.sh"; source "$here/scripts/gpu/kit/run.sh"
    dry_run_inner ;;
  *) echo "usage: scripts/gpu/check.sh bundle|--dry-run|run|build-run" >&2; exit 2 ;;
esac
