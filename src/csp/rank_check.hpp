#pragma once
// The input check a sampler's collective call makes before its first exchange (CollectiveSampler,
// WalkSampler), so that bad input on one rank ends the call on every rank and none is left
// waiting: this rank's `err` ("" when its input is fine) is thrown as InvalidArgument, and
// "sampler: another rank passed invalid input" on the ranks whose input was fine. `flag` (0 or 1
// a rank) rides in the same all_reduce: the result is 1 when any rank passed 1. One all_reduce of
// host memory when the communicator has more than one rank.
#include <cstdint>
#include <string>

#include "ccc/communicator.hpp"
#include "core/error.hpp"

namespace dsp {

inline int64_t check_on_every_rank(Communicator& comm, const std::string& err, int64_t flag = 0) {
  int64_t v = (err.empty() ? 0 : 2) + flag;
  OpOptions o;
  o.host_buffers = true;
  if (comm.size() > 1) comm.all_reduce(&v, 1, DType::kInt64, ReduceOp::kMax, o);
  if (!err.empty()) DSP_THROW_T(InvalidArgument, "{}", err);
  if (v >= 2) DSP_THROW_T(InvalidArgument, "sampler: another rank passed invalid input");
  return v;
}

}  // namespace dsp
