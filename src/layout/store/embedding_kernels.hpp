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
  // Optional (host memory, host storage): adam's bias corrections by step count n < bc_size,
  // bc1[n] = float(1 - beta1^n) and bc2[n] likewise, computed by bias_correction below: the same
  // values without a pow per row.
  const float* bc1 = nullptr;
  const float* bc2 = nullptr;
  int64_t bc_size = 0;
};

// 1 - beta^n in double, rounded to float: adam's bias correction after n steps of a row.
DSP_HOST_DEVICE inline float bias_correction(double beta, int64_t n) {
  return static_cast<float>(1.0 - ::pow(beta, static_cast<double>(n)));
}

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
// or adagrad, cell by cell, as the contract writes them. The cells of a row are independent, so
// the loops over them vectorize on the host (restrict pointers; the usual case of one gradient
// row reads it directly, with the same sum from 0).
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

  // Cell j of the slot's gradient: its rows q0 .. q1 - 1 summed from 0 in order.
  DSP_HOST_DEVICE float grad(int64_t q0, int64_t q1, int64_t j) const {
    float g = 0.0f;
    for (int64_t q = q0; q < q1; ++q) g += grads[order[q] * dim + j];
    return g;
  }
  DSP_HOST_DEVICE void operator()(int64_t t) const {
    const int64_t r = touched[t], q0 = start[t], q1 = start[t + 1];
    float* DSP_RESTRICT xr = x + r * dim;
    float* DSP_RESTRICT m = s1 + r * dim;
    const float* DSP_RESTRICT g1 = q1 - q0 == 1 ? grads + order[q0] * dim : nullptr;
    if (!c.adam) {
      for (int64_t j = 0; j < dim; ++j) {
        const float g = g1 ? 0.0f + g1[j] : grad(q0, q1, j);
        m[j] += g * g;
        xr[j] -= c.lr * g / (::sqrtf(m[j]) + c.eps);
      }
      return;
    }
    const int64_t n = ++steps[r];
    const bool known = n < c.bc_size;
    const float bc1 = known ? c.bc1[n] : bias_correction(c.beta1, n);
    const float bc2 = known ? c.bc2[n] : bias_correction(c.beta2, n);
    float* DSP_RESTRICT v = s2 + r * dim;
    if (g1) {
      for (int64_t j = 0; j < dim; ++j) adam_cell(0.0f + g1[j], bc1, bc2, xr[j], m[j], v[j]);
    } else {
      for (int64_t j = 0; j < dim; ++j) adam_cell(grad(q0, q1, j), bc1, bc2, xr[j], m[j], v[j]);
    }
  }
  DSP_HOST_DEVICE DSP_FORCEINLINE void adam_cell(float g, float bc1, float bc2, float& x_,
                                                 float& m_, float& v_) const {
    m_ = c.b1 * m_ + c.one_minus_b1 * g;
    v_ = c.b2 * v_ + c.one_minus_b2 * (g * g);
    x_ -= c.lr * (m_ / bc1) / (::sqrtf(v_ / bc2) + c.eps);
  }
};

}  // namespace kernels
}  // namespace dsp
