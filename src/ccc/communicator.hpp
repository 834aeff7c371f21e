#pragma once
// The collective communication interface every worker uses (through the coordinator, later).
// Backends: "self" (world of one, no MPI), "mpi" (OpenMPI; all MPI calls of a rank run on one
// communication executor thread), "nccl" (CUDA build only, device buffers), "<host>-staged"
// (device buffers over a host backend, staged through host memory: staged_communicator.hpp).
//
// Unsupported combinations throw NotSupported("<backend> does not support <what>"). A collective
// that has not completed within its timeout aborts the whole job with a message naming the op and
// the ranks that did not arrive.
//
// What a backend states about itself, so callers (the coordinator above all) need no special
// cases:
//  * memory_space(): where op buffers must live (host: self, mpi; device: nccl, staged), unless
//    an op says its buffers are host memory (OpOptions::host_buffers).
//  * completion: host backends complete every op before returning; a stream-ordered backend
//    (nccl) only enqueues it, and synchronize() waits for every op issued so far. Work that reads
//    a result on the host must call synchronize() first unless completes_on_return().
//  * executor(): the one thread every call of the backend must be made from (mpi: the process's
//    communication executor), or null when any thread may call it.
//  * abort_job(): ends the whole job from any thread of any rank, in bounded time, even while
//    peers wait in collectives this rank will never join.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.hpp"

namespace dsp {

class CommExecutor;

enum class ReduceOp { kSum, kMax, kMin };
enum class MemorySpace { kHost, kDevice };
const char* reduce_op_name(ReduceOp op);

struct CommOptions {
  // Default per-op timeout; 0 disables. Overridden by DSP_COMM_TIMEOUT (seconds) when set.
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
};

struct OpOptions {
  std::chrono::milliseconds timeout{0};  // 0: the communicator's default
  std::string label;                     // names the op in timeout messages and logs
  // The op's buffers are host memory whatever memory_space() says. A device-space backend moves
  // them on its host path (nccl: its bootstrap communicator; staged: its host communicator);
  // host backends ignore it. For small control payloads (counts, flags, scalars, slots) that
  // a device-space channel carries beside its device data.
  bool host_buffers = false;
};

// Bytes moved, per peer, since construction or the last reset, counted when an op completes. Bytes
// a rank "sends" to itself are counted under its own index (they are copied, not transmitted).
// The payload a rank logically hands to / gets from each peer, whatever algorithm the backend
// uses underneath (n = count * dtype size):
//   exchange_counts  sent[p] += 8, recv[p] += 8 for every p (it is an all-to-all of one int64)
//   all_to_all_v     sent[p] += send_counts[p] * elem, recv[p] += recv_counts[p] * elem
//   all_reduce       sent[p] += n, recv[p] += n for every p (each contribution reaches every rank)
//   all_gather       sent[p] += n, recv[p] += n for every p
//   broadcast        root: sent[p] += n for every p; every rank, root included: recv[root] += n
//   barrier          no bytes
// `ops` counts every completed op, barriers and count exchanges included.
struct CommCounters {
  std::vector<uint64_t> bytes_sent;  // [size]
  std::vector<uint64_t> bytes_recv;  // [size]
  uint64_t ops = 0;
  uint64_t total_sent() const;
  uint64_t total_recv() const;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;

  // All-to-all of one int64 per peer: recv_counts[p] = send_counts_of_p[rank()].
  virtual std::vector<int64_t> exchange_counts(const std::vector<int64_t>& send_counts,
                                               const OpOptions& o = {}) = 0;
  // Variable all-to-all: `send` holds send_counts[p] elements for each peer p in rank order;
  // `recv` (caller-allocated, sum(recv_counts) elements) receives recv_counts[p] from each p.
  virtual void all_to_all_v(const void* send, const std::vector<int64_t>& send_counts, void* recv,
                            const std::vector<int64_t>& recv_counts, DType dtype,
                            const OpOptions& o = {}) = 0;
  // In-place reduction over `count` elements (float32, float64, int32, int64).
  virtual void all_reduce(void* buf, int64_t count, DType dtype, ReduceOp op,
                          const OpOptions& o = {}) = 0;
  virtual void broadcast(void* buf, int64_t count, DType dtype, int root,
                         const OpOptions& o = {}) = 0;
  // recv holds size() * count elements: rank p's `count` elements at offset p * count.
  virtual void all_gather(const void* send, void* recv, int64_t count, DType dtype,
                          const OpOptions& o = {}) = 0;
  virtual void barrier(const OpOptions& o = {}) = 0;

  virtual CommCounters counters() const = 0;
  virtual void reset_counters() = 0;

  virtual MemorySpace memory_space() const { return MemorySpace::kHost; }
  virtual bool completes_on_return() const { return true; }
  // Waits until every op this communicator has issued has completed (a no-op where ops complete
  // on return).
  virtual void synchronize(const OpOptions& /*o*/ = {}) {}
  virtual CommExecutor* executor() { return nullptr; }
  // Prints "dsp: <message>" once on stderr and ends the job (every rank); never returns. The
  // default ends this process with exit code 1, which ends a job of one.
  [[noreturn]] virtual void abort_job(const std::string& message);

  // Host convenience: count exchange + payload in one call; recv_counts optional. Host vectors,
  // so on any backend (the payload is marked host_buffers).
  template <class T>
  std::vector<T> all_to_all_v(const std::vector<T>& send, const std::vector<int64_t>& send_counts,
                              std::vector<int64_t>* recv_counts = nullptr,
                              const OpOptions& o = {}) {
    std::vector<int64_t> rc = exchange_counts(send_counts, o);
    int64_t total = 0;
    for (auto c : rc) total += c;
    std::vector<T> out(static_cast<size_t>(total));
    OpOptions host = o;
    host.host_buffers = true;
    all_to_all_v(send.data(), send_counts, out.data(), rc, dtype_of<T>(), host);
    if (recv_counts) *recv_counts = std::move(rc);
    return out;
  }
};

// backend: "auto" (mpi when launched by mpirun/mpiexec, else self), "self", "mpi", or a name
// given to register_communicator_backend. "nccl" communicators are made by
// make_nccl_communicator (CUDA build), bootstrapped over MPI. The backends by name:
// ccc/registry.cpp.
std::unique_ptr<Communicator> make_communicator(const std::string& backend = "auto",
                                                const CommOptions& opts = {});

// A host backend defined outside ccc (the Python module's "torch": collectives over a
// torch.distributed process group, src/python/pg_communicator.hpp). Every call of the factory
// makes one more communicator over the same ranks; ranks call it in the same order, so the n-th
// communicator of every rank is one group. Registering a name again replaces its factory; the
// built-in names (auto, self, mpi, nccl) cannot be registered.
using CommunicatorFactory = std::function<std::unique_ptr<Communicator>(const CommOptions&)>;
void register_communicator_backend(const std::string& name, CommunicatorFactory factory);
// True for "auto", "self", "mpi" and registered names: what make_communicator accepts.
bool is_communicator_backend(const std::string& name);
// "auto|self|mpi" plus the registered names, for messages.
std::string communicator_backend_names();
// True when this process was started by an MPI launcher (OMPI_/PMI_/PMIX_ environment).
bool launched_by_mpi();

}  // namespace dsp
