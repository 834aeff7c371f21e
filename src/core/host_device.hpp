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

// Asks the compiler to unroll the next loop completely (its trip count must be a constant).
// Nothing in nvcc's host pass, whose front end knows neither GCC's nor clang's form.
#if defined(__CUDA_ARCH__)
#define DSP_UNROLL _Pragma("unroll")
#elif defined(__CUDACC__)
#define DSP_UNROLL
#elif defined(__clang__)
#define DSP_UNROLL _Pragma("clang loop unroll(full)")
#else
#define DSP_UNROLL _Pragma("GCC unroll 16")
#endif

// A pointer through which nothing else of the function's is accessed (lets loops vectorize).
#define DSP_RESTRICT __restrict__

#include <cstdint>

namespace dsp {

// 64-bit atomics for per-element logic that runs concurrently on the device and in the host
// emulation of the device path (relaxed order: callers synchronise between phases).
// Compare-and-swap: stores `desired` if *p == expected; returns the value *p held before.
DSP_HOST_DEVICE DSP_FORCEINLINE uint64_t atomic_cas_u64(uint64_t* p, uint64_t expected,
                                                        uint64_t desired) {
#if defined(__CUDA_ARCH__)
  return atomicCAS(reinterpret_cast<unsigned long long*>(p), expected, desired);
#else
  __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return expected;
#endif
}

// *p = min(*p, v), atomically.
DSP_HOST_DEVICE DSP_FORCEINLINE void atomic_min_u64(uint64_t* p, uint64_t v) {
#if defined(__CUDA_ARCH__)
  atomicMin(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
#else
  uint64_t cur = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (v < cur &&
         !__atomic_compare_exchange_n(p, &cur, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
#endif
}

// *p += v, atomically.
DSP_HOST_DEVICE DSP_FORCEINLINE void atomic_add_u64(uint64_t* p, uint64_t v) {
#if defined(__CUDA_ARCH__)
  atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
#else
  __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
#endif
}

}  // namespace dsp
