#pragma once
// Device memory of the CUDA build (dsp::cuda_core): executor lanes (a stream and its buffers'
// allocations), growth-only device buffers and host ranges registered for device access. Host C++
// against the CUDA runtime (no kernels here).
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/release_fence.hpp"

struct CUstream_st;     // cudaStream_t is CUstream_st*
struct CUevent_st;      // cudaEvent_t is CUevent_st*
struct CUgraph_st;      // cudaGraph_t
struct CUgraphExec_st;  // cudaGraphExec_t

namespace dsp::cuda {

// The stream an executor issues its work on, shared with the buffers it makes (CudaExec::buffer):
// a non-blocking stream of one device, destroyed when the executor and the last of its buffers
// (which a batch may carry away) are gone. Buffers on a lane grow and are freed in the stream's
// order from the device's default memory pool (cudaMallocAsync / cudaFreeAsync; the pool keeps
// what is freed for the next growth: release threshold unlimited), so a growth waits for nothing.
// A device without memory pools gets cudaMalloc / cudaFree instead (logged once).
class Lane {
 public:
  explicit Lane(int device);
  ~Lane();
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;
  int device() const { return device_; }
  CUstream_st* stream() const { return stream_; }
  bool stream_ordered() const { return pools_; }
  // Growths of the lane's buffers (HostTraffic::allocations). One thread grows a lane's buffers:
  // the one issuing its work.
  int64_t growths = 0;

 private:
  int device_ = 0;
  CUstream_st* stream_ = nullptr;
  bool pools_ = false;
};

// A ReleaseFence over a CUDA event of one device (CudaExec::fence): recorded on the consumer's
// stream (null: the legacy default stream, LibTorch's unless it sets one), waited for on a lane's.
class EventFence final : public ReleaseFence {
 public:
  explicit EventFence(int device);
  ~EventFence() override;
  EventFence(const EventFence&) = delete;
  EventFence& operator=(const EventFence&) = delete;
  // `stream` waits for the recorded point (cudaStreamWaitEvent: no host wait).
  void wait_on(CUstream_st* stream) const;

 private:
  void record_on(void* stream) override;
  int device_ = 0;
  CUevent_st* event_ = nullptr;
};

// The work a lane's stream recorded between begin(stream) and end(stream) (stream capture, in this
// thread's mode: other threads' CUDA calls are not disturbed), instantiated as a CUDA Graph and
// launched on a stream as often as needed (CudaExec::capture_begin, capture_end, launch).
class Graph {
 public:
  Graph() = default;
  ~Graph();
  Graph(Graph&& o) noexcept;
  Graph& operator=(Graph&& o) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  static void begin(CUstream_st* stream);
  static Graph end(CUstream_st* stream);
  void launch(CUstream_st* stream) const;

 private:
  void release() noexcept;
  CUgraph_st* graph_ = nullptr;
  CUgraphExec_st* exec_ = nullptr;
};

// A growth-only device allocation on a lane: reserve() reallocates only to grow (geometrically),
// so a buffer reused across batches stops allocating once sizes settle. Growth and destruction are
// ordered on the lane's stream: whoever last used the memory on another stream (a batch's
// consumer) must have finished with it before the buffer grows or goes (recycle_pool.hpp).
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::shared_ptr<Lane> lane);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  // At least `bytes` bytes; contents are not preserved when it grows.
  void* reserve(size_t bytes);
  void* data() const { return ptr_; }
  size_t capacity() const { return cap_; }

 private:
  void release() noexcept;
  std::shared_ptr<Lane> lane_;
  void* ptr_ = nullptr;
  size_t cap_ = 0;
};

// The uploads of a lane (CudaExec::to_device): the host bytes are copied into pinned memory, an
// UploadRing (core/upload_ring.hpp) of 8 chunks of 128 KiB allocated at the first upload, and
// from there to the device on the lane's stream, so the host may reuse its bytes on return and
// never waits for the stream (a cudaMemcpyAsync from pageable memory may synchronize with it).
// A chunk is written again after the event recorded when it was finished: a host wait only when
// the device is a whole ring behind. An upload larger than a chunk is copied from where it is
// (pageable: CUDA stages it before returning).
class StagedUploads {
 public:
  explicit StagedUploads(std::shared_ptr<Lane> lane);
  ~StagedUploads();
  StagedUploads(StagedUploads&& o) noexcept;
  StagedUploads& operator=(StagedUploads&& o) noexcept;
  // Issues the copy of h[0, bytes) to d on the lane's stream; returns the blocking host waits
  // this took (0, or 1 when a chunk's previous copies had not completed).
  int upload(void* d, const void* h, size_t bytes);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// A host range made readable by the device (mapped, portable). Registrations are shared by the
// whole process and counted per base address (core/shared_ranges.hpp): a second object or rank
// mapping the same range, or one inside it, borrows the first registration, and the range is
// unregistered when its last holder is destroyed. A read-only range (a read-only file mapping) is
// registered with cudaHostRegisterReadOnly; where the device does not support that, or the
// registration is refused, the range is copied once into mapped pinned memory instead (logged).
// A range registered outside dsp (e.g. by LibTorch) is used as it is and never unregistered here.
class HostRegistration {
 public:
  HostRegistration() = default;
  ~HostRegistration();
  HostRegistration(const HostRegistration&) = delete;
  HostRegistration& operator=(const HostRegistration&) = delete;
  // Makes [ptr, ptr + bytes) readable by the current device and returns its device pointer.
  const void* map(const void* ptr, size_t bytes, bool read_only);

 private:
  void* host_ = nullptr;
};

// Whether the current device can register host memory read-only (cudaHostRegisterReadOnly).
bool read_only_registration_supported();

// Free and total memory of the current device, in bytes.
void device_memory(size_t* free_bytes, size_t* total_bytes);
// CUDA devices visible to this process (0 when the driver finds none).
int device_count();

// The copy ceilings a gather's GB/s is read against, measured on `device`: `bytes` copied between
// two device buffers, and from pinned host memory to the device, each the median of `iters`
// rounds (after one warm-up) timed with CUDA events.
struct CopyBandwidth {
  double device_to_device_gbps = 0;
  double host_to_device_gbps = 0;
};
CopyBandwidth copy_bandwidth(int device, size_t bytes, int iters);

}  // namespace dsp::cuda
