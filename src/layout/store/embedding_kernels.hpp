#pragma once
// The embedding table's per-element logic (layout/store/embedding_table.hpp states the contract),
// written once as DSP_HOST_DEVICE functors: the host storage runs them on OpenMP threads, the
// device storage (kernel_embedding.hpp) launches them through an executor (CudaExec on a GPU,
// HostExec in the CPU tests). The float operations and their order are the contract's, so every
// storage computes the same bits (the CUDA build compiles them with --fmad=false: no fused
// multiply-adds).
#include <math.h>

#include <cstdint>

#include "core/host_device.hpp"
#include "core/rng.hpp"

namespace dsp {

// The step's constants in float, each computed in double and rounded once; the betas in double
// for the bias corrections.
struct EmbeddingStepConsts {
  float lr, eps, b1, one_minus_b1, b2, one_minus_b2;
  double beta1, beta2;
  bool adam;
};

namespace kernels {

// Row r of the table's values at its initial value: draw j of RngStream(key, dataset id of r).
struct EmbeddingInitRow {
  const int64_t* dataset_ids;  // dataset id of row r, or null: begin + r
  int64_t begin, dim;
  uint64_t key;
  float scale;
  float* x;  // [rows, dim]
  DSP_HOST_DEVICE void operator()(int64_t r) const {
    const int64_t id = dataset_ids ? dataset_ids[r] : begin + r;
    RngStream rs(key, static_cast<uint64_t>(id));
    float* row = x + r * dim;
    for (int64_t j = 0; j < dim; ++j) row[j] = (2.0f * rs.uniform01f() - 1.0f) * scale;
  }
};

// Cell i of a row copy: out row dst[r] (r when dst is null) = in row src[r] (r when src is null),
// multiplied by `scale` when `scaled` (the requester's gradient scaling), else copied.
struct EmbeddingCopyRows {
  const int64_t* src;
  const int64_t* dst;
  const float* in;
  float* out;
  int64_t dim;
  float scale;
  bool scaled;
  DSP_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t r = i / dim, j = i - r * dim;
    const int64_t from = src ? src[r] : r, to = dst ? dst[r] : r;
    const float v = in[from * dim + j];
    out[to * dim + j] = scaled ? v * scale : v;
  }
};

// One optimizer step of touched row t: its gradient is the sum, from 0, of the gradient rows
// order[start[t]] .. order[start[t + 1] - 1] in that order; then adam (the row's step count first)
// or adagrad, cell by cell, as the contract writes them.
struct EmbeddingStepRow {
  const int64_t* touched;  // local row of slot t
  const int64_t* start;    // [T + 1]
  const int64_t* order;    // gradient rows, slot by slot
  const float* grads;      // [*, dim]
  float* x;                // [rows, dim]
  float* s1;               // adam m | adagrad s
  float* s2;               // adam v
  int64_t* steps;          // adam: per-row step count
  int64_t dim;
  EmbeddingStepConsts c;
  DSP_HOST_DEVICE void operator()(int64_t t) const {
    const int64_t r = touched[t];
    float bc1 = 1.0f, bc2 = 1.0f;
    if (c.adam) {
      const double n = static_cast<double>(++steps[r]);
      bc1 = static_cast<float>(1.0 - ::pow(c.beta1, n));
      bc2 = static_cast<float>(1.0 - ::pow(c.beta2, n));
    }
    float* xr = x + r * dim;
    float* m = s1 + r * dim;
    float* v = c.adam ? s2 + r * dim : nullptr;
    for (int64_t j = 0; j < dim; ++j) {
      float g = 0.0f;
      for (int64_t q = start[t]; q < start[t + 1]; ++q) g += grads[order[q] * dim + j];
      if (c.adam) {
        m[j] = c.b1 * m[j] + c.one_minus_b1 * g;
        v[j] = c.b2 * v[j] + c.one_minus_b2 * (g * g);
        xr[j] -= c.lr * (m[j] / bc1) / (::sqrtf(v[j] / bc2) + c.eps);
      } else {
        m[j] += g * g;
        xr[j] -= c.lr * g / (::sqrtf(m[j]) + c.eps);
      }
    }
  }
};

}  // namespace kernels
}  // namespace dsp
