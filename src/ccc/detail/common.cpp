#include "ccc/detail/common.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "core/error.hpp"

namespace dsp::detail {

int64_t check_counts(const std::vector<int64_t>& counts, int size, const char* op,
                     const char* what) {
  DSP_CHECK_ARG(counts.size() == static_cast<size_t>(size),
                "{}: {} has {} entries, expected one per rank ({})", op, what, counts.size(), size);
  int64_t total = 0;
  for (size_t p = 0; p < counts.size(); ++p) {
    DSP_CHECK_ARG(counts[p] >= 0, "{}: {}[{}] = {} is negative", op, what, p, counts[p]);
    total += counts[p];
  }
  return total;
}

void check_count(int64_t count, const char* op) {
  DSP_CHECK_ARG(count >= 0, "{}: count {} is negative", op, count);
}

void check_root(int root, int size, const char* op) {
  DSP_CHECK_ARG(root >= 0 && root < size, "{}: root {} is not a rank of a world of size {}", op,
                root, size);
}

void check_reduce_dtype(DType dtype, const std::string& backend) {
  switch (dtype) {
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kInt32:
    case DType::kInt64:
      return;
    default:
      break;
  }
  DSP_THROW_T(NotSupported, "{} does not support all_reduce of {}", backend, dtype_name(dtype));
}

std::chrono::milliseconds default_timeout(const CommOptions& opts) {
  const char* env = std::getenv("DSP_COMM_TIMEOUT");
  if (!env || !*env) return opts.timeout;
  char* end = nullptr;
  errno = 0;
  double s = std::strtod(env, &end);
  DSP_CHECK_ARG(errno == 0 && end != env && *end == '\0' && std::isfinite(s) && s >= 0,
                "DSP_COMM_TIMEOUT='{}' is not a non-negative number of seconds", env);
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(s * 1000.0)));
}

void CounterBook::add_all_to_all(const std::vector<int64_t>& send_counts,
                                 const std::vector<int64_t>& recv_counts, size_t elem) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t p = 0; p < c_.bytes_sent.size(); ++p) {
    c_.bytes_sent[p] += static_cast<uint64_t>(send_counts[p]) * elem;
    c_.bytes_recv[p] += static_cast<uint64_t>(recv_counts[p]) * elem;
  }
  ++c_.ops;
}

void CounterBook::add_symmetric(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t p = 0; p < c_.bytes_sent.size(); ++p) {
    c_.bytes_sent[p] += bytes;
    c_.bytes_recv[p] += bytes;
  }
  ++c_.ops;
}

void CounterBook::add_broadcast(uint64_t bytes, int root, int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  if (rank == root) {
    for (auto& b : c_.bytes_sent) b += bytes;
  }
  c_.bytes_recv[root] += bytes;
  ++c_.ops;
}

void CounterBook::add_empty() {
  std::lock_guard<std::mutex> lock(mu_);
  ++c_.ops;
}

CommCounters CounterBook::get() const {
  std::lock_guard<std::mutex> lock(mu_);
  return c_;
}

void CounterBook::reset() {
  std::lock_guard<std::mutex> lock(mu_);
  reset_locked(static_cast<int>(c_.bytes_sent.size()));
}

void CounterBook::reset_locked(int size) {
  c_.bytes_sent.assign(size, 0);
  c_.bytes_recv.assign(size, 0);
  c_.ops = 0;
}

}  // namespace dsp::detail
