#pragma once
// A block's edges as a device sampler backend's relabel hands them out (csp/kernel_backend.hpp):
// packed in executor memory for one read (edge_words, pack, unpack), or kept there in pooled
// arrays set as Block::on_device (lend, put), reused once a block is released (after its
// consumer's work on it has completed: the trainer reads its loss back first).
#include <cstdint>
#include <cstring>
#include <memory>

#include "core/exec_memory.hpp"
#include "core/recycle_pool.hpp"
#include "csp/backend.hpp"

namespace dsp {

template <class Exec>
class DeviceBlockEdges {
 public:
  explicit DeviceBlockEdges(Device device) : device_(device) {}

  // Words of a block's edges packed for one read: nd + 1 offsets | ne local ids | ceil(ne / 2)
  // words of weights (w).
  static int64_t edge_words(int64_t nd, int64_t ne, bool w) {
    return nd + 1 + ne + (w ? (ne + 1) / 2 : 0);
  }
  // Issues the copies of a block's edges (the picks' local ids at `local`) into `at`, edge_words.
  static void pack(Exec& ex, int64_t* at, int64_t nd, const LayerPicks& lo, int64_t ne,
                   const int64_t* local, bool w) {
    ex.copy(at, lo.offsets, static_cast<size_t>(nd + 1) * sizeof(int64_t));
    if (ne) ex.copy(at + nd + 1, local, ne * sizeof(int64_t));
    if (w && ne) ex.copy(at + nd + 1 + ne, lo.weights, ne * sizeof(float));
  }
  // Block b's host edges from the words `pack` packed, read back to h.
  static void unpack(const int64_t* h, int64_t nd, int64_t ne, bool w, Block& b) {
    b.on_device.reset();
    b.indptr.assign(h, h + nd + 1);
    b.indices.assign(h + nd + 1, h + nd + 1 + ne);
    b.weights.resize(w ? ne : 0);
    if (w && ne) std::memcpy(b.weights.data(), h + nd + 1 + ne, ne * sizeof(float));
  }

  // A block's offsets, local ids and weights (ne of each) and, given `src`, its source ids (ns)
  // copied into pooled arrays of executor memory.
  std::shared_ptr<BlockEdges> lend(Exec& ex, int64_t nd, const LayerPicks& lo, int64_t ne,
                                   const int64_t* local, const int64_t* src, int64_t ns) {
    std::shared_ptr<EdgeArrays> a = RecyclePool<EdgeArrays>::lend(pool_, [&ex] {
      return EdgeArrays{ex.buffer(), ex.buffer(), ex.buffer(), ex.buffer(), ex.fence()};
    });
    ex.wait(*a->fence);  // the last consumer's work on them first (nothing when none recorded)
    auto e = std::make_shared<BlockEdges>();
    e->device = device_;
    e->num_edges = ne;
    e->indptr = copied(ex, a->indptr, lo.offsets, nd + 1);
    e->indices = copied(ex, a->indices, local, ne);
    if (lo.weights) e->weights = copied(ex, a->weights, lo.weights, ne);
    if (src) e->src_ids = copied(ex, a->sources, src, ns);
    e->copy = &Exec::read;
    e->fence = a->fence;
    e->keep = std::move(a);
    return e;
  }
  // Sets b.on_device (the host edge vectors emptied).
  static void put(std::shared_ptr<BlockEdges> e, Block& b) {
    b.indptr.clear();
    b.indices.clear();
    b.weights.clear();
    b.on_device = std::move(e);
  }

 private:
  using Buffer = typename Exec::Buffer;
  struct EdgeArrays {
    Buffer indptr, indices, weights, sources;
    std::shared_ptr<ReleaseFence> fence;  // where the last consumer let go (BlockEdges::fence)
  };
  template <class T>
  static T* copied(Exec& ex, Buffer& buf, const T* from, int64_t n) {
    T* to = reserve<T>(buf, n);
    if (n) ex.copy(to, from, static_cast<size_t>(n) * sizeof(T));
    return to;
  }

  Device device_;
  std::shared_ptr<RecyclePool<EdgeArrays>> pool_ = std::make_shared<RecyclePool<EdgeArrays>>();
};

}  // namespace dsp
