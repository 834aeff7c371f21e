#pragma once
// Per-row aggregation logic of the train step, written once for the CPU loops (aggregate.cpp) and
// the CUDA kernels (cuda/aggregate_kernels.cu), so the CPU tests check exactly what the GPU runs.
// Plain pointers, no torch and no CUDA includes.
//
// Everything here walks the rows of a CSR pattern. A block's forward pattern has one row per
// destination node listing its in-edges (local source ids); the transposed pattern, used by the
// backward passes, has one row per source node listing the edges leaving it. Rows r < self_rows
// carry one more entry after their stored ones, the self loop (GCN and GAT add one per destination
// node): its column is self_col_base + r and its edge id self_eid_base + r, so per-edge arrays hold
// the E stored edges first and then one self loop per destination node.
//
// A function handles one row and one lane of kLanes: the CPU calls it with kLanes = 1 on every row
// (rows in parallel), a CUDA warp calls it with kLanes = 32, lane = its lane id. Lanes split the
// feature dimension (element j0 + c * kLanes + lane of a chunk, so a warp reads 32 consecutive
// floats and the CPU kChunk consecutive ones, which it vectorises) or the edges of the row (edge
// softmax), and combine through lane_sum / lane_max. Sums run in edge order within a lane, so the
// results do not depend on the thread count.
#include <cmath>
#include <cstdint>

#include "core/host_device.hpp"

namespace dsp::agg {

struct CsrRows {
  const int64_t* indptr = nullptr;  // [rows + 1]
  const int64_t* cols = nullptr;    // [E]
  const int64_t* eids = nullptr;    // [E] edge id of each entry; null: the entry's position
  int64_t self_rows = 0;
  int64_t self_col_base = 0;
  int64_t self_eid_base = 0;
};

// The (column, edge id) of entry k of row r, where k in [indptr[r], indptr[r+1]) are the stored
// entries and k == indptr[r+1] is the self loop.
struct Entry {
  int64_t col, eid;
};
DSP_HOST_DEVICE DSP_FORCEINLINE int64_t row_end(const CsrRows& g, int64_t r) {
  return g.indptr[r + 1] + (r < g.self_rows ? 1 : 0);
}
DSP_HOST_DEVICE DSP_FORCEINLINE Entry entry(const CsrRows& g, int64_t r, int64_t k) {
  if (k < g.indptr[r + 1]) return {g.cols[k], g.eids ? g.eids[k] : k};
  return {g.self_col_base + r, g.self_eid_base + r};
}

// Sum / max over the kLanes lanes of a warp (every lane gets the result). Only the CUDA pass
// instantiates kLanes > 1; on the host, kLanes is 1 and these are the identity.
template <int kLanes>
DSP_HOST_DEVICE DSP_FORCEINLINE float lane_sum(float v) {
#ifdef __CUDA_ARCH__
  for (int o = kLanes / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
#endif
  return v;
}
template <int kLanes>
DSP_HOST_DEVICE DSP_FORCEINLINE float lane_max(float v) {
#ifdef __CUDA_ARCH__
  for (int o = kLanes / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
#endif
  return v;
}

// out[r, h, :] = row_scale[r] * sum over entries (c, e) of row r of
//                edge_w[e, h] * col_scale[c] * x[c, h, :]
// with x [*, heads, dim], edge_w [*, heads] and the scales optional (null: 1). A row without
// entries gets zeros. Rows of x and out lie x_stride / out_stride floats apart (0: heads * dim),
// so either may be a column block of a wider matrix. This one function is the forward of mean / sum
// / GCN aggregation (heads 1, node scales) and of GAT's weighted aggregation (edge weights =
// attention), and, run over the transposed pattern with the two scales swapped, the gradient of
// each with respect to x.
struct SpmmArgs {
  CsrRows g;
  const float* x = nullptr;
  const float* edge_w = nullptr;
  const float* row_scale = nullptr;
  const float* col_scale = nullptr;
  int64_t heads = 1, dim = 0;
  int64_t x_stride = 0, out_stride = 0;
  float* out = nullptr;
};

namespace detail {

// Software prefetch of a row the host loop will read soon (the rows of x are read in random
// order, which the hardware prefetchers do not follow). Nothing on the device.
DSP_HOST_DEVICE DSP_FORCEINLINE void prefetch_row(const float* p, int64_t n) {
#ifndef __CUDA_ARCH__
  for (int64_t j = 0; j < n; j += 16) __builtin_prefetch(p + j);
#endif
}

// Entries ahead of the one being summed whose rows the host prefetches.
constexpr int64_t kPrefetchDistance = 6;

// One chunk of features [j0, j0 + kChunk * kLanes) of head h of row r. With one lane (the host)
// the chunk is contiguous and the loop bound is the remaining width, which the compiler
// vectorises; lanes of a warp stride and check the bound element by element.
template <int kLanes, int kChunk>
DSP_HOST_DEVICE DSP_FORCEINLINE void spmm_chunk(const SpmmArgs& a, int64_t r, int64_t h, int64_t j0,
                                                int lane) {
  float acc[kChunk];
  const int64_t H = a.heads, D = a.dim;
  const int64_t xs = a.x_stride ? a.x_stride : H * D, os = a.out_stride ? a.out_stride : H * D;
  const int64_t n = D - j0 < kChunk ? D - j0 : kChunk;  // kLanes == 1 only
  // The host zeroes and writes the row's n features only: a whole kChunk per row cost more than
  // the row's edges where rows are many and short (a block's sources, in the backward pass).
  const int64_t used = kLanes == 1 ? n : kChunk;
  for (int64_t c = 0; c < used; ++c) acc[c] = 0.f;
  const int64_t begin = a.g.indptr[r], stored_end = a.g.indptr[r + 1], end = row_end(a.g, r);
  for (int64_t k = begin; k < end; ++k) {
    const Entry en = entry(a.g, r, k);
    float w = a.edge_w ? a.edge_w[en.eid * H + h] : 1.f;
    if (a.col_scale) w *= a.col_scale[en.col];
    const float* xr = a.x + en.col * xs + h * D + j0 + lane;
    if constexpr (kLanes == 1) {
      if (k + kPrefetchDistance < stored_end) {
        prefetch_row(a.x + a.g.cols[k + kPrefetchDistance] * xs + h * D + j0, n);
      }
      for (int64_t c = 0; c < n; ++c) acc[c] += w * xr[c];
    } else {
      for (int c = 0; c < kChunk; ++c) {
        if (j0 + c * kLanes + lane < D) acc[c] += w * xr[c * kLanes];
      }
    }
  }
  const float s = a.row_scale ? a.row_scale[r] : 1.f;
  float* o = a.out + r * os + h * D + j0 + lane;
  if constexpr (kLanes == 1) {
    for (int64_t c = 0; c < n; ++c) o[c] = s * acc[c];
  } else {
    for (int c = 0; c < kChunk; ++c) {
      if (j0 + c * kLanes + lane < D) o[c * kLanes] = s * acc[c];
    }
  }
}

}  // namespace detail

template <int kLanes, int kChunk>
DSP_HOST_DEVICE void spmm_row(const SpmmArgs& a, int64_t r, int lane) {
  for (int64_t h = 0; h < a.heads; ++h) {
    for (int64_t j0 = 0; j0 < a.dim; j0 += int64_t{kChunk} * kLanes) {
      detail::spmm_chunk<kLanes, kChunk>(a, r, h, j0, lane);
    }
  }
}

// The gradient of SpmmArgs' output with respect to the edge weights, per forward row r:
//   out[e, h] = row_scale[r] * col_scale[c] * dot(grad[r, h, :], x[c, h, :])  for every entry (c,
//   e)
// Lanes split the feature dimension; lane 0 writes.
struct SddmmArgs {
  CsrRows g;
  const float* grad = nullptr;  // [rows, heads, dim]
  const float* x = nullptr;     // [*, heads, dim]
  const float* row_scale = nullptr;
  const float* col_scale = nullptr;
  int64_t heads = 1, dim = 0;
  float* out = nullptr;  // [*, heads], indexed by edge id
};

template <int kLanes, int kChunk>
DSP_HOST_DEVICE void sddmm_row(const SddmmArgs& a, int64_t r, int lane) {
  const int64_t H = a.heads, D = a.dim;
  const int64_t end = row_end(a.g, r);
  const float rs = a.row_scale ? a.row_scale[r] : 1.f;
  for (int64_t k = a.g.indptr[r]; k < end; ++k) {
    const Entry en = entry(a.g, r, k);
    const float s = a.col_scale ? rs * a.col_scale[en.col] : rs;
    for (int64_t h = 0; h < H; ++h) {
      const float* gr = a.grad + (r * H + h) * D;
      const float* xr = a.x + (en.col * H + h) * D;
      // kChunk partial sums per lane: a reduction the compiler can vectorise without reassociating.
      // The host uses only the partials a feature reaches (a head is often narrower than the
      // chunk): the same sums, without zeroing and adding the rest for every edge.
      float part[kChunk];
      const int used = kLanes == 1 && D < kChunk ? static_cast<int>(D) : kChunk;
      for (int c = 0; c < used; ++c) part[c] = 0.f;
      for (int64_t j0 = 0; j0 < D; j0 += int64_t{kChunk} * kLanes) {
        for (int c = 0; c < used; ++c) {
          const int64_t j = j0 + c * kLanes + lane;
          if (j < D) part[c] += gr[j] * xr[j];
        }
      }
      float dot = 0.f;
      for (int c = 0; c < used; ++c) dot += part[c];
      dot = lane_sum<kLanes>(dot);
      if (lane == 0) a.out[en.eid * H + h] = s * dot;
    }
  }
}

// GAT's attention of destination row r (forward pattern, self loops included): per head h,
//   s_e = LeakyReLU_slope(el[c, h] + er[r, h]),  out[e, h] = exp(s_e - max) / sum_row exp(s - max)
// Lanes split the row's entries. A row without entries writes nothing.
struct EdgeSoftmaxArgs {
  CsrRows g;
  const float* el = nullptr;  // [num_src, heads]
  const float* er = nullptr;  // [rows, heads]
  int64_t heads = 1;
  float slope = 0.2f;
  float* out = nullptr;  // [E + self loops, heads], by edge id
};

DSP_HOST_DEVICE DSP_FORCEINLINE float leaky(float s, float slope) {
  return s > 0.f ? s : s * slope;
}

template <int kLanes>
DSP_HOST_DEVICE void edge_softmax_row(const EdgeSoftmaxArgs& a, int64_t r, int lane) {
  const int64_t H = a.heads;
  const int64_t begin = a.g.indptr[r], end = row_end(a.g, r);
  for (int64_t h = 0; h < H; ++h) {
    const float er = a.er[r * H + h];
    float m = -INFINITY;
    for (int64_t k = begin + lane; k < end; k += kLanes) {
      const Entry en = entry(a.g, r, k);
      const float s = leaky(a.el[en.col * H + h] + er, a.slope);
      a.out[en.eid * H + h] = s;
      m = fmaxf(m, s);
    }
    m = lane_max<kLanes>(m);
    float sum = 0.f;
    for (int64_t k = begin + lane; k < end; k += kLanes) {
      float* o = a.out + entry(a.g, r, k).eid * H + h;
      *o = expf(*o - m);
      sum += *o;
    }
    const float inv = 1.f / lane_sum<kLanes>(sum);
    for (int64_t k = begin + lane; k < end; k += kLanes) a.out[entry(a.g, r, k).eid * H + h] *= inv;
  }
}

// Its backward, per destination row r: given the attention att and its gradient grad_att,
//   grad_s[e, h] = att[e, h] * (grad_att[e, h] - sum_row att * grad_att) * LeakyReLU'(s_e)
//   grad_er[r, h] = sum_row grad_s
// (grad_el[c, h] is the sum of grad_s over the edges leaving c: an spmm over the transpose).
struct EdgeSoftmaxGradArgs {
  CsrRows g;
  const float* el = nullptr;
  const float* er = nullptr;
  const float* att = nullptr;
  const float* grad_att = nullptr;
  int64_t heads = 1;
  float slope = 0.2f;
  float* grad_s = nullptr;   // [E + self loops, heads]
  float* grad_er = nullptr;  // [rows, heads]
};

template <int kLanes>
DSP_HOST_DEVICE void edge_softmax_grad_row(const EdgeSoftmaxGradArgs& a, int64_t r, int lane) {
  const int64_t H = a.heads;
  const int64_t begin = a.g.indptr[r], end = row_end(a.g, r);
  for (int64_t h = 0; h < H; ++h) {
    float dot = 0.f;
    for (int64_t k = begin + lane; k < end; k += kLanes) {
      const int64_t i = entry(a.g, r, k).eid * H + h;
      dot += a.att[i] * a.grad_att[i];
    }
    dot = lane_sum<kLanes>(dot);
    const float er = a.er[r * H + h];
    float total = 0.f;
    for (int64_t k = begin + lane; k < end; k += kLanes) {
      const Entry en = entry(a.g, r, k);
      const int64_t i = en.eid * H + h;
      const float d = a.el[en.col * H + h] + er > 0.f ? 1.f : a.slope;
      const float gs = a.att[i] * (a.grad_att[i] - dot) * d;
      a.grad_s[i] = gs;
      total += gs;
    }
    total = lane_sum<kLanes>(total);
    if (lane == 0) a.grad_er[r * H + h] = total;
  }
}

}  // namespace dsp::agg
