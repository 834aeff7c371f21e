// GPU-only tests of the CUDA build (run on a GPU machine by scripts/gpu-check.sh): the device RNG
// against host streams, and host-range registration. The sampler and feature backends run the
// device-neutral suites instead (test_*_cuda: tests/backends.hpp). Without a GPU every test skips.
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
#include "core/cuda/check.hpp"
#include "core/cuda/memory.hpp"
#include "csp/cuda/rng_kernels.hpp"

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

// A second registration of a range (another store or rank of this process registered it first)
// must not fail, and the first owner's unregistering must not be undone by the second's.
TEST(CudaMemory, SecondRegistrationOfARangeSucceeds) {
  REQUIRE_GPU();
  std::vector<unsigned char> host(1 << 20, 7);
  cuda::HostRegistration a, b;
  const void* da = a.map(host.data(), host.size(), false);
  const void* db = b.map(host.data(), host.size(), false);
  EXPECT_NE(da, nullptr);
  EXPECT_EQ(da, db);
  Dev<unsigned char> out(16);
  DSP_CUDA_CHECK(cudaMemcpy(out.p, db, 16, cudaMemcpyDefault));
  EXPECT_EQ(out.get(), std::vector<unsigned char>(16, 7));
}

}  // namespace
}  // namespace dsp
