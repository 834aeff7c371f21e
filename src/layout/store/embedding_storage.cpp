// The host embedding storage and the emulated device one (embedding_storage.hpp).
#include "layout/store/embedding_storage.hpp"

#include <cstring>
#include <vector>

#include "core/host_exec.hpp"
#include "core/huge_pages.hpp"
#include "core/parallel.hpp"
#include "layout/store/kernel_embedding.hpp"

namespace dsp {

namespace {

// A zeroed array of n values on transparent huge pages (core/huge_pages.hpp): the table's rows are
// read and written at random, and with 4 KiB pages nearly every row also missed the TLB.
template <class T>
class HugeArray {
 public:
  void zeros(size_t n) {
    buf_ = huge_page_zeros(n * sizeof(T));
    n_ = n;
  }
  T* data() { return static_cast<T*>(buf_.data.get()); }
  const T* data() const { return static_cast<const T*>(buf_.data.get()); }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }

 private:
  HugePageBuffer buf_;
  size_t n_ = 0;
};

// Host arrays; the kernels of embedding_kernels.hpp run on OpenMP threads, each row's arithmetic
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
    values_.zeros(cells);
    state1_.zeros(cells);
    if (adam) {
      state2_.zeros(cells);
      steps_.zeros(static_cast<size_t>(rows));
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
          for (int64_t j = 0; j < dim_; j += 16) __builtin_prefetch(ahead + j, 0, 3);
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
    // Row by row (the per-cell functor divides by dim per cell): the same products.
    const int64_t dim = dim_;
    parallel_for(0, n, 1024, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const float* DSP_RESTRICT in = grads + r * dim;
        float* DSP_RESTRICT out = host_out + pos[r] * dim;
        for (int64_t j = 0; j < dim; ++j) out[j] = in[j] * scale;
      }
    });
  }
  void step(const EmbeddingStepPlan& plan, const float* host_grads, int64_t /*m*/,
            const EmbeddingStepConsts& consts) override {
    // A row's step count is at most the steps so far: the bias corrections up to it, once.
    ++calls_;
    EmbeddingStepConsts c = consts;
    if (c.adam) {
      while (static_cast<int64_t>(bc1_.size()) <= calls_) {
        const int64_t n = static_cast<int64_t>(bc1_.size());
        bc1_.push_back(bias_correction(c.beta1, n));
        bc2_.push_back(bias_correction(c.beta2, n));
      }
      c.bc1 = bc1_.data();
      c.bc2 = bc2_.data();
      c.bc_size = static_cast<int64_t>(bc1_.size());
    }
    const kernels::EmbeddingStepRow f{
        plan.touched.data(), plan.start.data(), plan.order.data(), host_grads, values_.data(),
        state1_.data(),      state2_.data(),    steps_.data(),     dim_,       c};
    // Touched rows are scattered over the table: each step waits for its row of values, of each
    // state and its step count unless they were requested a few rows earlier.
    const int64_t* touched = plan.touched.data();
    const int64_t dim = dim_;
    parallel_for(0, static_cast<int64_t>(plan.touched.size()), 64, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        if (t + kStepAhead < e) {
          const int64_t at = touched[t + kStepAhead] * dim;
          for (int64_t j = 0; j < dim; j += 16) {  // one 64-byte line per 16 floats
            __builtin_prefetch(f.x + at + j, 0, 3);
            __builtin_prefetch(f.s1 + at + j, 0, 3);
            if (f.s2) __builtin_prefetch(f.s2 + at + j, 0, 3);
          }
          if (f.steps) __builtin_prefetch(f.steps + touched[t + kStepAhead], 0, 3);
        }
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

  // Rows ahead of the one being stepped (or copied) whose cache lines are requested: touched rows
  // are scattered, and without it each row's step waits for its memory.
  static constexpr int64_t kStepAhead = 12;

  int64_t dim_ = 0;
  int64_t calls_ = 0;               // steps taken (bounds every row's step count)
  std::vector<float> bc1_, bc2_;    // adam's bias corrections by step count
  HugeArray<float> values_;
  HugeArray<float> state1_, state2_;  // adam: m, v; adagrad: s, (empty)
  HugeArray<int64_t> steps_;          // adam: per-row step count
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
