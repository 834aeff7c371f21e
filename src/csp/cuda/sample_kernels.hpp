#pragma once
// Host-callable launchers of the CSP sampling and relabelling kernels (compiled by nvcc in
// dsp::kernels). Every pointer is a device pointer. The per-task logic is the same
// DSP_HOST_DEVICE code the CPU sampler runs (src/csp/sample_kernels.hpp), so given the same
// tasks and key the picks are bit-identical to the CPU path.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace dsp::cuda {

// Node-wise sampling, one thread per task. tasks[i] = csp::pack_task(global id, fanout) of a node
// this rank owns (local row = id - row_base). Picks of task i go to out[slot[i], slot[i] + fanout)
// (global ids, sorted by row position), their count to cnt[i]; outw (may be null) receives the
// edge weights. cum (inclusive per-row prefix sums of the weights, double) is needed when
// weighted. indices is int32 (idx32) or int64.
cudaError_t launch_sample_nodewise(const int64_t* tasks, int64_t n, uint64_t key,
                                   const int64_t* indptr, const void* indices, bool idx32,
                                   int64_t row_base, const double* cum, const float* weights,
                                   bool weighted, bool replace, const int64_t* slot, int32_t* cnt,
                                   int64_t* out, float* outw, cudaStream_t stream);

// Compaction of the sampled picks (the CPU sampler's per-layer offsets + neighbour list):
// offsets[0] = 0, offsets[i + 1] = offsets[i] + cnt[i] (n + 1 int64), picks[offsets[i] + j] =
// out[slot[i] + j] and picks_w likewise from outw (both weight pointers null when unweighted),
// j < cnt[i]. workspace_bytes comes from compact_workspace_bytes(n).
size_t compact_workspace_bytes(int64_t n);
cudaError_t launch_compact_picks(const int32_t* cnt, const int64_t* slot, const int64_t* out,
                                 const float* outw, int64_t n, void* workspace,
                                 size_t workspace_bytes, int64_t* offsets, int64_t* picks,
                                 float* picks_w, cudaStream_t stream);

// Deterministic relabelling of keys[0, n) (destination nodes first, then the picks in
// (destination, neighbour) order, as on the CPU): local[i] = local id of keys[i], src_ids[j] =
// global id of local id j, *num_src (device) = number of distinct keys. Local ids follow first
// occurrence exactly like the CPU relabel, so CPU and GPU blocks are identical: each key's slot in
// an open-addressing table records the minimum position it occurs at (atomicMin), the first
// occurrences are flagged and prefix-summed (CUB), and every position looks its id up.
// `table` holds `capacity` (a power of two >= 2 n) uint64 slots; workspace_bytes comes from
// relabel_workspace_bytes(n).
size_t relabel_workspace_bytes(int64_t n);
cudaError_t launch_relabel(const int64_t* keys, int64_t n, uint64_t* table, uint64_t capacity,
                           void* workspace, size_t workspace_bytes, int64_t* local,
                           int64_t* src_ids, int64_t* num_src, cudaStream_t stream);

}  // namespace dsp::cuda
