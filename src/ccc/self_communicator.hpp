#pragma once
// A world of one: every collective is a copy (or nothing), no MPI. Used when the process was not
// started by an MPI launcher, so single-process runs and unit tests need no mpirun.
#include "ccc/communicator.hpp"
#include "ccc/detail/common.hpp"

namespace dsp {

class SelfCommunicator : public Communicator {
 public:
  explicit SelfCommunicator(const CommOptions& opts = {});
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "self"; }

  std::vector<int64_t> exchange_counts(const std::vector<int64_t>& send_counts,
                                       const OpOptions& o = {}) override;
  void all_to_all_v(const void* send, const std::vector<int64_t>& send_counts, void* recv,
                    const std::vector<int64_t>& recv_counts, DType dtype,
                    const OpOptions& o = {}) override;
  void all_reduce(void* buf, int64_t count, DType dtype, ReduceOp op,
                  const OpOptions& o = {}) override;
  void broadcast(void* buf, int64_t count, DType dtype, int root, const OpOptions& o = {}) override;
  void all_gather(const void* send, void* recv, int64_t count, DType dtype,
                  const OpOptions& o = {}) override;
  void barrier(const OpOptions& o = {}) override;

  CommCounters counters() const override { return book_.get(); }
  void reset_counters() override { book_.reset(); }

  using Communicator::all_to_all_v;

 private:
  detail::CounterBook book_{1};
};

// The factory of the "self" backend (ccc/registry.cpp: make_communicator by name).
std::unique_ptr<Communicator> make_self_communicator(const CommOptions& opts);

}  // namespace dsp
