#pragma once
// Captured sequences of an executor (core/host_exec.hpp: capture_begin, capture_end, launch), kept
// by shape: a device path whose sequences have fixed shapes once their sizes are rounded up
// (capture_size) runs each through `replay`, and the second call of a shape is captured (a CUDA
// Graph on a GPU) and every later one is one launch.
//
// A Shape names which of the Seqs sequences it is, its sizes, the executor's scratch moves and
// every array it reads or writes (the caller's, its own, each reserved for this shape first). A
// capture is valid for a call of the same shape: the arrays where they were, each as large as the
// shape needs. The first call of a shape runs directly (growing every buffer it takes, the
// executor's own included), the second is captured; any growth since moves an array a capture
// names, and so changes the shape. At most kMaxGraphs shapes are kept (the oldest goes first).
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dsp {

template <class Exec, int Seqs, int Arrays>
class CaptureCache {
 public:
  static constexpr size_t kMaxGraphs = 128;
  struct Shape {
    int seq;  // which sequence: [0, Seqs)
    int64_t size[4];
    int64_t scratch_moves;
    const void* arrays[Arrays];
    bool operator==(const Shape& o) const {
      return seq == o.seq && std::equal(size, size + 4, o.size) &&
             scratch_moves == o.scratch_moves && std::equal(arrays, arrays + Arrays, o.arrays);
    }
  };

  explicit CaptureCache(bool enabled) : enabled_(enabled) {}
  bool enabled() const { return enabled_; }
  // The launches of each sequence's captures.
  const std::array<int64_t, Seqs>& replays() const { return replays_; }

  // n rounded up to 3 significant bits (at most 12.5% more; 8 shapes per doubling), at least 256.
  static int64_t capture_size(int64_t n) {
    int64_t step = 32;
    while (step * 16 <= n) step *= 2;
    return std::max<int64_t>((n + step - 1) / step * step, 256);
  }

  // seq, the sequence of `shape`: run directly when disabled or the shape is new, else captured
  // (its second call) and launched.
  template <class F>
  void replay(Exec& ex, const Shape& shape, const F& seq) {
    if (!enabled_) return seq();
    auto it = std::find_if(captures_.begin(), captures_.end(),
                           [&](const Captured& g) { return g.shape == shape; });
    if (it == captures_.end()) {
      if (captures_.size() >= kMaxGraphs) captures_.erase(captures_.begin());  // the oldest
      captures_.emplace_back();
      captures_.back().shape = shape;
      return seq();
    }
    if (!it->captured) {
      ex.capture_begin();
      try {
        seq();
      } catch (...) {
        ex.capture_end();
        throw;
      }
      it->graph = ex.capture_end();
      it->captured = true;
    }
    ex.launch(it->graph);
    replays_[shape.seq] += 1;
  }

 private:
  struct Captured {
    Shape shape;
    bool captured = false;  // seen once (run directly, growing what it needs), or captured
    typename Exec::Graph graph;
  };
  bool enabled_;
  std::vector<Captured> captures_;
  std::array<int64_t, Seqs> replays_{};
};

}  // namespace dsp
