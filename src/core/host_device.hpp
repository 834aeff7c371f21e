#pragma once
// Marks functions compiled for both host and device, so per-element logic is written once and the
// CPU tests check exactly what the CUDA kernels run.
#if defined(__CUDACC__)
#define DSP_HOST_DEVICE __host__ __device__
#define DSP_FORCEINLINE __forceinline__
#else
#define DSP_HOST_DEVICE
#define DSP_FORCEINLINE inline __attribute__((always_inline))
#endif
