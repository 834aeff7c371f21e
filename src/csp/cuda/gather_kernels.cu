// Feature gather kernel: device cache rows and UVA reads of the registered feature mapping.
#include <cuda_runtime.h>

#include <cstdint>

#include "csp/cuda/gather_kernels.hpp"

namespace dsp::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / 32;
constexpr int kMaxBlocks = 65535;

// One warp per row (grid-stride over rows); lanes stride over the row's V-sized words, so a warp
// issues 32 consecutive accesses: coalesced in the cache, full PCIe requests for cold rows.
template <class V>
__global__ void gather_kernel(const int64_t* __restrict__ ids, int64_t n, int64_t words,
                              const int32_t* __restrict__ slot, const V* __restrict__ cache,
                              const V* __restrict__ cold, V* __restrict__ out) {
  const int lane = threadIdx.x & 31;
  const int64_t first = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) >> 5;
  const int64_t step = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  for (int64_t i = first; i < n; i += step) {
    const int64_t v = ids[i];
    const int32_t s = slot ? slot[v] : -1;
    const V* src = s >= 0 ? cache + static_cast<int64_t>(s) * words : cold + v * words;
    V* dst = out + i * words;
    for (int64_t j = lane; j < words; j += 32) dst[j] = src[j];
  }
}

template <class V>
cudaError_t launch(const int64_t* ids, int64_t n, size_t row_bytes, const int32_t* slot,
                   const void* cache, const void* cold, void* out, cudaStream_t stream) {
  const int64_t words = static_cast<int64_t>(row_bytes / sizeof(V));
  int64_t blocks = (n + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  gather_kernel<V><<<static_cast<int>(blocks), kThreads, 0, stream>>>(
      ids, n, words, slot, static_cast<const V*>(cache), static_cast<const V*>(cold),
      static_cast<V*>(out));
  return cudaGetLastError();
}

bool aligned(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

}  // namespace

cudaError_t launch_gather_rows(const int64_t* ids, int64_t n, size_t row_bytes,
                               const int32_t* slot, const void* cache, const void* cold, void* out,
                               cudaStream_t stream) {
  if (n == 0 || row_bytes == 0) return cudaSuccess;
  if (!ids || !cold || !out || (slot && !cache)) return cudaErrorInvalidValue;
  // Widest access every row boundary and base pointer allows (the cache may be null: no slot).
  auto fits = [&](size_t a) {
    return row_bytes % a == 0 && aligned(cold, a) && aligned(out, a) && (!cache || aligned(cache, a));
  };
  if (fits(16)) return launch<uint4>(ids, n, row_bytes, slot, cache, cold, out, stream);
  if (fits(8)) return launch<uint2>(ids, n, row_bytes, slot, cache, cold, out, stream);
  if (fits(4)) return launch<uint32_t>(ids, n, row_bytes, slot, cache, cold, out, stream);
  if (fits(2)) return launch<uint16_t>(ids, n, row_bytes, slot, cache, cold, out, stream);
  return launch<uint8_t>(ids, n, row_bytes, slot, cache, cold, out, stream);
}

}  // namespace dsp::cuda
