#pragma once
// NCCL backend (CUDA build only, library dsp::ccc_nccl). One NCCL communicator and one CUDA stream
// per instance: the design gives each worker its own, with ops enqueued by the rank's executor.
//
// Semantics differ from the host backends in one way: buffers are device pointers and ops are
// stream-ordered. all_to_all_v, all_reduce, broadcast and all_gather enqueue on stream() and
// return; call synchronize() (or order other streams after stream()) before using the results.
// barrier() waits for everything enqueued so far. exchange_counts() has host vectors on both sides
// and goes through the MPI bootstrap communicator, because its result sizes host allocations; so
// does every op whose OpOptions::host_buffers is set (it completes on return).
//
// Byte counters follow Communicator::counters() exactly and are added when an op is enqueued.
// Timeouts: synchronize()/barrier() poll the stream; past the op timeout, or when NCCL reports an
// asynchronous error, the NCCL communicator is aborted (which unblocks this rank's kernels) and
// CommError names the last op enqueued. NCCL offers no status query, so the rank cannot tell
// which peers did not arrive; the MPI backend's timeout does (docs in mpi_communicator.hpp).
#include <cuda_runtime_api.h>

#include <memory>

#include "ccc/communicator.hpp"

namespace dsp {

class NcclCommunicator : public Communicator {
 public:
  // Collective over `bootstrap` (normally an "mpi" communicator, which must outlive this one):
  // rank 0 creates the NCCL unique id, broadcasts it, and every rank joins on CUDA `device`.
  NcclCommunicator(Communicator& bootstrap, int device, const CommOptions& opts = {});
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override;
  int size() const override;
  std::string backend() const override { return "nccl"; }

  std::vector<int64_t> exchange_counts(const std::vector<int64_t>& send_counts,
                                       const OpOptions& o = {}) override;
  void all_to_all_v(const void* send, const std::vector<int64_t>& send_counts, void* recv,
                    const std::vector<int64_t>& recv_counts, DType dtype,
                    const OpOptions& o = {}) override;
  // float16 is reduced natively by NCCL, in addition to float32, float64, int32 and int64.
  void all_reduce(void* buf, int64_t count, DType dtype, ReduceOp op,
                  const OpOptions& o = {}) override;
  void broadcast(void* buf, int64_t count, DType dtype, int root, const OpOptions& o = {}) override;
  void all_gather(const void* send, void* recv, int64_t count, DType dtype,
                  const OpOptions& o = {}) override;
  void barrier(const OpOptions& o = {}) override;

  CommCounters counters() const override;
  void reset_counters() override;

  // The host convenience overload (host buffers, over the bootstrap communicator).
  using Communicator::all_to_all_v;

  MemorySpace memory_space() const override { return MemorySpace::kDevice; }
  bool completes_on_return() const override { return false; }
  // Waits for every op enqueued so far (see the timeout note above).
  void synchronize(const OpOptions& o = {}) override;

  // Ends the job through the bootstrap communicator (MPI: peers told first, then MPI_Abort), from
  // any thread, also while this rank's kernels wait for peers that will never join them.
  [[noreturn]] void abort_job(const std::string& message) override;

  cudaStream_t stream() const;
  int device() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::unique_ptr<NcclCommunicator> make_nccl_communicator(Communicator& bootstrap, int device,
                                                         const CommOptions& opts = {});

}  // namespace dsp
