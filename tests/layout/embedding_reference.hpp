#pragma once
// A dense, single-process reference of EmbeddingTable (layout/store/embedding_table.hpp), written
// straight from the header's formulas: rows indexed by dataset id, gradients summed in the order
// they are given. The arithmetic is the table's, in float with the same operation order, so a
// table whose owners receive the contributions in the same order equals it bitwise.
// Also the storages every embedding suite runs on (host and the emulated device storage here; the
// CUDA storage in the CUDA build's *_cuda binaries, skipped without a GPU).
#include <cmath>
#include <cstdint>
#include <new>
#include <string>
#include <vector>

#include "core/rng.hpp"
#include "layout/store/embedding_table.hpp"
#ifdef DSP_TEST_CUDA
#include <cuda_runtime_api.h>

#include "layout/store/cuda/embedding_storage.hpp"
#endif

namespace dsp::test {

// The initial row of dataset node `d`.
inline std::vector<float> initial_row(const EmbeddingOptions& o, int64_t d) {
  RngStream rs(embedding_key(o.seed), static_cast<uint64_t>(d));
  std::vector<float> row(static_cast<size_t>(o.dim));
  const float scale = static_cast<float>(o.init_scale);
  for (auto& x : row) x = (2.0f * rs.uniform01f() - 1.0f) * scale;
  return row;
}

// One gradient contribution: dataset node, its gradient row (dim floats), the requester's scale.
struct Contribution {
  int64_t node;
  const float* grad;
  float scale;
};

struct ReferenceTable {
  EmbeddingOptions o;
  std::vector<float> x, s1, s2;  // [n, dim]: values; adam m, v | adagrad s
  std::vector<int64_t> t;        // adam: per-row step count

  ReferenceTable(const EmbeddingOptions& opts, int64_t n) : o(opts) {
    const size_t cells = static_cast<size_t>(n * o.dim);
    for (int64_t d = 0; d < n; ++d) {
      const std::vector<float> r = initial_row(o, d);
      x.insert(x.end(), r.begin(), r.end());
    }
    s1.assign(cells, 0.0f);
    s2.assign(cells, 0.0f);
    t.assign(static_cast<size_t>(n), 0);
  }
  const float* row(int64_t d) const { return x.data() + d * o.dim; }

  // One apply_gradients: the contributions of every requester, in summation order.
  void step(const std::vector<Contribution>& cs) {
    const int64_t n = static_cast<int64_t>(t.size()), dim = o.dim;
    std::vector<float> g(static_cast<size_t>(n * dim), 0.0f);
    std::vector<bool> touched(static_cast<size_t>(n), false);
    for (const Contribution& c : cs) {
      touched[c.node] = true;
      for (int64_t j = 0; j < dim; ++j) g[c.node * dim + j] += c.grad[j] * c.scale;
    }
    const float lr = static_cast<float>(o.lr), eps = static_cast<float>(o.eps);
    const float b1 = static_cast<float>(o.beta1), b2 = static_cast<float>(o.beta2);
    const float c1 = static_cast<float>(1.0 - o.beta1), c2 = static_cast<float>(1.0 - o.beta2);
    for (int64_t d = 0; d < n; ++d) {
      if (!touched[d]) continue;
      t[d] += 1;
      const float bc1 = static_cast<float>(1.0 - std::pow(o.beta1, static_cast<double>(t[d])));
      const float bc2 = static_cast<float>(1.0 - std::pow(o.beta2, static_cast<double>(t[d])));
      for (int64_t j = 0; j < dim; ++j) {
        const size_t k = static_cast<size_t>(d * dim + j);
        const float gj = g[k];
        if (o.optimizer == EmbeddingOptimizer::kAdam) {
          s1[k] = b1 * s1[k] + c1 * gj;
          s2[k] = b2 * s2[k] + c2 * (gj * gj);
          x[k] -= lr * (s1[k] / bc1) / (std::sqrt(s2[k] / bc2) + eps);
        } else {
          s1[k] += gj * gj;
          x[k] -= lr * gj / (std::sqrt(s1[k]) + eps);
        }
      }
    }
  }
};

// The storages of this binary, by name.
inline std::vector<std::string> embedding_storages() {
#ifdef DSP_TEST_CUDA
  return {"cuda"};
#else
  return {"host", "emulated"};
#endif
}

// Why storage `name` cannot run here, or "".
inline std::string embedding_storage_unavailable(const std::string& name) {
#ifdef DSP_TEST_CUDA
  int n = 0;
  if (name == "cuda" && (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)) {
    return "no CUDA device visible";
  }
#endif
  (void)name;
  return "";
}

inline EmbeddingStorageFactory embedding_storage(const std::string& name) {
  if (name == "emulated") return make_emulated_embedding_storage;
#ifdef DSP_TEST_CUDA
  if (name == "cuda") return cuda::cuda_embedding_storage(0);
#endif
  return {};  // host
}

// `n` floats in a table's memory (device memory for a CUDA table), from and back to the host.
class TableFloats {
 public:
  TableFloats(const EmbeddingTable& t, const float* host, size_t n)
      : device_(t.storage().memory() == MemorySpace::kDevice), n_(n), host_(host, host + n) {
#ifdef DSP_TEST_CUDA
    if (device_) {
      void* p = nullptr;
      if (cudaMalloc(&p, n * sizeof(float) + 16) != cudaSuccess) throw std::bad_alloc();
      dev_ = static_cast<float*>(p);
      cudaMemcpy(dev_, host, n * sizeof(float), cudaMemcpyHostToDevice);
    }
#endif
  }
  ~TableFloats() {
#ifdef DSP_TEST_CUDA
    if (dev_) cudaFree(dev_);
#endif
  }
  TableFloats(const TableFloats&) = delete;
  TableFloats& operator=(const TableFloats&) = delete;
  float* data() { return device_ ? dev_ : host_.data(); }
  std::vector<float> to_host() {
#ifdef DSP_TEST_CUDA
    if (device_) cudaMemcpy(host_.data(), dev_, n_ * sizeof(float), cudaMemcpyDeviceToHost);
#endif
    return host_;
  }

 private:
  bool device_;
  size_t n_;
  std::vector<float> host_;
  float* dev_ = nullptr;
};

// apply_gradients of host gradient rows, whatever the table's memory.
inline void apply_host_gradients(EmbeddingTable& t, const std::vector<int64_t>& ids,
                                 const std::vector<float>& grads, float scale) {
  TableFloats g(t, grads.data(), grads.size());
  t.apply_gradients(ids.data(), static_cast<int64_t>(ids.size()), g.data(), scale);
}

// gather through the pointer API (rows land in the table's memory), brought to the host.
inline std::vector<float> gather_in_memory(EmbeddingTable& t, const std::vector<int64_t>& ids) {
  const std::vector<float> zeros(ids.size() * static_cast<size_t>(t.options().dim), 0.0f);
  TableFloats out(t, zeros.data(), zeros.size());
  t.gather(ids.data(), static_cast<int64_t>(ids.size()), out.data());
  return out.to_host();
}

}  // namespace dsp::test
