#include "ccc/cuda/nccl_communicator.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <exception>
#include <thread>

#include "ccc/detail/common.hpp"
#include "core/cuda/check.hpp"
#include "core/error.hpp"
#include "core/logging.hpp"

#define DSP_NCCL_CHECK(call)                                                               \
  do {                                                                                     \
    ncclResult_t _r = (call);                                                              \
    if (_r != ncclSuccess) {                                                               \
      DSP_THROW_T(::dsp::CommError, "nccl: {} failed: {}", #call, ncclGetErrorString(_r)); \
    }                                                                                      \
  } while (0)

namespace dsp {
namespace {

using Clock = std::chrono::steady_clock;

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::kInt32:
      return ncclInt32;
    case DType::kInt64:
      return ncclInt64;
    case DType::kFloat16:
      return ncclFloat16;
    case DType::kFloat32:
      return ncclFloat32;
    case DType::kFloat64:
      return ncclFloat64;
    case DType::kUInt8:
      return ncclUint8;
    case DType::kInt8:
      return ncclInt8;
    case DType::kBFloat16:
      return ncclBfloat16;
  }
  return ncclUint8;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
  }
  return ncclSum;
}

// The calling thread may be any worker or the executor; NCCL and the stream belong to `device`.
using DeviceGuard = cuda::CudaDeviceGuard;

}  // namespace

struct NcclCommunicator::Impl {
  Impl(Communicator& b, int size) : bootstrap(b), book(size) {}
  Communicator& bootstrap;
  int device = 0;
  int rank = 0;
  int size = 1;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int32_t* scratch = nullptr;  // one int for barrier()
  bool aborted = false;
  std::chrono::milliseconds timeout{0};
  detail::CounterBook book;
  // Last op enqueued, for timeout messages.
  int64_t seq = 0;
  std::string last_name;
  std::string last_label;

  void enqueued(const char* name, const OpOptions& o) {
    ++seq;
    last_name = name;
    last_label = o.label;
  }
  void check_usable(const char* op) const {
    DSP_CHECK_T(CommError, !aborted, "nccl: {} on a communicator aborted after a failure", op);
  }
};

NcclCommunicator::NcclCommunicator(Communicator& bootstrap, int device, const CommOptions& opts)
    : impl_(std::make_unique<Impl>(bootstrap, bootstrap.size())) {
  Impl& m = *impl_;
  m.device = device;
  m.rank = bootstrap.rank();
  m.size = bootstrap.size();
  m.timeout = detail::default_timeout(opts);
  int ndev = 0;
  DSP_CUDA_CHECK(cudaGetDeviceCount(&ndev));
  DSP_CHECK_ARG(device >= 0 && device < ndev, "nccl: device {} does not exist ({} visible)", device,
                ndev);
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (m.rank == 0) DSP_NCCL_CHECK(ncclGetUniqueId(&id));
  OpOptions bo;
  bo.label = "nccl unique id";
  bootstrap.broadcast(&id, static_cast<int64_t>(sizeof(id)), DType::kUInt8, 0, bo);
  DeviceGuard g(device);
  DSP_CUDA_CHECK(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking));
  DSP_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&m.scratch), sizeof(int32_t)));
  // barrier() all-reduces it: never read uninitialised.
  DSP_CUDA_CHECK(cudaMemset(m.scratch, 0, sizeof(int32_t)));
  DSP_NCCL_CHECK(ncclCommInitRank(&m.comm, m.size, id, m.rank));
  DSP_DEBUG("ccc", "nccl communicator: rank {} of {} on cuda:{}", m.rank, m.size, device);
}

NcclCommunicator::~NcclCommunicator() {
  Impl& m = *impl_;
  try {
    DeviceGuard g(m.device);
    if (m.comm) {
      if (m.aborted) {
        ncclCommAbort(m.comm);
      } else {
        cudaStreamSynchronize(m.stream);
        ncclCommDestroy(m.comm);
      }
    }
    if (m.scratch) cudaFree(m.scratch);
    if (m.stream) cudaStreamDestroy(m.stream);
  } catch (const std::exception& e) {
    DSP_WARN("ccc", "nccl communicator teardown: {}", e.what());
  }
}

int NcclCommunicator::rank() const { return impl_->rank; }
int NcclCommunicator::size() const { return impl_->size; }
int NcclCommunicator::device() const { return impl_->device; }
cudaStream_t NcclCommunicator::stream() const { return impl_->stream; }
CommCounters NcclCommunicator::counters() const { return impl_->book.get(); }
void NcclCommunicator::reset_counters() { impl_->book.reset(); }

std::vector<int64_t> NcclCommunicator::exchange_counts(const std::vector<int64_t>& send_counts,
                                                       const OpOptions& o) {
  Impl& m = *impl_;
  detail::check_counts(send_counts, m.size, "exchange_counts", "send_counts");
  std::vector<int64_t> recv = m.bootstrap.exchange_counts(send_counts, o);
  m.book.add_symmetric(sizeof(int64_t));
  return recv;
}

void NcclCommunicator::all_to_all_v(const void* send, const std::vector<int64_t>& send_counts,
                                    void* recv, const std::vector<int64_t>& recv_counts,
                                    DType dtype, const OpOptions& o) {
  Impl& m = *impl_;
  m.check_usable("all_to_all_v");
  if (o.host_buffers) {
    m.bootstrap.all_to_all_v(send, send_counts, recv, recv_counts, dtype, o);
    return m.book.add_all_to_all(send_counts, recv_counts, dtype_size(dtype));
  }
  detail::check_counts(send_counts, m.size, "all_to_all_v", "send_counts");
  detail::check_counts(recv_counts, m.size, "all_to_all_v", "recv_counts");
  DSP_CHECK_ARG(send_counts[m.rank] == recv_counts[m.rank],
                "all_to_all_v: rank {} sends {} elements to itself but expects {}", m.rank,
                send_counts[m.rank], recv_counts[m.rank]);
  const size_t elem = dtype_size(dtype);
  const char* sp = static_cast<const char*>(send);
  char* rp = static_cast<char*>(recv);
  DeviceGuard g(m.device);
  // Bytes as ncclUint8: size_t counts, so no INT_MAX limit, and any dtype moves unchanged.
  size_t self_src = 0, self_dst = 0, so = 0, ro = 0;
  DSP_NCCL_CHECK(ncclGroupStart());
  for (int p = 0; p < m.size; ++p) {
    const size_t sb = static_cast<size_t>(send_counts[p]) * elem;
    const size_t rb = static_cast<size_t>(recv_counts[p]) * elem;
    if (p == m.rank) {
      self_src = so;
      self_dst = ro;
    } else {
      if (sb) DSP_NCCL_CHECK(ncclSend(sp + so, sb, ncclUint8, p, m.comm, m.stream));
      if (rb) DSP_NCCL_CHECK(ncclRecv(rp + ro, rb, ncclUint8, p, m.comm, m.stream));
    }
    so += sb;
    ro += rb;
  }
  DSP_NCCL_CHECK(ncclGroupEnd());
  const size_t self_bytes = static_cast<size_t>(send_counts[m.rank]) * elem;
  if (self_bytes) {
    DSP_CUDA_CHECK(cudaMemcpyAsync(rp + self_dst, sp + self_src, self_bytes,
                                   cudaMemcpyDeviceToDevice, m.stream));
  }
  m.enqueued("all_to_all_v", o);
  m.book.add_all_to_all(send_counts, recv_counts, elem);
}

void NcclCommunicator::all_reduce(void* buf, int64_t count, DType dtype, ReduceOp op,
                                  const OpOptions& o) {
  Impl& m = *impl_;
  m.check_usable("all_reduce");
  if (o.host_buffers) {
    m.bootstrap.all_reduce(buf, count, dtype, op, o);
    return m.book.add_symmetric(static_cast<uint64_t>(count) * dtype_size(dtype));
  }
  detail::check_count(count, "all_reduce");
  if (dtype != DType::kFloat16) detail::check_reduce_dtype(dtype, "nccl");
  DeviceGuard g(m.device);
  DSP_NCCL_CHECK(ncclAllReduce(buf, buf, static_cast<size_t>(count), nccl_type(dtype), nccl_op(op),
                               m.comm, m.stream));
  m.enqueued("all_reduce", o);
  m.book.add_symmetric(static_cast<uint64_t>(count) * dtype_size(dtype));
}

void NcclCommunicator::broadcast(void* buf, int64_t count, DType dtype, int root,
                                 const OpOptions& o) {
  Impl& m = *impl_;
  m.check_usable("broadcast");
  if (o.host_buffers) {
    m.bootstrap.broadcast(buf, count, dtype, root, o);
    return m.book.add_broadcast(static_cast<uint64_t>(count) * dtype_size(dtype), root, m.rank);
  }
  detail::check_count(count, "broadcast");
  detail::check_root(root, m.size, "broadcast");
  DeviceGuard g(m.device);
  DSP_NCCL_CHECK(ncclBroadcast(buf, buf, static_cast<size_t>(count), nccl_type(dtype), root, m.comm,
                               m.stream));
  m.enqueued("broadcast", o);
  m.book.add_broadcast(static_cast<uint64_t>(count) * dtype_size(dtype), root, m.rank);
}

void NcclCommunicator::all_gather(const void* send, void* recv, int64_t count, DType dtype,
                                  const OpOptions& o) {
  Impl& m = *impl_;
  m.check_usable("all_gather");
  if (o.host_buffers) {
    m.bootstrap.all_gather(send, recv, count, dtype, o);
    return m.book.add_symmetric(static_cast<uint64_t>(count) * dtype_size(dtype));
  }
  detail::check_count(count, "all_gather");
  DeviceGuard g(m.device);
  DSP_NCCL_CHECK(
      ncclAllGather(send, recv, static_cast<size_t>(count), nccl_type(dtype), m.comm, m.stream));
  m.enqueued("all_gather", o);
  m.book.add_symmetric(static_cast<uint64_t>(count) * dtype_size(dtype));
}

void NcclCommunicator::barrier(const OpOptions& o) {
  Impl& m = *impl_;
  m.check_usable("barrier");
  {
    DeviceGuard g(m.device);
    DSP_NCCL_CHECK(ncclAllReduce(m.scratch, m.scratch, 1, ncclInt32, ncclSum, m.comm, m.stream));
  }
  m.enqueued("barrier", o);
  synchronize(o);
  m.book.add_empty();
}

void NcclCommunicator::synchronize(const OpOptions& o) {
  Impl& m = *impl_;
  m.check_usable("synchronize");
  DeviceGuard g(m.device);
  const auto timeout = detail::op_timeout(o, m.timeout);
  const auto start = Clock::now();
  for (long it = 0;; ++it) {
    cudaError_t e = cudaStreamQuery(m.stream);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) DSP_CUDA_CHECK(e);
    ncclResult_t async = ncclSuccess;
    DSP_NCCL_CHECK(ncclCommGetAsyncError(m.comm, &async));
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    const bool late = timeout.count() > 0 && Clock::now() - start > timeout;
    if (async != ncclSuccess || late) {
      // Aborting is the only way to get this rank's kernels off the GPU; the communicator is
      // unusable afterwards (every later op throws).
      ncclCommAbort(m.comm);
      m.comm = nullptr;
      m.aborted = true;
      std::string label = m.last_label.empty() ? "" : fmt::format(", label '{}'", m.last_label);
      if (async != ncclSuccess) {
        DSP_THROW_T(CommError, "nccl: op #{} '{}'{} failed on rank {}: {}", m.seq, m.last_name,
                    label, m.rank, ncclGetErrorString(async));
      }
      DSP_THROW_T(CommError,
                  "nccl: collective '{}' (op #{}{}) timed out after {:.1f} s on rank {}; the NCCL "
                  "communicator was aborted (NCCL cannot tell which ranks did not arrive)",
                  m.last_name, m.seq, label, waited, m.rank);
    }
    if (it > 64) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

void NcclCommunicator::abort_job(const std::string& message) {
  // Not ncclCommAbort first: it may block on this rank's kernels, and the abort must end the job
  // in bounded time; the process ending takes its kernels with it.
  impl_->bootstrap.abort_job(message);
  std::terminate();  // not reached: abort_job never returns (tells the compiler so)
}

std::unique_ptr<NcclCommunicator> make_nccl_communicator(Communicator& bootstrap, int device,
                                                         const CommOptions& opts) {
  return std::make_unique<NcclCommunicator>(bootstrap, device, opts);
}

}  // namespace dsp
