// The host embedding storage and the emulated device one (embedding_storage.hpp).
#include "layout/store/embedding_storage.hpp"

#include <cstring>
#include <vector>

#include "core/host_exec.hpp"
#include "core/parallel.hpp"
#include "layout/store/kernel_embedding.hpp"

namespace dsp {

namespace {

// Host vectors; the kernels of embedding_kernels.hpp run on OpenMP threads, each row's arithmetic
// on one thread.
class HostEmbeddingStorage final : public EmbeddingStorage {
 public:
  std::string name() const override { return "host"; }
  Device device() const override { return Device::cpu(); }
  MemorySpace memory() const override { return MemorySpace::kHost; }

  void allocate(int64_t rows, int64_t dim, bool adam, const int64_t* dataset_ids, int64_t begin,
                uint64_t key, float scale) override {
    dim_ = dim;
    const size_t cells = static_cast<size_t>(rows) * static_cast<size_t>(dim);
    values_.resize(cells);
    state1_.assign(cells, 0.0f);
    if (adam) {
      state2_.assign(cells, 0.0f);
      steps_.assign(static_cast<size_t>(rows), 0);
    }
    const kernels::EmbeddingInitRow f{dataset_ids, begin, dim, key, scale, values_.data()};
    each(rows, 1024, f);
  }

  void read_rows(const int64_t* rows, int64_t n, float* host_out) override {
    const size_t rb = static_cast<size_t>(dim_) * sizeof(float);
    parallel_for(0, n, 1024, [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k) {
        if (k + kStepAhead < e) {
          const float* ahead = values_.data() + rows[k + kStepAhead] * dim_;
          for (int64_t j = 0; j < dim_; j += 16) __builtin_prefetch(ahead + j, 0, 0);
        }
        std::memcpy(host_out + k * dim_, values_.data() + rows[k] * dim_, rb);
      }
    });
  }
  void place_rows(const float* host_rows, int64_t /*m*/, const int64_t* src, int64_t n,
                  float* out) override {
    const size_t rb = static_cast<size_t>(dim_) * sizeof(float);
    parallel_for(0, n, 1024, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) std::memcpy(out + i * dim_, host_rows + src[i] * dim_, rb);
    });
  }
  void scale_rows(const float* grads, int64_t n, const int64_t* pos, float scale,
                  float* host_out) override {
    each(n * dim_, 1024 * dim_,
         kernels::EmbeddingCopyRows{nullptr, pos, grads, host_out, dim_, scale, true});
  }
  void step(const EmbeddingStepPlan& plan, const float* host_grads, int64_t /*m*/,
            const EmbeddingStepConsts& c) override {
    const kernels::EmbeddingStepRow f{
        plan.touched.data(), plan.start.data(), plan.order.data(), host_grads, values_.data(),
        state1_.data(),      state2_.data(),    steps_.data(),     dim_,       c};
    // Touched rows are scattered over the table: each step waits for its row of values, of each
    // state and its step count unless they were requested a few rows earlier.
    const int64_t* touched = plan.touched.data();
    parallel_for(0, static_cast<int64_t>(plan.touched.size()), 64, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        if (t + kStepAhead < e) prefetch_row(touched[t + kStepAhead]);
        f(t);
      }
    });
  }

  const void* host_view(EmbeddingSection s) const override { return section(s); }
  void read_section(EmbeddingSection s, void* host, size_t bytes) const override {
    if (bytes) std::memcpy(host, section(s), bytes);
  }
  void write_section(EmbeddingSection s, const void* host, size_t bytes) override {
    if (bytes) std::memcpy(const_cast<void*>(section(s)), host, bytes);
  }
  const float* values() const override { return values_.data(); }
  uint64_t bytes() const override {
    return (values_.size() + state1_.size() + state2_.size()) * sizeof(float) +
           steps_.size() * sizeof(int64_t);
  }

 private:
  template <class F>
  static void each(int64_t n, int64_t grain, const F& f) {
    parallel_for(0, n, grain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) f(i);
    });
  }
  const void* section(EmbeddingSection s) const {
    switch (s) {
      case EmbeddingSection::kValues:
        return values_.data();
      case EmbeddingSection::kState1:
        return state1_.data();
      case EmbeddingSection::kState2:
        return state2_.data();
      default:
        return steps_.data();
    }
  }

  // Rows ahead of the one being stepped whose cache lines are requested (touched rows are
  // scattered: without it each row's step waits for its memory).
  static constexpr int64_t kStepAhead = 8;
  void prefetch_row(int64_t r) const {
    const size_t at = static_cast<size_t>(r) * static_cast<size_t>(dim_);
    for (int64_t j = 0; j < dim_; j += 16) {  // one 64-byte line per 16 floats
      __builtin_prefetch(values_.data() + at + j, 1, 0);
      __builtin_prefetch(state1_.data() + at + j, 1, 0);
      if (!state2_.empty()) __builtin_prefetch(state2_.data() + at + j, 1, 0);
    }
    if (!steps_.empty()) __builtin_prefetch(steps_.data() + r, 1, 0);
  }

  int64_t dim_ = 0;
  std::vector<float> values_;
  std::vector<float> state1_, state2_;  // adam: m, v; adagrad: s, (empty)
  std::vector<int64_t> steps_;          // adam: per-row step count
};

}  // namespace

std::unique_ptr<EmbeddingStorage> make_host_embedding_storage() {
  return std::make_unique<HostEmbeddingStorage>();
}

std::unique_ptr<EmbeddingStorage> make_emulated_embedding_storage() {
  return std::make_unique<KernelEmbeddingStorage<HostExec>>(HostExec{}, "emulated-device",
                                                            Device::cpu(), MemorySpace::kHost);
}

}  // namespace dsp
