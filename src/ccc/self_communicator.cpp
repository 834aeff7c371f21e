#include "ccc/self_communicator.hpp"

#include <cstring>

#include "core/error.hpp"

namespace dsp {

SelfCommunicator::SelfCommunicator(const CommOptions& opts) {
  // Validates DSP_COMM_TIMEOUT here too, so a typo fails the same way on every backend.
  (void)detail::default_timeout(opts);
}

std::vector<int64_t> SelfCommunicator::exchange_counts(const std::vector<int64_t>& send_counts,
                                                       const OpOptions&) {
  detail::check_counts(send_counts, 1, "exchange_counts", "send_counts");
  book_.add_symmetric(sizeof(int64_t));
  return send_counts;
}

void SelfCommunicator::all_to_all_v(const void* send, const std::vector<int64_t>& send_counts,
                                    void* recv, const std::vector<int64_t>& recv_counts,
                                    DType dtype, const OpOptions&) {
  detail::check_counts(send_counts, 1, "all_to_all_v", "send_counts");
  detail::check_counts(recv_counts, 1, "all_to_all_v", "recv_counts");
  DSP_CHECK_ARG(send_counts[0] == recv_counts[0],
                "all_to_all_v: rank 0 sends {} elements to itself but expects {}", send_counts[0],
                recv_counts[0]);
  size_t bytes = static_cast<size_t>(send_counts[0]) * dtype_size(dtype);
  if (bytes && send != recv) std::memmove(recv, send, bytes);
  book_.add_all_to_all(send_counts, recv_counts, dtype_size(dtype));
}

void SelfCommunicator::all_reduce(void*, int64_t count, DType dtype, ReduceOp, const OpOptions&) {
  detail::check_count(count, "all_reduce");
  detail::check_reduce_dtype(dtype, "self");
  book_.add_symmetric(static_cast<uint64_t>(count) * dtype_size(dtype));
}

void SelfCommunicator::broadcast(void*, int64_t count, DType dtype, int root, const OpOptions&) {
  detail::check_count(count, "broadcast");
  detail::check_root(root, 1, "broadcast");
  book_.add_broadcast(static_cast<uint64_t>(count) * dtype_size(dtype), 0, 0);
}

void SelfCommunicator::all_gather(const void* send, void* recv, int64_t count, DType dtype,
                                  const OpOptions&) {
  detail::check_count(count, "all_gather");
  size_t bytes = static_cast<size_t>(count) * dtype_size(dtype);
  if (bytes && send != recv) std::memmove(recv, send, bytes);
  book_.add_symmetric(bytes);
}

void SelfCommunicator::barrier(const OpOptions&) { book_.add_empty(); }

std::unique_ptr<Communicator> make_self_communicator(const CommOptions& opts) {
  return std::make_unique<SelfCommunicator>(opts);
}

}  // namespace dsp
