// GPU-only tests of the CUDA build (run on a GPU machine by scripts/gpu/check.sh): the device RNG
// against host streams, host-range registration and where pinned pages lie. The sampler and feature
// backends run the device-neutral suites instead (test_*_cuda: tests/backends.hpp). Without a GPU
// every test skips.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <unordered_map>
#include <vector>

#include "ccc/communicator.hpp"
#include "core/cuda/check.hpp"
#include "core/cuda/memory.hpp"
#include "core/device.hpp"
#include "core/fs.hpp"
#include "core/rng.hpp"
#include "csp/cuda/rng_kernels.hpp"
#include "pipeline/cores.hpp"

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
  explicit Dev(size_t count) : n(count) {
    DSP_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), std::max<size_t>(n, 1) * sizeof(T)));
  }
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

TEST(CudaRng, DrawsEqualHostStreams) {
  REQUIRE_GPU();
  std::vector<int64_t> subjects;
  for (int64_t i = 0; i < 5000; ++i) subjects.push_back(i * 7919 + (i % 3) * (int64_t{1} << 35));
  const uint32_t per = 9;
  const uint64_t key = rng_key(42, 1, 2, 3);
  Dev<int64_t> d_sub(subjects);
  Dev<uint32_t> d_out(subjects.size() * per);
  DSP_CUDA_CHECK(
      cuda::launch_rng_draws(key, d_sub.p, static_cast<int64_t>(d_sub.n), per, d_out.p, nullptr));
  DSP_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint32_t> got = d_out.get();
  for (size_t i = 0; i < subjects.size(); ++i) {
    RngStream s(key, static_cast<uint64_t>(subjects[i]));
    for (uint32_t j = 0; j < per; ++j) ASSERT_EQ(got[i * per + j], s.next_u32()) << i << "," << j;
  }
}

// A second registration of a range (another store or rank of this process registered it first)
// must not fail, and the first owner's unregistering must not pull the range from under the
// second (registrations are counted per base address).
TEST(CudaMemory, BorrowerOutlivesTheFirstOwner) {
  REQUIRE_GPU();
  std::vector<unsigned char> host(1 << 20, 7);
  auto a = std::make_unique<cuda::HostRegistration>();
  cuda::HostRegistration b, inner;
  const void* da = a->map(host.data(), host.size(), false);
  const void* db = b.map(host.data(), host.size(), false);
  const void* di = inner.map(host.data() + 4096, 4096, true);
  EXPECT_NE(da, nullptr);
  EXPECT_EQ(da, db);
  EXPECT_EQ(static_cast<const unsigned char*>(da) + 4096, di);
  a.reset();  // the first owner lets go
  host[5] = 9;
  Dev<unsigned char> out(16);
  DSP_CUDA_CHECK(cudaMemcpy(out.p, db, 16, cudaMemcpyDefault));
  std::vector<unsigned char> want(16, 7);
  want[5] = 9;
  EXPECT_EQ(out.get(), want);
}

// cudaHostAlloc's pages lie on the NUMA node the allocating thread's memory is bound to: what
// dsp.Loader(pin_memory=True) relies on to put torch's pinned batches near the GPU
// (ThreadMemoryBinding over near_memory's nodes). Checked for every node this process may use.
TEST(CudaMemory, PinnedPagesFollowTheThreadsMemoryBinding) {
  REQUIRE_GPU();
  const std::vector<int> nodes = near_memory(Device::cpu()).nodes;
  std::printf("NUMA nodes: %s; nearest GPU 0: %s\n", format_cpu_list(nodes).c_str(),
              format_cpu_list(near_memory(Device::cuda(0)).nodes).c_str());
  const size_t bytes = size_t{8} << 20;
  for (int n : nodes) {
    ThreadMemoryBinding bind({n});
    if (!bind.bound()) GTEST_SKIP() << "the system refuses to bind a thread's memory";
    void* p = nullptr;
    DSP_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocPortable));
    std::memset(p, 1, bytes);
    const std::vector<int> on = memory_nodes(p, bytes);
    DSP_CUDA_CHECK(cudaFreeHost(p));
    if (on.empty()) GTEST_SKIP() << "the system does not report where pages lie";
    EXPECT_EQ(on, std::vector<int>{n}) << "pinned under a binding to node " << n;
  }
}

// CudaExec::to_device's staging (StagedUploads): the host may overwrite its bytes as soon as an
// upload returns, over many rounds of the pinned ring, while the stream is busy with earlier
// work (so that chunks come round again while their copies still wait behind it); uploads
// larger than a chunk are copied directly.
TEST(CudaMemory, StagedUploadsLetTheHostReuseItsBytesOnReturn) {
  REQUIRE_GPU();
  auto lane = std::make_shared<cuda::Lane>(0);
  cuda::DeviceBuffer busy_a(lane), busy_b(lane), dst(lane);
  const size_t busy = size_t{1} << 30;
  void* a = busy_a.reserve(busy);
  void* b = busy_b.reserve(busy);
  std::vector<size_t> at, len;
  size_t total = 0;
  std::mt19937 rng(3);
  for (int i = 0; i < 4000; ++i) {
    const size_t n = i % 500 == 7 ? (size_t{200} << 10) : 1 + rng() % 4096;
    at.push_back(total);
    len.push_back(n);
    total += n;
  }
  auto* d = static_cast<unsigned char*>(dst.reserve(total));
  for (int r = 0; r < 8; ++r) {
    DSP_CUDA_CHECK(cudaMemcpyAsync(b, a, busy, cudaMemcpyDeviceToDevice, lane->stream()));
  }
  cuda::StagedUploads up(lane);
  std::vector<unsigned char> host, want(total);
  int waits = 0;
  for (size_t i = 0; i < at.size(); ++i) {
    const auto v = static_cast<unsigned char>(i * 7 + 1);
    host.assign(len[i], v);
    std::fill(want.begin() + static_cast<std::ptrdiff_t>(at[i]),
              want.begin() + static_cast<std::ptrdiff_t>(at[i] + len[i]), v);
    waits += up.upload(d + at[i], host.data(), len[i]);
    std::fill(host.begin(), host.end(), 0);  // reused at once
  }
  DSP_CUDA_CHECK(cudaStreamSynchronize(lane->stream()));
  std::vector<unsigned char> got(total);
  DSP_CUDA_CHECK(cudaMemcpy(got.data(), d, total, cudaMemcpyDeviceToHost));
  const auto bad = std::mismatch(got.begin(), got.end(), want.begin());
  EXPECT_TRUE(bad.first == got.end()) << "byte " << (bad.first - got.begin()) << " is "
                                      << int(*bad.first) << ", uploaded " << int(*bad.second);
  std::printf("staged uploads: %zu (%zu bytes), %d host waits for a chunk\n", at.size(), total,
              waits);
}

// A read-only file mapping (how a partition's neighbour array is opened) is readable by the
// device: registered read-only where the device supports it, else through a pinned copy.
TEST(CudaMemory, ReadOnlyFileMappingIsReadable) {
  REQUIRE_GPU();
  std::printf("read-only host registration supported: %s\n",
              cuda::read_only_registration_supported() ? "yes" : "no (pinned copy)");
  const std::string path = testing::TempDir() + "dsp_ro_mapping.bin";
  std::vector<unsigned char> bytes(3 << 20);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 31 + 7);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  MappedFile f(path);
  cuda::HostRegistration r;
  const void* d = r.map(f.data(), f.size(), true);
  Dev<unsigned char> out(bytes.size());
  DSP_CUDA_CHECK(cudaMemcpy(out.p, d, bytes.size(), cudaMemcpyDefault));
  EXPECT_EQ(out.get(), bytes);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace dsp
