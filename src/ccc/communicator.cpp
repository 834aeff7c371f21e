#include "ccc/communicator.hpp"

#include <atomic>
#include <cstdio>

#include "core/error.hpp"
#include "core/logging.hpp"

namespace dsp {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
  }
  return "?";
}

uint64_t CommCounters::total_sent() const {
  uint64_t s = 0;
  for (auto b : bytes_sent) s += b;
  return s;
}
uint64_t CommCounters::total_recv() const {
  uint64_t s = 0;
  for (auto b : bytes_recv) s += b;
  return s;
}

void Communicator::abort_job(const std::string& message) {
  static std::atomic<bool> printed{false};
  if (!printed.exchange(true)) {
    std::string line = fmt::format("dsp: {}\n", message);
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
  }
  std::_Exit(1);
}

}  // namespace dsp
