#pragma once
// The end of every multi-rank test binary's main: runs the gtest suite on every rank of `comm`,
// prints from rank 0 only, and fails the process on every rank if any rank failed (a failure on
// one rank must not pass unnoticed because rank 0's own tests passed).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>

#include "ccc/communicator.hpp"

namespace dsp::test {

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
