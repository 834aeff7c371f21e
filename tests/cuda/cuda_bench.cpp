// GPU benchmarks of the CUDA build (run by scripts/gpu-check.sh): sampling batches with the GPU
// sampler vs the CPU sampler on one rank, and gathering the batches' input rows with the GPU gather
// (hot rows in device memory, cold rows through UVA from the mapped file) vs the CPU gather.
// Prints one "bench <name> <value> <unit>" line per result.
// Usage: cuda_bench [nodes=1000000] [edges=10000000] [batches=20] [batch=1024] [dim=128]
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "ccc/communicator.hpp"
#include "core/fs.hpp"
#include "core/rng.hpp"
#include "core/timer.hpp"
#include "csp/cuda/check.hpp"
#include "csp/cuda/gpu_sampler.hpp"
#include "csp/sampler.hpp"
#include "graph/generate.hpp"
#include "layout/feature_store.hpp"

using namespace dsp;

int main(int argc, char** argv) {
  auto arg = [&](int i, int64_t d) { return argc > i ? std::atoll(argv[i]) : d; };
  const int64_t N = arg(1, 1000000), E = arg(2, 10000000), B = arg(3, 20), bs = arg(4, 1024),
                F = arg(5, 128);
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::printf("cuda_bench: no CUDA device\n");
    return 1;
  }
  CommunityOptions co;
  co.num_nodes = N;
  co.num_edges = E;
  co.feature_dim = 0;
  co.seed = 1;
  Stopwatch gen;
  Csr g = generate_community(co).graph;
  std::fprintf(stderr, "cuda_bench: graph %lld nodes, %lld edges (%.1f s)\n", (long long)N,
               (long long)g.num_edges(), gen.seconds());
  PartitionData part = single_part(g);
  SamplerOptions o{{15, 10, 5}};
  o.seed = 7;
  auto comm = make_communicator("self");
  CollectiveSampler cpu(part, *comm, o);
  cuda::GpuSampler gpu(part, o);
  std::vector<std::vector<int64_t>> seeds(B);
  RngStream s(rng_key(3), 0);
  for (auto& v : seeds) {
    std::vector<char> seen(N, 0);
    while (static_cast<int64_t>(v.size()) < bs) {
      int64_t x = s.next_u32() % N;
      if (!seen[x]) seen[x] = 1, v.push_back(x);
    }
  }
  gpu.sample(seeds[0], 0, 0);  // warm-up (buffers settle)
  double t_cpu = 0, t_gpu = 0;
  int64_t edges = 0;
  std::vector<std::vector<int64_t>> inputs;
  for (int64_t b = 0; b < B; ++b) {
    Stopwatch w;
    SampledBatch a = cpu.sample(seeds[b], 1, b);
    t_cpu += w.seconds();
    w.reset();
    SampledBatch x = gpu.sample(seeds[b], 1, b);
    t_gpu += w.seconds();
    for (auto& bl : x.blocks) edges += bl.num_edges();
    if (a.blocks.back().indices != x.blocks.back().indices) {
      std::printf("cuda_bench: GPU and CPU blocks differ at batch %lld\n", (long long)b);
      return 1;
    }
    inputs.push_back(x.input_nodes());
  }
  std::printf("bench sample_cpu_ms_per_batch %.3f ms\n", 1e3 * t_cpu / B);
  std::printf("bench sample_gpu_ms_per_batch %.3f ms\n", 1e3 * t_gpu / B);
  std::printf("bench sample_gpu_medges_per_s %.1f Medges/s\n", edges / t_gpu / 1e6);

  // Features: N x F float32 in a mapped file; the first 20% of ids hot.
  const size_t row = static_cast<size_t>(F) * 4;
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("dsp_cuda_bench_" + std::to_string(::getpid()))).string();
  {
    std::ofstream f(path, std::ios::binary);
    std::vector<float> r(F);
    for (int64_t v = 0; v < N; ++v) {
      for (int64_t j = 0; j < F; ++j) r[j] = static_cast<float>(v + j);
      f.write(reinterpret_cast<const char*>(r.data()), row);
    }
  }
  auto mf = std::make_shared<MappedFile>(path);
  std::filesystem::remove(path);
  part.features = Array(DType::kFloat32, {N, F}, mf->data(), mf);
  std::vector<int64_t> hot;
  for (int64_t v = 0; v < N / 5; ++v) hot.push_back(v);
  part.cached = Array::from_vector(std::move(hot));
  cuda::DeviceFeatures df(part);
  int64_t rows = 0;
  for (auto& in : inputs) rows += static_cast<int64_t>(in.size());
  std::vector<unsigned char> host(inputs[0].size() * row * 2);
  double g_cpu = 0, g_gpu = 0;
  int64_t* d_ids = nullptr;
  void* d_out = nullptr;
  size_t max_in = 0;
  for (auto& in : inputs) max_in = std::max(max_in, in.size());
  DSP_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_ids), max_in * sizeof(int64_t)));
  DSP_CUDA_CHECK(cudaMalloc(&d_out, max_in * row));
  host.resize(max_in * row);
  for (auto& in : inputs) {
    Stopwatch w;
    gather_rows(mf->data(), row, in.data(), static_cast<int64_t>(in.size()), host.data());
    g_cpu += w.seconds();
    DSP_CUDA_CHECK(cudaMemcpy(d_ids, in.data(), in.size() * sizeof(int64_t), cudaMemcpyHostToDevice));
    w.reset();
    df.gather(d_ids, static_cast<int64_t>(in.size()), d_out, nullptr);
    DSP_CUDA_CHECK(cudaDeviceSynchronize());
    g_gpu += w.seconds();
  }
  cudaFree(d_ids);
  cudaFree(d_out);
  std::printf("bench gather_cpu_gb_per_s %.2f GB/s\n", rows * row / g_cpu / 1e9);
  std::printf("bench gather_gpu_gb_per_s %.2f GB/s\n", rows * row / g_gpu / 1e9);
  return 0;
}
