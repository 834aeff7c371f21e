#pragma once
// The end of every multi-rank test binary's main: runs the gtest suite on every rank of `comm`,
// prints from rank 0 only, and fails the process on every rank if any rank failed (a failure on
// one rank must not pass unnoticed because rank 0's own tests passed).
#include <gtest/gtest.h>
#ifdef DSP_TEST_CUDA
#include <cuda_runtime_api.h>
#endif

#include <cstdint>
#include <cstdio>

#include "ccc/communicator.hpp"

namespace dsp::test {

// The exit code of a binary that can run nothing here; ctest counts it as skipped
// (SKIP_RETURN_CODE in tests/CMakeLists.txt), never as passed.
inline constexpr int kSkipExitCode = 77;

// A CUDA suite with no CUDA device visible: says so (rank 0) and returns true, and the caller
// exits with kSkipExitCode on every rank. False in the CPU build.
inline bool no_cuda_device(int rank) {
#ifdef DSP_TEST_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) return false;
  if (rank == 0) std::printf("[  SKIPPED ] every test: no CUDA device visible\n");
  return true;
#else
  (void)rank;
  return false;
#endif
}

inline int run_tests_on_all_ranks(Communicator& comm) {
  if (comm.rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int rc = RUN_ALL_TESTS();
  int64_t failed = rc != 0 ? 1 : 0;
  comm.all_reduce(&failed, 1, DType::kInt64, ReduceOp::kSum);
  if (failed && comm.rank() == 0) std::printf("%lld rank(s) failed\n", (long long)failed);
  return failed ? 1 : 0;
}

}  // namespace dsp::test
