#pragma once
// CudaExec: the executor (core/host_exec.hpp states the contract) of the CUDA build. Everything is
// issued on the executor's own stream of its device (its Lane, core/cuda/memory.hpp, which also
// orders its buffers' growths); for_each is a thin launcher of a one-line
// kernel over the functor, scans are CUB's. Included by .cu files only.
#include <cuda_runtime.h>

#include <cstdint>
#include <cub/cub.cuh>
#include <memory>

#include "core/cuda/check.hpp"
#include "core/cuda/memory.hpp"
#include "core/host_traffic.hpp"

namespace dsp::cuda {

template <class F>
__global__ void for_each_kernel(int64_t n, F f) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) f(i);
}

template <class F>
__global__ void for_each_block_kernel(F f) {
  extern __shared__ uint64_t dsp_block_shared[];
  f(static_cast<int64_t>(blockIdx.x), static_cast<int>(threadIdx.x), dsp_block_shared);
}

class CudaExec {
 public:
  using Buffer = DeviceBuffer;
  using Registration = HostRegistration;
  using Graph = cuda::Graph;
  static constexpr int kThreads = 256;

  explicit CudaExec(int device)
      : lane_(std::make_shared<Lane>(device)),
        uploads_(lane_),
        scan_tmp_(lane_),
        sort_keys_(lane_) {}

  int device() const { return lane_->device(); }
  cudaStream_t stream() const { return lane_->stream(); }
  // A buffer on this executor's lane (core/cuda/memory.hpp): its growths are ordered on stream().
  DeviceBuffer buffer() const { return DeviceBuffer(lane_); }

  // Staged in pinned memory (StagedUploads): the host bytes may be reused on return, and the
  // host waits only when the device is a whole staging ring behind (counted as a sync).
  void to_device(void* d, const void* h, size_t bytes) {
    no_capture("an upload");
    traffic_.syncs += uploads_.upload(d, h, bytes);
  }
  void to_host(void* h, const void* d, size_t bytes) {
    no_capture("a read");
    traffic_.add_read(bytes);
    copy_kind(h, d, bytes, cudaMemcpyDeviceToHost);
  }
  void copy(void* d, const void* s, size_t bytes) {
    copy_kind(d, s, bytes, cudaMemcpyDeviceToDevice);
  }
  void zero(void* d, size_t bytes) {
    if (!bytes) return;
    CudaDeviceGuard g(device());
    DSP_CUDA_CHECK(cudaMemsetAsync(d, 0, bytes, stream()));
  }
  template <class F>
  void for_each(int64_t n, const F& f) {
    if (n <= 0) return;
    CudaDeviceGuard g(device());
    const int64_t blocks = (n + kThreads - 1) / kThreads;
    for_each_kernel<F><<<static_cast<unsigned>(blocks), kThreads, 0, stream()>>>(n, f);
    DSP_CUDA_CHECK(cudaGetLastError());
  }
  template <class F>
  void for_each_block(int64_t blocks, int threads, size_t shared_bytes, const F& f) {
    if (blocks <= 0) return;
    DSP_CHECK(blocks < (int64_t{1} << 31), "launch of {} blocks (at most 2^31 - 1)", blocks);
    CudaDeviceGuard g(device());
    const auto grid = static_cast<unsigned>(blocks), block = static_cast<unsigned>(threads);
    for_each_block_kernel<F><<<grid, block, shared_bytes, stream()>>>(f);
    DSP_CUDA_CHECK(cudaGetLastError());
  }
  void exclusive_scan(const int64_t* in, int64_t* out, int64_t n) { scan(in, out, n, false); }
  void inclusive_scan(const int64_t* in, int64_t* out, int64_t n) { scan(in, out, n, true); }
  void sort_pairs_descending(const int64_t* keys, const int64_t* vals_in, int64_t* vals_out,
                             int64_t n, int key_bits) {
    if (n <= 0) return;
    DSP_CHECK(n < (int64_t{1} << 31), "sort of {} elements (at most 2^31 - 1)", n);
    CudaDeviceGuard g(device());
    const int m = static_cast<int>(n);
    int64_t* keys_out =
        static_cast<int64_t*>(scratch(sort_keys_, static_cast<size_t>(n) * sizeof(int64_t)));
    size_t bytes = 0;
    DSP_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(
        nullptr, bytes, keys, keys_out, vals_in, vals_out, m, 0, key_bits, stream()));
    DSP_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(scratch(scan_tmp_, bytes), bytes, keys,
                                                             keys_out, vals_in, vals_out, m, 0,
                                                             key_bits, stream()));
  }
  std::shared_ptr<ReleaseFence> fence() const { return std::make_shared<EventFence>(device()); }
  void wait(ReleaseFence& f) {
    if (!f.recorded()) return;
    no_capture("a fence wait");
    traffic_.stream_waits += 1;
    static_cast<EventFence&>(f).wait_on(stream());
    f.clear();
  }
  const void* map_host(const void* p, size_t bytes, bool read_only, Registration& r) {
    CudaDeviceGuard g(device());
    return r.map(p, bytes, read_only);
  }
  void sync() {
    no_capture("a sync");
    traffic_.syncs += 1;
    CudaDeviceGuard g(device());
    DSP_CUDA_CHECK(cudaStreamSynchronize(stream()));
  }
  void capture_begin() {
    DSP_CHECK(!capturing_, "executor: a capture inside a capture");
    CudaDeviceGuard g(device());
    Graph::begin(stream());
    capturing_ = true;
    capture_growths_ = lane_->growths;
  }
  Graph capture_end() {
    DSP_CHECK(capturing_, "executor: capture_end without capture_begin");
    capturing_ = false;
    CudaDeviceGuard g(device());
    Graph graph = Graph::end(stream());
    DSP_CHECK(lane_->growths == capture_growths_, "executor: a buffer grew inside a capture");
    return graph;
  }
  int64_t scratch_moves() const { return scratch_moves_; }
  void launch(const Graph& graph) {
    no_capture("a graph launch");
    traffic_.graph_launches += 1;
    CudaDeviceGuard g(device());
    graph.launch(stream());
  }
  HostTraffic traffic() const {
    HostTraffic t = traffic_;
    t.allocations = lane_->growths;
    return t;
  }
  static void read(void* h, const void* d, size_t bytes) {
    if (bytes) DSP_CUDA_CHECK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
  }

 private:
  void copy_kind(void* d, const void* s, size_t bytes, cudaMemcpyKind kind) {
    if (!bytes) return;
    CudaDeviceGuard g(device());
    DSP_CUDA_CHECK(cudaMemcpyAsync(d, s, bytes, kind, stream()));
  }
  void scan(const int64_t* in, int64_t* out, int64_t n, bool inclusive) {
    if (n <= 0) return;
    DSP_CHECK(n < (int64_t{1} << 31), "scan of {} elements (at most 2^31 - 1)", n);
    CudaDeviceGuard g(device());
    size_t bytes = 0;
    const int m = static_cast<int>(n);
    if (inclusive) {
      DSP_CUDA_CHECK(cub::DeviceScan::InclusiveSum(nullptr, bytes, in, out, m, stream()));
      DSP_CUDA_CHECK(
          cub::DeviceScan::InclusiveSum(scratch(scan_tmp_, bytes), bytes, in, out, m, stream()));
    } else {
      DSP_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, in, out, m, stream()));
      DSP_CUDA_CHECK(
          cub::DeviceScan::ExclusiveSum(scratch(scan_tmp_, bytes), bytes, in, out, m, stream()));
    }
  }

  void* scratch(DeviceBuffer& b, size_t bytes) {
    void* before = b.data();
    void* p = b.reserve(bytes);
    if (p != before) scratch_moves_ += 1;
    return p;
  }
  void no_capture(const char* what) const {
    DSP_CHECK(!capturing_, "executor: {} inside a capture", what);
  }

  std::shared_ptr<Lane> lane_;  // its stream outlives the executor while a buffer holds it
  StagedUploads uploads_;
  DeviceBuffer scan_tmp_, sort_keys_;
  HostTraffic traffic_;
  bool capturing_ = false;
  int64_t scratch_moves_ = 0;
  int64_t capture_growths_ = 0;
};

}  // namespace dsp::cuda
