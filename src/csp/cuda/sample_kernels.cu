// CSP sampling and relabelling kernels. The per-node logic is src/csp/sample_kernels.hpp, shared
// with the CPU sampler and tested there.
#include <cuda_runtime.h>

#include <cstdint>
#include <cub/cub.cuh>

#include "csp/cuda/sample_kernels.hpp"
#include "csp/sample_kernels.hpp"

namespace dsp::cuda {
namespace {

constexpr int kThreads = 256;

inline int blocks_for(int64_t n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

template <class Id>
__global__ void sample_kernel(const int64_t* tasks, int64_t n, uint64_t key, const int64_t* indptr,
                              const Id* indices, int64_t row_base, const double* cum,
                              const float* weights, bool weighted, bool replace,
                              const int64_t* slot, int32_t* cnt, int64_t* out, float* outw) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const int64_t v = csp::task_id(tasks[i]);
  const int k = csp::task_fanout(tasks[i]);
  const int64_t lv = v - row_base;
  const int64_t p0 = indptr[lv], deg = indptr[lv + 1] - p0;
  RngStream s(key, static_cast<uint64_t>(v), csp::kPurposeNodeWise);
  int64_t* o = out + slot[i];  // positions first, converted to ids in place
  int c = csp::sample_positions(deg, k, weighted, replace, weighted ? cum + p0 : nullptr, s, o);
  for (int j = 0; j < c; ++j) {
    if (outw) outw[slot[i] + j] = weights[p0 + o[j]];
    o[j] = static_cast<int64_t>(indices[p0 + o[j]]);
  }
  cnt[i] = c;
}

// Phase 1: every position offers itself as its key's first occurrence.
__global__ void relabel_insert_kernel(const int64_t* keys, int64_t n, unsigned long long* table,
                                      uint64_t mask, int shift) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const int64_t key = keys[i];
  const unsigned long long mine = csp::relabel_slot(key, static_cast<uint64_t>(i));
  const unsigned long long want = static_cast<unsigned long long>(key + 1);
  uint64_t h = csp::relabel_hash(key, shift);
  while (true) {
    unsigned long long prev = atomicCAS(table + h, 0ULL, mine);
    if (prev == 0ULL) return;
    if ((prev >> 32) == want) {
      // same key bits: the 64-bit minimum is the minimum position
      atomicMin(table + h, mine);
      return;
    }
    h = (h + 1) & mask;
  }
}

// Phase 2: flag first occurrences.
__global__ void relabel_flag_kernel(const int64_t* keys, int64_t n, const uint64_t* table,
                                    uint64_t mask, int shift, int64_t* flag) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  flag[i] = csp::relabel_find(table, mask, shift, keys[i]) == static_cast<uint32_t>(i) ? 1 : 0;
}

// Phase 4: ids of every position; distinct keys written in first-occurrence order.
__global__ void relabel_assign_kernel(const int64_t* keys, int64_t n, const uint64_t* table,
                                      uint64_t mask, int shift, const int64_t* scan, int64_t* local,
                                      int64_t* src_ids, int64_t* num_src) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const uint32_t first = csp::relabel_find(table, mask, shift, keys[i]);
  local[i] = scan[first];
  if (first == static_cast<uint32_t>(i)) src_ids[scan[i]] = keys[i];
  if (i == n - 1) *num_src = scan[i] + (first == static_cast<uint32_t>(i) ? 1 : 0);
}

__global__ void widen_counts_kernel(const int32_t* cnt, int64_t n, int64_t* wide) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) wide[i] = cnt[i];
}

__global__ void compact_kernel(const int32_t* cnt, const int64_t* slot, const int64_t* out,
                               const float* outw, int64_t n, const int64_t* offsets,
                               int64_t* picks, float* picks_w) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const int64_t from = slot[i], to = offsets[i];
  for (int j = 0; j < cnt[i]; ++j) {
    picks[to + j] = out[from + j];
    if (picks_w) picks_w[to + j] = outw[from + j];
  }
}

}  // namespace

cudaError_t launch_sample_nodewise(const int64_t* tasks, int64_t n, uint64_t key,
                                   const int64_t* indptr, const void* indices, bool idx32,
                                   int64_t row_base, const double* cum, const float* weights,
                                   bool weighted, bool replace, const int64_t* slot, int32_t* cnt,
                                   int64_t* out, float* outw, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (idx32) {
    sample_kernel<int32_t><<<blocks_for(n), kThreads, 0, stream>>>(
        tasks, n, key, indptr, static_cast<const int32_t*>(indices), row_base, cum, weights,
        weighted, replace, slot, cnt, out, outw);
  } else {
    sample_kernel<int64_t><<<blocks_for(n), kThreads, 0, stream>>>(
        tasks, n, key, indptr, static_cast<const int64_t*>(indices), row_base, cum, weights,
        weighted, replace, slot, cnt, out, outw);
  }
  return cudaGetLastError();
}

// Workspace: the counts widened to int64 [n], then CUB's scan storage.
size_t compact_workspace_bytes(int64_t n) {
  size_t cub_bytes = 0;
  cub::DeviceScan::InclusiveSum(nullptr, cub_bytes, static_cast<int64_t*>(nullptr),
                                static_cast<int64_t*>(nullptr), static_cast<int>(n));
  return static_cast<size_t>(n) * sizeof(int64_t) + cub_bytes + 256;
}

cudaError_t launch_compact_picks(const int32_t* cnt, const int64_t* slot, const int64_t* out,
                                 const float* outw, int64_t n, void* workspace,
                                 size_t workspace_bytes, int64_t* offsets, int64_t* picks,
                                 float* picks_w, cudaStream_t stream) {
  cudaError_t err = cudaMemsetAsync(offsets, 0, sizeof(int64_t), stream);
  if (err != cudaSuccess || n == 0) return err;
  if (n >= (int64_t{1} << 31) || workspace_bytes < compact_workspace_bytes(n) ||
      (picks_w && !outw)) {
    return cudaErrorInvalidValue;
  }
  auto* wide = static_cast<int64_t*>(workspace);
  void* cub_tmp = wide + n;
  size_t cub_bytes = workspace_bytes - static_cast<size_t>(n) * sizeof(int64_t);
  widen_counts_kernel<<<blocks_for(n), kThreads, 0, stream>>>(cnt, n, wide);
  if ((err = cudaGetLastError()) != cudaSuccess) return err;
  err = cub::DeviceScan::InclusiveSum(cub_tmp, cub_bytes, wide, offsets + 1, static_cast<int>(n),
                                      stream);
  if (err != cudaSuccess) return err;
  compact_kernel<<<blocks_for(n), kThreads, 0, stream>>>(cnt, slot, out, outw, n, offsets, picks,
                                                         picks_w);
  return cudaGetLastError();
}

// Workspace: flags [n] int64, scan [n] int64, then CUB's scan storage.
size_t relabel_workspace_bytes(int64_t n) {
  size_t cub_bytes = 0;
  cub::DeviceScan::ExclusiveSum(nullptr, cub_bytes, static_cast<int64_t*>(nullptr),
                                static_cast<int64_t*>(nullptr), static_cast<int>(n));
  return 2 * static_cast<size_t>(n) * sizeof(int64_t) + cub_bytes + 256;
}

cudaError_t launch_relabel(const int64_t* keys, int64_t n, uint64_t* table, uint64_t capacity,
                           void* workspace, size_t workspace_bytes, int64_t* local,
                           int64_t* src_ids, int64_t* num_src, cudaStream_t stream) {
  if (n == 0) return cudaMemsetAsync(num_src, 0, sizeof(int64_t), stream);
  int bits = 0;
  while ((uint64_t{1} << bits) < capacity) ++bits;
  if ((uint64_t{1} << bits) != capacity || capacity < 2 * static_cast<uint64_t>(n) ||
      n >= (int64_t{1} << 32) || workspace_bytes < relabel_workspace_bytes(n)) {
    return cudaErrorInvalidValue;
  }
  const uint64_t mask = capacity - 1;
  const int shift = 64 - bits;
  auto* flag = static_cast<int64_t*>(workspace);
  int64_t* scan = flag + n;
  void* cub_tmp = scan + n;
  size_t cub_bytes = workspace_bytes - 2 * static_cast<size_t>(n) * sizeof(int64_t);
  cudaError_t err = cudaMemsetAsync(table, 0, capacity * sizeof(uint64_t), stream);
  if (err != cudaSuccess) return err;
  relabel_insert_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
      keys, n, reinterpret_cast<unsigned long long*>(table), mask, shift);
  if ((err = cudaGetLastError()) != cudaSuccess) return err;
  relabel_flag_kernel<<<blocks_for(n), kThreads, 0, stream>>>(keys, n, table, mask, shift, flag);
  if ((err = cudaGetLastError()) != cudaSuccess) return err;
  err = cub::DeviceScan::ExclusiveSum(cub_tmp, cub_bytes, flag, scan, static_cast<int>(n), stream);
  if (err != cudaSuccess) return err;
  relabel_assign_kernel<<<blocks_for(n), kThreads, 0, stream>>>(keys, n, table, mask, shift, scan,
                                                                local, src_ids, num_src);
  return cudaGetLastError();
}

}  // namespace dsp::cuda
