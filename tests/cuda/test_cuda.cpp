// GPU tests of the CUDA build (DSP_WITH_CUDA=ON; run on a GPU machine by scripts/gpu-check.sh):
// the device RNG, sampling and relabelling kernels against the CPU sampler, and the feature gather
// kernel against features[ids], all exactly / bit for bit. Without a visible GPU every test skips.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <unordered_map>
#include <vector>

#include "ccc/communicator.hpp"
#include "core/fs.hpp"
#include "core/rng.hpp"
#include "csp/cuda/check.hpp"
#include "csp/cuda/gather_kernels.hpp"
#include "csp/cuda/gpu_sampler.hpp"
#include "csp/cuda/rng_kernels.hpp"
#include "csp/cuda/sample_kernels.hpp"
#include "csp/sampler.hpp"
#include "graph/generate.hpp"

namespace dsp {
namespace {

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#define REQUIRE_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device visible"

// A device array filled from / read back to host vectors.
template <class T>
struct Dev {
  T* p = nullptr;
  size_t n = 0;
  explicit Dev(size_t count) : n(count) { DSP_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), std::max<size_t>(n, 1) * sizeof(T))); }
  explicit Dev(const std::vector<T>& v) : Dev(v.size()) {
    if (n) DSP_CUDA_CHECK(cudaMemcpy(p, v.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~Dev() { cudaFree(p); }
  std::vector<T> get() const {
    std::vector<T> v(n);
    if (n) DSP_CUDA_CHECK(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
};

// A community graph (int32 neighbour ids) with positive weights and some zero weights.
const Csr& weighted_graph() {
  static Csr g = [] {
    CommunityOptions co;
    co.num_nodes = 5000;
    co.num_edges = 40000;
    co.num_communities = 8;
    co.feature_dim = 0;
    co.seed = 11;
    Csr c = generate_community(co).graph;
    std::vector<float> w(static_cast<size_t>(c.num_edges()));
    RngStream s(rng_key(3), 0);
    for (auto& x : w) x = (s.next_u32() % 7 == 0) ? 0.0f : 0.25f + s.uniform01() * 4;
    c.weights = Array::from_vector(std::move(w));
    return c;
  }();
  return g;
}

// The same graph with int64 neighbour ids.
const Csr& weighted_graph64() {
  static Csr g = [] {
    Csr c = weighted_graph();
    std::vector<int64_t> idx(static_cast<size_t>(c.num_edges()));
    for (int64_t e = 0; e < c.num_edges(); ++e) idx[e] = c.indices.int_at(e);
    c.indices = Array::from_vector(std::move(idx));
    return c;
  }();
  return g;
}

TEST(CudaRng, DrawsEqualHostStreams) {
  REQUIRE_GPU();
  std::vector<int64_t> subjects;
  for (int64_t i = 0; i < 5000; ++i) subjects.push_back(i * 7919 + (i % 3) * (int64_t{1} << 35));
  const uint32_t per = 9;
  const uint64_t key = rng_key(42, 1, 2, 3);
  Dev<int64_t> d_sub(subjects);
  Dev<uint32_t> d_out(subjects.size() * per);
  DSP_CUDA_CHECK(cuda::launch_rng_draws(key, d_sub.p, static_cast<int64_t>(d_sub.n), per, d_out.p, nullptr));
  DSP_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint32_t> got = d_out.get();
  for (size_t i = 0; i < subjects.size(); ++i) {
    RngStream s(key, static_cast<uint64_t>(subjects[i]));
    for (uint32_t j = 0; j < per; ++j) ASSERT_EQ(got[i * per + j], s.next_u32()) << i << "," << j;
  }
}

struct Scheme {
  const char* name;
  SampleScheme scheme;
  bool biased, replace, idx64;
};

class CudaSampling : public ::testing::TestWithParam<Scheme> {};

void expect_same_blocks(const SampledBatch& cpu, const SampledBatch& gpu) {
  ASSERT_EQ(cpu.blocks.size(), gpu.blocks.size());
  for (size_t l = 0; l < cpu.blocks.size(); ++l) {
    const Block &a = cpu.blocks[l], &b = gpu.blocks[l];
    SCOPED_TRACE("block " + std::to_string(l));
    ASSERT_EQ(a.num_dst, b.num_dst);
    ASSERT_EQ(a.num_src, b.num_src);
    ASSERT_EQ(a.indptr, b.indptr);
    ASSERT_EQ(a.src_ids, b.src_ids);
    ASSERT_EQ(a.indices, b.indices);
    ASSERT_EQ(a.weights.size(), b.weights.size());
    ASSERT_EQ(0, std::memcmp(a.weights.data(), b.weights.data(), a.weights.size() * sizeof(float)));
  }
}

// GPU blocks equal the CPU sampler's exactly in global ids, over several batches and epochs,
// with the neighbour array in device memory and read through UVA from pinned host memory.
TEST_P(CudaSampling, BlocksEqualCpuSampler) {
  REQUIRE_GPU();
  const Scheme sc = GetParam();
  const Csr& g = sc.idx64 ? weighted_graph64() : weighted_graph();
  PartitionData part = single_part(g);
  SamplerOptions o{{10, 5, 3}};
  o.scheme = sc.scheme;
  o.biased = sc.biased;
  o.replace = sc.replace;
  o.seed = 1234;
  auto comm = make_communicator("self");
  CollectiveSampler cpu(part, *comm, o);
  for (bool uva : {false, true}) {
    SCOPED_TRACE(uva ? "indices through UVA" : "indices in device memory");
    cuda::GpuSamplerOptions go;
    if (uva) go.device_index_budget = 0;
    cuda::GpuSampler gpu(part, o, go);
    EXPECT_EQ(gpu.indices_on_device(), !uva);
    for (int64_t batch = 0; batch < 4; ++batch) {
      std::vector<int64_t> seeds;
      for (int64_t i = 0; i < 256; ++i) seeds.push_back((i * 37 + batch * 101) % g.num_nodes);
      std::sort(seeds.begin(), seeds.end());
      seeds.erase(std::unique(seeds.begin(), seeds.end()), seeds.end());
      SampledBatch a = cpu.sample(seeds, 2, batch);
      SampledBatch b = gpu.sample(seeds, 2, batch);
      expect_same_blocks(a, b);
      if (HasFatalFailure()) return;
    }
    // Degenerate batches: no seeds, one seed.
    expect_same_blocks(cpu.sample({}, 0, 9), gpu.sample({}, 0, 9));
    expect_same_blocks(cpu.sample({17}, 0, 10), gpu.sample({17}, 0, 10));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Schemes, CudaSampling,
    ::testing::Values(Scheme{"uniform", SampleScheme::kNodeWise, false, false, false},
                      Scheme{"uniform_replace", SampleScheme::kNodeWise, false, true, false},
                      Scheme{"weighted", SampleScheme::kNodeWise, true, false, false},
                      Scheme{"weighted_replace", SampleScheme::kNodeWise, true, true, false},
                      Scheme{"uniform_idx64", SampleScheme::kNodeWise, false, false, true},
                      Scheme{"weighted_idx64", SampleScheme::kNodeWise, true, false, true},
                      Scheme{"layer", SampleScheme::kLayerWise, false, false, false},
                      Scheme{"layer_weighted", SampleScheme::kLayerWise, true, false, false}),
    [](const auto& info) { return std::string(info.param.name); });

// Relabelling alone on adversarial keys (many repeats, clustered and spread ids): local ids in
// order of first occurrence, as the CPU relabel gives them.
TEST(CudaRelabel, FirstOccurrenceOrder) {
  REQUIRE_GPU();
  for (int64_t n : {1, 2, 1000, 200000}) {
    std::vector<int64_t> keys(n);
    RngStream s(rng_key(5, n), 0);
    for (auto& k : keys) k = (s.next_u32() % 3 == 0) ? s.next_u32() % 50 : s.next_u32() % 4000000000u;
    std::unordered_map<int64_t, int64_t> first;
    std::vector<int64_t> want_local(n), want_src;
    for (int64_t i = 0; i < n; ++i) {
      auto it = first.emplace(keys[i], static_cast<int64_t>(want_src.size()));
      if (it.second) want_src.push_back(keys[i]);
      want_local[i] = it.first->second;
    }
    uint64_t cap = 1;
    while (cap < 2 * static_cast<uint64_t>(n)) cap <<= 1;
    Dev<int64_t> d_keys(keys), d_local(n), d_src(n), d_num(1);
    Dev<uint64_t> d_table(cap);
    Dev<unsigned char> d_ws(cuda::relabel_workspace_bytes(n));
    DSP_CUDA_CHECK(cuda::launch_relabel(d_keys.p, n, d_table.p, cap, d_ws.p, d_ws.n, d_local.p,
                                        d_src.p, d_num.p, nullptr));
    DSP_CUDA_CHECK(cudaDeviceSynchronize());
    const int64_t num = d_num.get()[0];
    ASSERT_EQ(num, static_cast<int64_t>(want_src.size())) << n;
    std::vector<int64_t> src = d_src.get();
    src.resize(num);
    EXPECT_EQ(src, want_src);
    EXPECT_EQ(d_local.get(), want_local);
  }
}

// ---- gather -------------------------------------------------------------------------------------

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("dsp_cuda_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

// Features [N, F] of dtype `dt` written to a file and mapped read-only, as a partition holds them;
// every 3rd node in the cached (hot) list.
struct FeatureRig {
  PartitionData part;
  std::vector<unsigned char> bytes;
  size_t row_bytes;
  FeatureRig(int64_t n, int64_t f, DType dt) {
    row_bytes = static_cast<size_t>(f) * dtype_size(dt);
    bytes.resize(n * row_bytes);
    RngStream s(rng_key(9, n, f), 0);
    for (auto& b : bytes) b = static_cast<unsigned char>(s.next_u32());
    const std::string path = temp_path(std::to_string(n) + "_" + std::to_string(f) + ".bin");
    { std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size()); }
    auto mf = std::make_shared<MappedFile>(path);
    std::filesystem::remove(path);
    part.meta.num_nodes = n;
    part.features = Array(dt, {n, f}, mf->data(), mf);
    std::vector<int64_t> cached;
    for (int64_t v = n - 1; v >= 0; v -= 3) cached.push_back(v);
    part.cached = Array::from_vector(std::move(cached));
  }
  std::vector<unsigned char> expect(const std::vector<int64_t>& ids) const {
    std::vector<unsigned char> out(ids.size() * row_bytes);
    for (size_t i = 0; i < ids.size(); ++i) {
      std::memcpy(out.data() + i * row_bytes, bytes.data() + ids[i] * row_bytes, row_bytes);
    }
    return out;
  }
};

// GPU-gathered rows equal features[ids] bit for bit: hot rows from the device cache, cold rows from
// the registered mapping through UVA; row sizes taking each access width (16, 8, 4, 2, 1 bytes).
TEST(CudaGather, RowsEqualFeaturesBitForBit) {
  REQUIRE_GPU();
  struct Shape { int64_t n, f; DType dt; };
  for (Shape sh : {Shape{3000, 100, DType::kFloat32}, Shape{2000, 6, DType::kFloat32},
                   Shape{2000, 3, DType::kFloat32}, Shape{1500, 7, DType::kFloat16},
                   Shape{1000, 1, DType::kUInt8}, Shape{10, 1024, DType::kFloat32}}) {
    SCOPED_TRACE(std::to_string(sh.n) + "x" + std::to_string(sh.f));
    FeatureRig rig(sh.n, sh.f, sh.dt);
    cuda::DeviceFeatures df(rig.part);
    EXPECT_EQ(df.row_bytes(), rig.row_bytes);
    std::vector<int64_t> ids;
    RngStream s(rng_key(1, sh.n), 0);
    for (int64_t i = 0; i < 4 * sh.n; ++i) ids.push_back(s.next_u32() % sh.n);  // repeats too
    ids.push_back(0);
    ids.push_back(sh.n - 1);
    EXPECT_EQ(df.gather(ids), rig.expect(ids));
    EXPECT_TRUE(df.gather(std::vector<int64_t>{}).empty());
  }
}

// The kernel alone: every row cold (no cache), odd output alignment forcing the byte path.
TEST(CudaGather, ColdOnlyAndUnalignedOutput) {
  REQUIRE_GPU();
  FeatureRig rig(777, 5, DType::kFloat32);
  std::vector<int64_t> ids;
  for (int64_t v = 776; v >= 0; v -= 2) ids.push_back(v);
  cuda::HostRegistration reg(rig.part.features.raw(), rig.part.features.nbytes(), true);
  Dev<int64_t> d_ids(ids);
  Dev<unsigned char> d_out(ids.size() * rig.row_bytes + 1);
  DSP_CUDA_CHECK(cuda::launch_gather_rows(d_ids.p, d_ids.n, rig.row_bytes, nullptr, nullptr,
                                          reg.device_ptr(), d_out.p + 1, nullptr));
  DSP_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<unsigned char> got = d_out.get();
  got.erase(got.begin());
  EXPECT_EQ(got, rig.expect(ids));
}

}  // namespace
}  // namespace dsp
