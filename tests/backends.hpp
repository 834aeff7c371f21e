#pragma once
// The backends every device-neutral test runs on. In the CPU test binaries: the CPU backends and
// the device path executed on the host ("emulated"). In the CUDA build's *_cuda test binaries
// (DSP_TEST_CUDA): the CUDA backends, skipped where no GPU is visible, so gtest counts them as
// skipped, never as silently passed.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "csp/backend.hpp"
#include "csp/sampler.hpp"
#include "layout/store/feature_backend.hpp"
#ifdef DSP_TEST_CUDA
#include <cuda_runtime_api.h>

#include "csp/cuda/sampler_backend.hpp"
#include "layout/store/cuda/feature_backend.hpp"
#endif

namespace dsp::test {

// Every backend of this binary; with_cpu = false leaves out the CPU backends (the reference the
// others are compared with). "-uva" sampler backends keep the neighbour array in host memory
// (device index budget 0), read through map_host; "-split" ones keep half of it (the hottest rows)
// in backend memory and read the rest from the host.
inline std::vector<std::string> backend_names(bool with_cpu = true, bool with_uva = false) {
  std::vector<std::string> v;
#ifdef DSP_TEST_CUDA
  (void)with_cpu;  // the CUDA binary has no CPU backend
  v = {"cuda"};
  if (with_uva) v.insert(v.end(), {"cuda-uva", "cuda-split"});
#else
  if (with_cpu) v.push_back("cpu");
  v.push_back("emulated");
  if (with_uva) v.insert(v.end(), {"emulated-uva", "emulated-split"});
#endif
  return v;
}

// Sampler backends: backend_names() and their "-turbo" variants (SampleKernel::kTurbo; the CPU
// one splits batches over threads from 16 tasks per thread on).
inline std::vector<std::string> sampler_backend_names(bool with_cpu = true, bool with_uva = false) {
  std::vector<std::string> v = backend_names(with_cpu, with_uva);
#ifdef DSP_TEST_CUDA
  v.push_back("cuda-turbo");
#else
  if (with_cpu) v.push_back("cpu-turbo");
  v.push_back("emulated-turbo");
#endif
  return v;
}

// Why `name` cannot run here, or "" when it can.
inline std::string backend_unavailable(const std::string& name) {
#ifdef DSP_TEST_CUDA
  if (name.rfind("cuda", 0) == 0) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) return "no CUDA device visible";
  }
#endif
  (void)name;
  return "";
}

#define DSP_SKIP_UNAVAILABLE_BACKEND(name)                                           \
  do {                                                                               \
    const std::string dsp_why_ = ::dsp::test::backend_unavailable(name);             \
    if (!dsp_why_.empty()) GTEST_SKIP() << "backend " << (name) << ": " << dsp_why_; \
  } while (0)

inline SamplerBackendFactory sampler_backend(const std::string& name);

// `name` without its "-turbo", run with SampleKernel::kTurbo.
inline SamplerBackendFactory turbo_backend(const std::string& name) {
  SamplerBackendFactory base;
  if (name == "cpu-turbo") {
    CpuBackendOptions co;
    co.split_grain = 16;
    base = cpu_sampler_backend(co);
  } else {
    base = sampler_backend(name.substr(0, name.size() - 6));
  }
  return [base](const LocalTopology& t, const SamplerOptions& o) {
    SamplerOptions turbo = o;
    turbo.kernel = SampleKernel::kTurbo;
    return base(t, turbo);
  };
}

inline SamplerBackendFactory sampler_backend(const std::string& name) {
  const std::string turbo = "-turbo";
  if (name.size() > turbo.size() && name.substr(name.size() - turbo.size()) == turbo) {
    return turbo_backend(name);
  }
  KernelBackendOptions uva;
  uva.index_budget = 0;
  if (name == "emulated") return emulated_sampler_backend();
  if (name == "emulated-uva") return emulated_sampler_backend(uva);
  if (name == "emulated-split" || name == "cuda-split") {
    return [name](const LocalTopology& t, const SamplerOptions& o) {
      KernelBackendOptions half;
      half.index_budget = t.indices_bytes() / 2;
#ifdef DSP_TEST_CUDA
      if (name == "cuda-split") {
        cuda::CudaSamplerOptions co;
        co.index_budget = half.index_budget;
        return cuda::cuda_sampler_backend(co)(t, o);
      }
#endif
      return emulated_sampler_backend(half)(t, o);
    };
  }
#ifdef DSP_TEST_CUDA
  if (name == "cuda") return cuda::cuda_sampler_backend();
  if (name == "cuda-uva") {
    cuda::CudaSamplerOptions o;
    o.index_budget = 0;
    return cuda::cuda_sampler_backend(o);
  }
#endif
  return make_cpu_sampler_backend;
}

inline FeatureBackendFactory feature_backend(const std::string& name) {
  if (name == "emulated") return make_emulated_feature_backend;
#ifdef DSP_TEST_CUDA
  if (name == "cuda") return cuda::cuda_feature_backend(0);
#endif
  return make_host_feature_backend;
}

}  // namespace dsp::test
