// Host side of the GPU sampler and the device feature store. UNTESTED on a GPU until
// scripts/gpu-check.sh has run tests/cuda on one (see gpu_sampler.hpp).
#include "csp/cuda/gpu_sampler.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "csp/cuda/check.hpp"
#include "csp/cuda/gather_kernels.hpp"
#include "csp/cuda/sample_kernels.hpp"
#include "csp/sample_kernels.hpp"

namespace dsp::cuda {

// ---- buffers ----------------------------------------------------------------------------------

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);  // destructor: nothing to report to
}

void* DeviceBuffer::reserve(size_t bytes) {
  if (bytes <= cap_ && ptr_) return ptr_;
  size_t cap = std::max<size_t>({bytes, cap_ + cap_ / 2, 256});
  if (ptr_) {
    DSP_CUDA_CHECK(cudaFree(ptr_));
    ptr_ = nullptr;
    cap_ = 0;
  }
  DSP_CUDA_CHECK(cudaMalloc(&ptr_, cap));
  cap_ = cap;
  return ptr_;
}

HostRegistration::HostRegistration(const void* ptr, size_t bytes, bool read_only) {
  if (!ptr || bytes == 0) return;
  unsigned flags = cudaHostRegisterMapped | cudaHostRegisterPortable;
  if (read_only) flags |= cudaHostRegisterReadOnly;
  void* p = const_cast<void*>(ptr);
  DSP_CUDA_CHECK(cudaHostRegister(p, bytes, flags));
  host_ = p;
  void* dev = nullptr;
  cudaError_t err = cudaHostGetDevicePointer(&dev, p, 0);
  if (err != cudaSuccess) {
    cudaHostUnregister(p);
    host_ = nullptr;
    DSP_CUDA_CHECK(err);
  }
  dev_ = dev;
}

HostRegistration::~HostRegistration() {
  if (host_) cudaHostUnregister(host_);
}

namespace {

template <class T>
void upload(DeviceBuffer& buf, const T* src, size_t count, cudaStream_t stream) {
  void* d = buf.reserve(std::max<size_t>(count, 1) * sizeof(T));
  if (count) DSP_CUDA_CHECK(cudaMemcpyAsync(d, src, count * sizeof(T), cudaMemcpyHostToDevice, stream));
}

template <class T>
void download(std::vector<T>& dst, const void* src, size_t count, cudaStream_t stream) {
  dst.resize(count);
  if (count) {
    DSP_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src, count * sizeof(T), cudaMemcpyDeviceToHost, stream));
  }
}

// The CPU sampler's per-row inclusive prefix sums of the weights (same order of additions, so the
// same doubles).
void row_prefix(const float* w, int64_t deg, double* cum) {
  double acc = 0;
  for (int64_t i = 0; i < deg; ++i) {
    acc += static_cast<double>(w[i]);
    cum[i] = acc;
  }
}

}  // namespace

// ---- GpuSampler -------------------------------------------------------------------------------

GpuSampler::GpuSampler(const PartitionData& part, SamplerOptions opts, GpuSamplerOptions gopts)
    : part_(part), opts_(std::move(opts)), gopts_(gopts) {
  DSP_CHECK_ARG(!opts_.fanouts.empty(), "gpu sampler: at least one layer (fanout) is needed");
  for (int f : opts_.fanouts) {
    DSP_CHECK_ARG(f > 0 && f < (1 << 22), "gpu sampler: fanouts must be in [1, 2^22), got {}", f);
  }
  DSP_CHECK_T(NotSupported, part_.meta.parts == 1,
              "gpu sampler: partitions of one part only (got {} parts); multi-rank GPU sampling "
              "is not wired yet",
              part_.meta.parts);
  DSP_CHECK_T(NotSupported, opts_.mode == SampleMode::kCsp, "gpu sampler: pull mode is CPU only");
  const Csr& g = part_.patch;
  DSP_CHECK_ARG(g.num_nodes < (int64_t{1} << 32) - 1, "gpu sampler: up to 2^32-2 nodes");
  DSP_CHECK_ARG(!opts_.biased || g.has_weights(),
                "sampler: biased (weighted) sampling needs edge weights, and the graph has none");
  DSP_CUDA_CHECK(cudaSetDevice(gopts_.device));
  DSP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));

  const int64_t n = g.num_nodes, ne = g.num_edges();
  upload(indptr_, g.rowptr(), static_cast<size_t>(n + 1), stream_);
  idx32_ = ne == 0 || g.indices.dtype() == DType::kInt32;
  const size_t idx_bytes = ne ? g.indices.nbytes() : 0;
  if (idx_bytes <= gopts_.device_index_budget) {
    void* d = indices_.reserve(std::max<size_t>(idx_bytes, 8));
    if (idx_bytes) {
      DSP_CUDA_CHECK(cudaMemcpyAsync(d, g.indices.raw(), idx_bytes, cudaMemcpyHostToDevice, stream_));
    }
    indices_dev_ = d;
  } else {
    // Overflow: the kernel reads the (pinned, registered) host array through UVA.
    idx_reg_ = std::make_unique<HostRegistration>(g.indices.raw(), idx_bytes, g.indices.is_mapped());
    indices_dev_ = idx_reg_->device_ptr();
  }
  if (opts_.biased) {
    std::vector<double> cum(static_cast<size_t>(ne));
    const int64_t* ip = g.rowptr();
    const float* w = g.weights.data<float>();
    for (int64_t v = 0; v < n; ++v) row_prefix(w + ip[v], ip[v + 1] - ip[v], cum.data() + ip[v]);
    upload(cum_, cum.data(), cum.size(), stream_);
    upload(weights_, w, static_cast<size_t>(ne), stream_);
    if (opts_.scheme == SampleScheme::kLayerWise) {
      weight_sum_.assign(static_cast<size_t>(n), 0.0);
      for (int64_t v = 0; v < n; ++v) weight_sum_[v] = ip[v + 1] > ip[v] ? cum[ip[v + 1] - 1] : 0.0;
    }
    DSP_CUDA_CHECK(cudaStreamSynchronize(stream_));  // `cum` is a local
  }
  if (opts_.scheme == SampleScheme::kLayerWise && !opts_.biased) {
    DSP_CHECK_ARG(part_.in_degree.defined() && part_.in_degree.dim(0) == n,
                  "gpu sampler: layer-wise sampling needs the in-degree array");
  }
  DSP_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

GpuSampler::~GpuSampler() {
  if (stream_) cudaStreamDestroy(stream_);
}

// The CPU sampler's layer-wise counts (CollectiveSampler::layerwise_counts), on the host: one
// sequential pass over the frontier with the shared weighted_one.
std::vector<int32_t> GpuSampler::layerwise_counts(const std::vector<int64_t>& frontier, int n,
                                                  uint64_t key) const {
  const int64_t F = static_cast<int64_t>(frontier.size());
  std::vector<int32_t> c(F, 0);
  if (F == 0) return c;
  std::vector<double> cum(F);
  double acc = 0;
  const int64_t* deg = opts_.biased ? nullptr : part_.in_degree.data<int64_t>();
  for (int64_t i = 0; i < F; ++i) {
    acc += opts_.biased ? weight_sum_[frontier[i]] : static_cast<double>(deg[frontier[i]]);
    cum[i] = acc;
  }
  RngStream s(key, static_cast<uint64_t>(frontier[0]), csp::kPurposeLayerWise);
  for (int j = 0; j < n; ++j) {
    int64_t i = csp::weighted_one(cum.data(), F, s);
    if (i < 0) break;
    ++c[i];
  }
  return c;
}

Block GpuSampler::run_layer(const std::vector<int64_t>& frontier, const std::vector<int32_t>& fan,
                            int uniform_fanout, uint64_t key) {
  const int64_t nd = static_cast<int64_t>(frontier.size());
  // Tasks and output slots, as the CPU sampler lays them out (slot = prefix of the fanouts).
  std::vector<int64_t> tasks(nd), slot(nd);
  int64_t total = 0;
  for (int64_t i = 0; i < nd; ++i) {
    const int k = fan.empty() ? uniform_fanout : fan[i];
    tasks[i] = csp::pack_task(frontier[i], k);
    slot[i] = total;
    total += k;
  }
  const bool weighted = opts_.biased;
  upload(tasks_, tasks.data(), tasks.size(), stream_);
  upload(slot_, slot.data(), slot.size(), stream_);
  auto* cnt = cnt_.reserve_as<int32_t>(std::max<int64_t>(nd, 1));
  auto* out = out_.reserve_as<int64_t>(std::max<int64_t>(total, 1));
  float* outw = weighted ? outw_.reserve_as<float>(std::max<int64_t>(total, 1)) : nullptr;
  DSP_CUDA_CHECK(launch_sample_nodewise(
      static_cast<const int64_t*>(tasks_.data()), nd, key, static_cast<const int64_t*>(indptr_.data()),
      indices_dev_, idx32_, /*row_base=*/0, weighted ? static_cast<const double*>(cum_.data()) : nullptr,
      weighted ? static_cast<const float*>(weights_.data()) : nullptr, weighted, opts_.replace,
      static_cast<const int64_t*>(slot_.data()), cnt, out, outw, stream_));

  // keys = destination nodes, then the compacted picks: the relabel input, CPU order.
  auto* keys = keys_.reserve_as<int64_t>(static_cast<size_t>(nd + total) + 1);
  auto* offsets = offsets_.reserve_as<int64_t>(static_cast<size_t>(nd) + 1);
  float* pw = weighted ? picks_w_.reserve_as<float>(std::max<int64_t>(total, 1)) : nullptr;
  if (nd) {
    DSP_CUDA_CHECK(cudaMemcpyAsync(keys, frontier.data(), nd * sizeof(int64_t),
                                   cudaMemcpyHostToDevice, stream_));
  }
  const size_t cws = compact_workspace_bytes(nd);
  DSP_CUDA_CHECK(launch_compact_picks(cnt, static_cast<const int64_t*>(slot_.data()), out, outw, nd,
                                      work_.reserve(cws), cws, offsets, keys + nd, pw, stream_));
  Block b;
  b.num_dst = nd;
  download(b.indptr, offsets, static_cast<size_t>(nd) + 1, stream_);
  DSP_CUDA_CHECK(cudaStreamSynchronize(stream_));
  const int64_t ne = b.indptr.back();
  const int64_t nk = nd + ne;

  uint64_t cap = 1024;
  while (cap < 2 * static_cast<uint64_t>(nk)) cap <<= 1;
  const size_t rws = relabel_workspace_bytes(nk);
  auto* local = local_.reserve_as<int64_t>(std::max<int64_t>(nk, 1));
  auto* src = src_ids_.reserve_as<int64_t>(std::max<int64_t>(nk, 1));
  auto* nsrc = num_src_.reserve_as<int64_t>(1);
  DSP_CUDA_CHECK(launch_relabel(keys, nk, table_.reserve_as<uint64_t>(cap), cap, work_.reserve(rws),
                                rws, local, src, nsrc, stream_));
  int64_t num_src = 0;
  DSP_CUDA_CHECK(cudaMemcpyAsync(&num_src, nsrc, sizeof(int64_t), cudaMemcpyDeviceToHost, stream_));
  download(b.indices, local + nd, static_cast<size_t>(ne), stream_);
  if (weighted) download(b.weights, pw, static_cast<size_t>(ne), stream_);
  DSP_CUDA_CHECK(cudaStreamSynchronize(stream_));
  b.num_src = num_src;
  download(b.src_ids, src, static_cast<size_t>(num_src), stream_);
  DSP_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return b;
}

SampledBatch GpuSampler::sample(const std::vector<int64_t>& seeds, int64_t epoch, int64_t batch) {
  {
    std::vector<int64_t> s(seeds);
    std::sort(s.begin(), s.end());
    for (size_t i = 0; i < s.size(); ++i) {
      DSP_CHECK_ARG(s[i] >= 0 && s[i] < part_.meta.num_nodes,
                    "sampler: seed {} is not a node id (graph has {} nodes)", s[i],
                    part_.meta.num_nodes);
      DSP_CHECK_ARG(i == 0 || s[i] != s[i - 1], "sampler: seed {} appears more than once in the batch",
                    s[i]);
    }
  }
  DSP_CUDA_CHECK(cudaSetDevice(gopts_.device));
  const int L = static_cast<int>(opts_.fanouts.size());
  SampledBatch out;
  out.epoch = epoch;
  out.batch = batch;
  out.seeds = seeds;
  std::vector<Block> blocks;
  blocks.reserve(L);
  std::vector<int64_t> frontier = seeds;
  std::vector<int32_t> fan;
  for (int l = 0; l < L; ++l) {
    const uint64_t key = rng_key(opts_.seed, epoch, batch, l);
    if (opts_.scheme == SampleScheme::kLayerWise) fan = layerwise_counts(frontier, opts_.fanouts[l], key);
    blocks.push_back(run_layer(frontier, fan, opts_.fanouts[l], key));
    if (l + 1 < L) frontier = blocks.back().src_ids;
  }
  std::reverse(blocks.begin(), blocks.end());
  out.blocks = std::move(blocks);
  return out;
}

// ---- DeviceFeatures ---------------------------------------------------------------------------

DeviceFeatures::DeviceFeatures(const PartitionData& part, int device) {
  DSP_CHECK_ARG(part.features.defined() && part.features.ndim() == 2,
                "device features: the partition has no [N, F] features");
  DSP_CUDA_CHECK(cudaSetDevice(device));
  DSP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  num_nodes_ = part.features.dim(0);
  row_bytes_ = static_cast<size_t>(part.features.dim(1)) * dtype_size(part.features.dtype());
  const auto* base = static_cast<const unsigned char*>(part.features.raw());
  // Cold rows: the whole mapping, pinned and read through UVA (read-only when it is a file mapping).
  cold_ = std::make_unique<HostRegistration>(base, part.features.nbytes(), part.features.is_mapped());
  // Hot rows: this part's cached list, in slot order, in device memory.
  std::vector<int32_t> slot(static_cast<size_t>(num_nodes_), -1);
  cached_rows_ = part.cached.defined() ? part.cached.dim(0) : 0;
  std::vector<unsigned char> hot(static_cast<size_t>(cached_rows_) * row_bytes_);
  for (int64_t s = 0; s < cached_rows_; ++s) {
    const int64_t v = part.cached.int_at(s);
    DSP_CHECK_ARG(v >= 0 && v < num_nodes_ && slot[v] < 0, "device features: bad cached id {}", v);
    slot[v] = static_cast<int32_t>(s);
    std::memcpy(hot.data() + s * row_bytes_, base + v * row_bytes_, row_bytes_);
  }
  upload(cache_, hot.data(), hot.size(), stream_);
  upload(slot_, slot.data(), slot.size(), stream_);
  DSP_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

DeviceFeatures::~DeviceFeatures() {
  if (stream_) cudaStreamDestroy(stream_);
}

void DeviceFeatures::gather(const int64_t* ids_dev, int64_t n, void* out_dev,
                            cudaStream_t stream) const {
  DSP_CUDA_CHECK(launch_gather_rows(ids_dev, n, row_bytes_,
                                    cached_rows_ ? static_cast<const int32_t*>(slot_.data()) : nullptr,
                                    cached_rows_ ? cache_.data() : nullptr, cold_->device_ptr(),
                                    out_dev, stream));
}

std::vector<unsigned char> DeviceFeatures::gather(const std::vector<int64_t>& ids) {
  for (int64_t v : ids) {
    DSP_CHECK_ARG(v >= 0 && v < num_nodes_, "device features: id {} out of [0, {})", v, num_nodes_);
  }
  const int64_t n = static_cast<int64_t>(ids.size());
  upload(ids_, ids.data(), ids.size(), stream_);
  void* rows = rows_.reserve(std::max<size_t>(n * row_bytes_, 1));
  gather(static_cast<const int64_t*>(ids_.data()), n, rows, stream_);
  std::vector<unsigned char> out;
  download(out, rows, n * row_bytes_, stream_);
  DSP_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return out;
}

}  // namespace dsp::cuda
