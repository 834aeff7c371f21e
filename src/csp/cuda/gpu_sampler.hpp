#pragma once
// The CUDA build's device-side data path, host side (dsp::csp_cuda; CUDA build only).
//
// STATUS: compiled and linked on machines without a GPU; its correctness is established only by
// the GPU tests (tests/cuda, run by scripts/gpu-check.sh on a GPU machine). Nothing in the CPU
// build calls it, and the trainer does not use it yet.
//
// GpuSampler: node-wise (uniform / weighted, with / without replacement) and layer-wise sampling
// of one rank's partition on its GPU: the sampling kernel, pick compaction and relabelling run on
// the device; per layer one synchronisation brings the block back. Given the same partition,
// options, epoch and batch, its blocks equal CollectiveSampler's exactly in global ids (the per-node
// logic is csp/sample_kernels.hpp, shared with the CPU sampler). One rank only (a partition of one
// part, so every frontier node is local): multi-rank GPU sampling needs the CSP shuffle around the
// kernel (sampler.cpp's sample step), which is not wired yet.
//
// Topology: indptr (and cum / weights when biased) in device memory; the neighbour array in device
// memory if it fits `device_index_budget` bytes, else in pinned host memory (the partition's array,
// registered with cudaHostRegister) read by the kernel through UVA.
//
// DeviceFeatures: the partition's hot rows (its cached list) copied to device memory, the rest
// read from the memory-mapped features file, registered with cudaHostRegister (read-only) and
// gathered by the kernel through UVA. gather() writes features[ids] to device memory.
//
// Device buffers grow geometrically and are reused across batches: no cudaMalloc / cudaFree on the
// hot path once the sizes have settled. Every CUDA call and launch is checked (DSP_CUDA_CHECK).
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "csp/block.hpp"
#include "csp/sampler.hpp"
#include "layout/partition.hpp"

namespace dsp::cuda {

// A growth-only device allocation.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  // At least `bytes` bytes; contents are not preserved when it grows.
  void* reserve(size_t bytes);
  template <class T>
  T* reserve_as(size_t count) {
    return static_cast<T*>(reserve(count * sizeof(T)));
  }
  void* data() const { return ptr_; }
  size_t capacity() const { return cap_; }

 private:
  void* ptr_ = nullptr;
  size_t cap_ = 0;
};

// A host range registered for device access (cudaHostRegister, mapped; read-only when asked, as
// needed for a read-only file mapping). Unregistered on destruction.
class HostRegistration {
 public:
  HostRegistration() = default;
  HostRegistration(const void* ptr, size_t bytes, bool read_only);
  ~HostRegistration();
  HostRegistration(const HostRegistration&) = delete;
  HostRegistration& operator=(const HostRegistration&) = delete;
  const void* device_ptr() const { return dev_; }

 private:
  void* host_ = nullptr;
  const void* dev_ = nullptr;
};

struct GpuSamplerOptions {
  int device = 0;
  // Bytes of device memory the neighbour array may take; beyond it, it is read through UVA.
  size_t device_index_budget = std::numeric_limits<size_t>::max();
};

class GpuSampler {
 public:
  // `part` (a partition of one part) must outlive the sampler.
  GpuSampler(const PartitionData& part, SamplerOptions opts, GpuSamplerOptions gopts = {});
  ~GpuSampler();
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;

  // Same contract and result as CollectiveSampler::sample on one rank.
  SampledBatch sample(const std::vector<int64_t>& seeds, int64_t epoch, int64_t batch);

  bool indices_on_device() const { return !idx_reg_; }
  cudaStream_t stream() const { return stream_; }

 private:
  Block run_layer(const std::vector<int64_t>& frontier, const std::vector<int32_t>& fanout,
                  int uniform_fanout, uint64_t key);
  std::vector<int32_t> layerwise_counts(const std::vector<int64_t>& frontier, int n,
                                        uint64_t key) const;

  const PartitionData& part_;
  SamplerOptions opts_;
  GpuSamplerOptions gopts_;
  cudaStream_t stream_ = nullptr;
  bool idx32_ = false;
  std::vector<double> weight_sum_;  // biased layer-wise: per-node total in-weight
  DeviceBuffer indptr_, indices_, cum_, weights_;
  std::unique_ptr<HostRegistration> idx_reg_;  // the neighbour array when it overflows
  const void* indices_dev_ = nullptr;
  // Per-layer work buffers, reused.
  DeviceBuffer tasks_, slot_, cnt_, out_, outw_, offsets_, keys_, picks_w_, table_, work_,
      local_, src_ids_, num_src_;
};

class DeviceFeatures {
 public:
  // `part` (one part; its features mapping and cached list) must outlive this object.
  explicit DeviceFeatures(const PartitionData& part, int device = 0);
  ~DeviceFeatures();
  DeviceFeatures(const DeviceFeatures&) = delete;
  DeviceFeatures& operator=(const DeviceFeatures&) = delete;

  size_t row_bytes() const { return row_bytes_; }
  int64_t cached_rows() const { return cached_rows_; }
  // out (device, n * row_bytes()) = features[ids] (ids: device, in [0, N)), enqueued on `stream`.
  void gather(const int64_t* ids_dev, int64_t n, void* out_dev, cudaStream_t stream) const;
  // Host convenience for tests: copies ids in, gathers, copies the rows out, synchronises.
  std::vector<unsigned char> gather(const std::vector<int64_t>& ids);

 private:
  int64_t num_nodes_ = 0, cached_rows_ = 0;
  size_t row_bytes_ = 0;
  DeviceBuffer cache_, slot_, ids_, rows_;
  std::unique_ptr<HostRegistration> cold_;
  cudaStream_t stream_ = nullptr;
};

}  // namespace dsp::cuda
