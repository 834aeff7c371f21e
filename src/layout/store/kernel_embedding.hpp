#pragma once
// The device embedding storage (embedding_storage.hpp), written once against an executor
// (core/host_exec.hpp): with CudaExec the CUDA storage (cuda/embedding_storage.cu), with HostExec
// the emulation CPU tests run.
//
// Memory: values, optimizer state and adam's step counts in executor buffers, allocated once;
// growth-only scratch for the row lists (uploaded per call) and the staged rows of a call. Every
// per-element step is one kernel of embedding_kernels.hpp; host rows cross in one copy each way.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/exec_memory.hpp"
#include "layout/store/embedding_kernels.hpp"
#include "layout/store/embedding_storage.hpp"

namespace dsp {

template <class Exec>
class KernelEmbeddingStorage final : public EmbeddingStorage {
 public:
  KernelEmbeddingStorage(Exec exec, std::string name, Device device, MemorySpace memory)
      : ex_(std::move(exec)), name_(std::move(name)), device_(device), memory_(memory) {}

  std::string name() const override { return name_; }
  Device device() const override { return device_; }
  MemorySpace memory() const override { return memory_; }

  void allocate(int64_t rows, int64_t dim, bool adam, const int64_t* dataset_ids, int64_t begin,
                uint64_t key, float scale) override {
    rows_ = rows, dim_ = dim, adam_ = adam;
    x_ = alloc(values_, cells() * sizeof(float));
    s1_ = alloc(state1_, cells() * sizeof(float));
    s2_ = adam ? alloc(state2_, cells() * sizeof(float)) : nullptr;
    t_ = adam ? alloc<int64_t>(steps_, static_cast<size_t>(rows) * sizeof(int64_t)) : nullptr;
    const int64_t* ids = dataset_ids ? upload(ex_, a_, dataset_ids, rows) : nullptr;
    ex_.for_each(rows, kernels::EmbeddingInitRow{ids, begin, dim, key, scale, x_});
    ex_.sync();
  }

  void read_rows(const int64_t* rows, int64_t n, float* host_out) override {
    if (n == 0) return;
    float* staged = stage(n);
    copy(upload(ex_, a_, rows, n), nullptr, x_, staged, n, 1.0f, false);
    ex_.to_host(host_out, staged, row_bytes(n));
    ex_.sync();
  }

  void place_rows(const float* host_rows, int64_t m, const int64_t* src, int64_t n,
                  float* out) override {
    if (n == 0) return;
    float* staged = stage(m);
    ex_.to_device(staged, host_rows, row_bytes(m));
    copy(upload(ex_, a_, src, n), nullptr, staged, out, n, 1.0f, false);
    ex_.sync();
  }

  void scale_rows(const float* grads, int64_t n, const int64_t* pos, float scale,
                  float* host_out) override {
    if (n == 0) return;
    float* staged = stage(n);
    copy(nullptr, upload(ex_, a_, pos, n), grads, staged, n, scale, true);
    ex_.to_host(host_out, staged, row_bytes(n));
    ex_.sync();
  }

  void step(const EmbeddingStepPlan& plan, const float* host_grads, int64_t m,
            const EmbeddingStepConsts& c) override {
    const int64_t T = static_cast<int64_t>(plan.touched.size());
    if (T == 0) return;
    float* g = stage(m);
    ex_.to_device(g, host_grads, row_bytes(m));
    const int64_t* touched = upload(ex_, a_, plan.touched.data(), T);
    const int64_t* start = upload(ex_, b_, plan.start.data(), T + 1);
    const int64_t* order =
        upload(ex_, c_, plan.order.data(), static_cast<int64_t>(plan.order.size()));
    ex_.for_each(T, kernels::EmbeddingStepRow{touched, start, order, g, x_, s1_, s2_, t_, dim_, c});
    ex_.sync();
  }

  const void* host_view(EmbeddingSection) const override { return nullptr; }
  void read_section(EmbeddingSection s, void* host, size_t bytes) const override {
    if (bytes) Exec::read(host, section(s), bytes);
  }
  void write_section(EmbeddingSection s, const void* host, size_t bytes) override {
    if (!bytes) return;
    ex_.to_device(const_cast<void*>(section(s)), host, bytes);
    ex_.sync();
  }
  const float* values() const override { return x_; }
  uint64_t bytes() const override {
    return cells() * sizeof(float) * (adam_ ? 3 : 2) +
           (adam_ ? static_cast<uint64_t>(rows_) * sizeof(int64_t) : 0);
  }

 private:
  using Buffer = typename Exec::Buffer;

  uint64_t cells() const { return static_cast<uint64_t>(rows_) * static_cast<uint64_t>(dim_); }
  size_t row_bytes(int64_t n) const { return static_cast<size_t>(n * dim_) * sizeof(float); }
  template <class T = float>
  T* alloc(Buffer& b, size_t bytes) {
    void* p = b.reserve(std::max<size_t>(bytes, 16));
    ex_.zero(p, bytes);
    return static_cast<T*>(p);
  }
  const void* section(EmbeddingSection s) const {
    switch (s) {
      case EmbeddingSection::kValues:
        return x_;
      case EmbeddingSection::kState1:
        return s1_;
      case EmbeddingSection::kState2:
        return s2_;
      default:
        return t_;
    }
  }
  float* stage(int64_t rows) {
    return static_cast<float*>(stage_.reserve(std::max<size_t>(row_bytes(rows), 16)));
  }
  void copy(const int64_t* src, const int64_t* dst, const float* in, float* out, int64_t n,
            float scale, bool scaled) {
    ex_.for_each(n * dim_, kernels::EmbeddingCopyRows{src, dst, in, out, dim_, scale, scaled});
  }

  Exec ex_;
  std::string name_;
  Device device_;
  MemorySpace memory_;
  int64_t rows_ = 0, dim_ = 0;
  bool adam_ = false;
  Buffer values_ = ex_.buffer(), state1_ = ex_.buffer(), state2_ = ex_.buffer(),
         steps_ = ex_.buffer(), stage_ = ex_.buffer(), a_ = ex_.buffer(), b_ = ex_.buffer(),
         c_ = ex_.buffer();
  float *x_ = nullptr, *s1_ = nullptr, *s2_ = nullptr;
  int64_t* t_ = nullptr;
};

}  // namespace dsp
