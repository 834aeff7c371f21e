#pragma once
// Feature gather on the GPU (the CUDA build's loader data path, DESIGN.md "Devices and backends"):
// hot rows live in a device-memory cache, cold rows are read straight from the memory-mapped
// features file, registered with cudaHostRegister and addressed through UVA. Compiled by nvcc in
// dsp::kernels; every pointer below is device-accessible (device memory or a registered host
// range's device pointer).
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace dsp::cuda {

// out row i (row_bytes bytes) = features[ids[i]] for i < n: from cache row slot[ids[i]] when
// slot is non-null and slot[ids[i]] >= 0, else from cold row ids[i] (cold: the whole [N, F] file).
// ids must be in [0, N); rows may be requested more than once. One warp copies one row with the
// widest access (16, 8, 4, 2 or 1 bytes) that row_bytes and the three base pointers allow.
cudaError_t launch_gather_rows(const int64_t* ids, int64_t n, size_t row_bytes,
                               const int32_t* slot, const void* cache, const void* cold, void* out,
                               cudaStream_t stream);

}  // namespace dsp::cuda
