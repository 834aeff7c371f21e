#include "core/cuda/memory.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "core/cuda/check.hpp"
#include "core/shared_ranges.hpp"
#include "core/upload_ring.hpp"

namespace dsp::cuda {

Lane::Lane(int device) : device_(device) {
  CudaDeviceGuard g(device);
  int pools = 0;
  DSP_CUDA_CHECK(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device));
  pools_ = pools != 0;
  if (pools_) {
    cudaMemPool_t pool = nullptr;
    DSP_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
    uint64_t keep = UINT64_MAX;  // freed memory stays in the pool for the next growth
    DSP_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  } else {
    static std::once_flag once;
    std::call_once(once, [device] {
      DSP_INFO("cuda", "device {} has no memory pools: buffers grow with cudaMalloc/cudaFree",
               device);
    });
  }
  DSP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

Lane::~Lane() {
  if (!stream_) return;
  CudaDeviceGuard g(device_);
  DSP_CUDA_CHECK_NO_THROW(cudaStreamDestroy(stream_));  // pending frees complete first
}

EventFence::EventFence(int device) : device_(device) {
  CudaDeviceGuard g(device);
  DSP_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
}

EventFence::~EventFence() {
  if (!event_) return;
  CudaDeviceGuard g(device_);
  DSP_CUDA_CHECK_NO_THROW(cudaEventDestroy(event_));
}

void EventFence::record_on(void* stream) {
  CudaDeviceGuard g(device_);
  cudaStream_t s = stream ? static_cast<cudaStream_t>(stream) : cudaStreamLegacy;
  DSP_CUDA_CHECK(cudaEventRecord(event_, s));
}

void EventFence::wait_on(CUstream_st* stream) const {
  CudaDeviceGuard g(device_);
  DSP_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0));
}

Graph::~Graph() { release(); }

Graph::Graph(Graph&& o) noexcept : graph_(o.graph_), exec_(o.exec_) {
  o.graph_ = nullptr;
  o.exec_ = nullptr;
}

Graph& Graph::operator=(Graph&& o) noexcept {
  if (this != &o) {
    release();
    std::swap(graph_, o.graph_);
    std::swap(exec_, o.exec_);
  }
  return *this;
}

void Graph::release() noexcept {
  if (exec_) DSP_CUDA_CHECK_NO_THROW(cudaGraphExecDestroy(exec_));
  if (graph_) DSP_CUDA_CHECK_NO_THROW(cudaGraphDestroy(graph_));
  exec_ = nullptr;
  graph_ = nullptr;
}

void Graph::begin(CUstream_st* stream) {
  DSP_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
}

Graph Graph::end(CUstream_st* stream) {
  Graph g;
  DSP_CUDA_CHECK(cudaStreamEndCapture(stream, &g.graph_));
  DSP_CUDA_CHECK(cudaGraphInstantiate(&g.exec_, g.graph_, 0));
  return g;
}

void Graph::launch(CUstream_st* stream) const {
  DSP_CHECK(exec_ != nullptr, "Graph::launch: nothing captured");
  DSP_CUDA_CHECK(cudaGraphLaunch(exec_, stream));
}

DeviceBuffer::DeviceBuffer(std::shared_ptr<Lane> lane) : lane_(std::move(lane)) {
  DSP_CHECK(lane_ != nullptr, "DeviceBuffer: no lane");
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : lane_(o.lane_), ptr_(o.ptr_), cap_(o.cap_) {
  o.ptr_ = nullptr;
  o.cap_ = 0;
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    release();
    lane_ = o.lane_;
    ptr_ = o.ptr_;
    cap_ = o.cap_;
    o.ptr_ = nullptr;
    o.cap_ = 0;
  }
  return *this;
}

void DeviceBuffer::release() noexcept {
  if (!ptr_) return;
  try {
    CudaDeviceGuard g(lane_->device());
    if (lane_->stream_ordered()) {
      DSP_CUDA_CHECK_NO_THROW(cudaFreeAsync(ptr_, lane_->stream()));
    } else {
      DSP_CUDA_CHECK_NO_THROW(cudaFree(ptr_));
    }
  } catch (const std::exception& e) {
    DSP_WARN("cuda", "device buffer release: {}", e.what());
  }
  ptr_ = nullptr;
  cap_ = 0;
}

void* DeviceBuffer::reserve(size_t bytes) {
  if (bytes <= cap_ && ptr_) return ptr_;
  const size_t cap = std::max<size_t>({bytes, cap_ + cap_ / 2, 256});
  release();
  CudaDeviceGuard g(lane_->device());
  if (lane_->stream_ordered()) {
    DSP_CUDA_CHECK(cudaMallocAsync(&ptr_, cap, lane_->stream()));
  } else {
    DSP_CUDA_CHECK(cudaMalloc(&ptr_, cap));
  }
  cap_ = cap;
  lane_->growths += 1;
  return ptr_;
}

struct StagedUploads::State final : UploadRing::Events {
  static constexpr size_t kChunkBytes = size_t{128} << 10;
  static constexpr int kChunks = 8;
  std::shared_ptr<Lane> lane;
  UploadRing ring{kChunkBytes, kChunks};
  char* pinned = nullptr;  // ring.bytes(), allocated at the first staged upload
  cudaEvent_t events[kChunks] = {};
  int waits = 0;  // host waits of the current upload

  explicit State(std::shared_ptr<Lane> l) : lane(std::move(l)) {}
  ~State() override {
    try {
      CudaDeviceGuard g(lane->device());
      if (pinned) DSP_CUDA_CHECK_NO_THROW(cudaStreamSynchronize(lane->stream()));  // its copies
      for (cudaEvent_t e : events) {
        if (e) DSP_CUDA_CHECK_NO_THROW(cudaEventDestroy(e));
      }
      if (pinned) DSP_CUDA_CHECK_NO_THROW(cudaFreeHost(pinned));
    } catch (const std::exception& e) {
      DSP_WARN("cuda", "staged uploads release: {}", e.what());
    }
  }
  void allocate() {
    DSP_CUDA_CHECK(
        cudaHostAlloc(reinterpret_cast<void**>(&pinned), ring.bytes(), cudaHostAllocPortable));
    for (cudaEvent_t& e : events)
      DSP_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  void finished(int c) override { DSP_CUDA_CHECK(cudaEventRecord(events[c], lane->stream())); }
  void reuse(int c) override {
    const cudaError_t q = cudaEventQuery(events[c]);
    if (q == cudaSuccess) return;
    if (q != cudaErrorNotReady) DSP_CUDA_CHECK(q);
    waits += 1;
    DSP_CUDA_CHECK(cudaEventSynchronize(events[c]));
  }
};

StagedUploads::StagedUploads(std::shared_ptr<Lane> lane)
    : s_(std::make_unique<State>(std::move(lane))) {}
StagedUploads::~StagedUploads() = default;
StagedUploads::StagedUploads(StagedUploads&& o) noexcept = default;
StagedUploads& StagedUploads::operator=(StagedUploads&& o) noexcept = default;

int StagedUploads::upload(void* d, const void* h, size_t bytes) {
  if (!bytes) return 0;
  State& s = *s_;
  CudaDeviceGuard g(s.lane->device());
  if (bytes > s.ring.chunk_bytes()) {
    DSP_CUDA_CHECK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, s.lane->stream()));
    return 0;
  }
  if (!s.pinned) s.allocate();
  s.waits = 0;
  char* at = s.pinned + s.ring.take(bytes, s);
  std::memcpy(at, h, bytes);
  DSP_CUDA_CHECK(cudaMemcpyAsync(d, at, bytes, cudaMemcpyHostToDevice, s.lane->stream()));
  return s.waits;
}

namespace {

// A private copy of a read-only range in mapped pinned memory, for a device that cannot register
// it in place.
SharedRanges::Visible pinned_copy(void* p, size_t bytes, const char* why) {
  DSP_INFO("cuda", "host range of {} bytes copied into pinned memory for device reads ({})", bytes,
           why);
  void* pinned = nullptr;
  DSP_CUDA_CHECK(cudaHostAlloc(&pinned, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
  std::memcpy(pinned, p, bytes);
  SharedRanges::Visible v;
  v.copy = true;
  v.undo = [pinned] { DSP_CUDA_CHECK_NO_THROW(cudaFreeHost(pinned)); };
  DSP_CUDA_CHECK(cudaHostGetDevicePointer(&v.device, pinned, 0));
  return v;
}

SharedRanges::Visible register_range(void* p, size_t bytes, bool read_only) {
  unsigned flags = cudaHostRegisterMapped | cudaHostRegisterPortable;
  if (read_only) {
    if (!read_only_registration_supported())
      return pinned_copy(p, bytes, "the device does not support read-only registration");
    flags |= cudaHostRegisterReadOnly;
  }
  SharedRanges::Visible v;
  const cudaError_t err = cudaHostRegister(p, bytes, flags);
  if (err == cudaErrorHostMemoryAlreadyRegistered) {
    (void)cudaGetLastError();  // registered outside dsp: used as it is, never unregistered here
  } else if (err != cudaSuccess && read_only) {
    (void)cudaGetLastError();
    return pinned_copy(p, bytes, cudaGetErrorString(err));
  } else {
    DSP_CUDA_CHECK(err);
    v.undo = [p] { DSP_CUDA_CHECK_NO_THROW(cudaHostUnregister(p)); };
  }
  const cudaError_t gerr = cudaHostGetDevicePointer(&v.device, p, 0);
  if (gerr != cudaSuccess) {
    if (v.undo) v.undo();
    DSP_CUDA_CHECK(gerr);
  }
  return v;
}

SharedRanges& process_ranges() {
  static SharedRanges* ranges = new SharedRanges(register_range);  // outlives static destructors
  return *ranges;
}

}  // namespace

bool read_only_registration_supported() {
  int dev = 0, ro = 0;
  DSP_CUDA_CHECK(cudaGetDevice(&dev));
  DSP_CUDA_CHECK(cudaDeviceGetAttribute(&ro, cudaDevAttrHostRegisterReadOnlySupported, dev));
  return ro != 0;
}

const void* HostRegistration::map(const void* ptr, size_t bytes, bool read_only) {
  DSP_CHECK(host_ == nullptr, "HostRegistration: already holds a registration");
  if (!ptr || bytes == 0) return ptr;
  void* p = const_cast<void*>(ptr);
  void* dev = process_ranges().acquire(p, bytes, read_only);
  host_ = p;
  return dev;
}

HostRegistration::~HostRegistration() {
  if (!host_) return;
  try {
    process_ranges().release(host_);
  } catch (const std::exception& e) {
    DSP_WARN("cuda", "host registration release: {}", e.what());
  }
}

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

namespace {

// What copy_bandwidth allocates besides its device buffers, released however it returns.
struct CopyScratch {
  void* host = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  ~CopyScratch() {
    if (start) DSP_CUDA_CHECK_NO_THROW(cudaEventDestroy(start));
    if (stop) DSP_CUDA_CHECK_NO_THROW(cudaEventDestroy(stop));
    if (host) DSP_CUDA_CHECK_NO_THROW(cudaFreeHost(host));
  }
};

}  // namespace

CopyBandwidth copy_bandwidth(int device, size_t bytes, int iters) {
  CudaDeviceGuard g(device);
  bytes = std::max<size_t>(bytes, 1);
  auto lane = std::make_shared<Lane>(device);
  DeviceBuffer a(lane), b(lane);
  void* src = a.reserve(bytes);
  void* dst = b.reserve(bytes);
  CopyScratch k;
  DSP_CUDA_CHECK(cudaMallocHost(&k.host, bytes));
  std::memset(k.host, 1, bytes);
  cudaStream_t stream = lane->stream();  // the buffers' allocations are ordered on it
  DSP_CUDA_CHECK(cudaMemsetAsync(src, 1, bytes, stream));
  DSP_CUDA_CHECK(cudaEventCreate(&k.start));
  DSP_CUDA_CHECK(cudaEventCreate(&k.stop));
  auto median_gbps = [&](const void* from, cudaMemcpyKind kind) {
    std::vector<float> ms;
    for (int it = -1; it < std::max(iters, 1); ++it) {
      DSP_CUDA_CHECK(cudaEventRecord(k.start, stream));
      DSP_CUDA_CHECK(cudaMemcpyAsync(dst, from, bytes, kind, stream));
      DSP_CUDA_CHECK(cudaEventRecord(k.stop, stream));
      DSP_CUDA_CHECK(cudaEventSynchronize(k.stop));
      float t = 0;
      DSP_CUDA_CHECK(cudaEventElapsedTime(&t, k.start, k.stop));
      if (it >= 0) ms.push_back(t);
    }
    std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
    return static_cast<double>(bytes) / std::max(1e-9, ms[ms.size() / 2] * 1e-3) / 1e9;
  };
  CopyBandwidth out;
  out.device_to_device_gbps = median_gbps(src, cudaMemcpyDeviceToDevice);
  out.host_to_device_gbps = median_gbps(k.host, cudaMemcpyHostToDevice);
  return out;
}

void device_memory(size_t* free_bytes, size_t* total_bytes) {
  DSP_CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
}

}  // namespace dsp::cuda
