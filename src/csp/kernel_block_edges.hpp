#pragma once
// A block's edges as a device sampler backend's relabel hands them out (csp/kernel_backend.hpp):
// packed in executor memory with its source ids and read in one copy (set; read_with_sizes when
// the sizes are read with them), or, blocks_on_device, kept there in pooled arrays set as
// Block::on_device (lend, put; with ids_on_device the source ids too), reused once a block is
// released (after its consumer's work on it has completed: the trainer reads its loss back first).
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "core/error.hpp"
#include "core/exec_memory.hpp"
#include "core/recycle_pool.hpp"
#include "csp/backend.hpp"

namespace dsp {

template <class Exec>
class DeviceBlockEdges {
 public:
  DeviceBlockEdges(Exec& ex, Device device, bool on_device, bool ids_on_device)
      : device_(device), on_device_(on_device), ids_on_device_(ids_on_device), pack_(ex.buffer()) {}
  bool on_device() const { return on_device_; }
  bool ids_on_device() const { return ids_on_device_; }

  // relabel's sizes read (got: picks, sources, the sources' owner-chunk bounds when counted).
  static void take_sizes(const int64_t* got, Block& b, OwnerCounts* owners) {
    b.num_src = got[1];
    const int P = owners ? static_cast<int>(owners->counts.size()) : 0;
    for (int p = 0; p < P; ++p) owners->counts[p] = got[3 + p] - got[2 + p];
  }
  // relabel when lo.total is the picks' count: every size of block b but its source count is
  // known, so the block is read with the sizes in one copy, its source ids by their bound nd + ne
  // (words: sizes | edge_words | nd + ne sources); blocks_on_device: its edges copied into
  // the pool first, the sizes and source ids read.
  void read_with_sizes(Exec& ex, int64_t nd, const LayerPicks& lo, const int64_t* local,
                       const int64_t* src, const int64_t* sizes, Block& b, BackendBuffer* src_out,
                       OwnerCounts* owners) {
    const int64_t ne = lo.total, n = nd + ne;
    const int64_t ns = owners ? 3 + static_cast<int64_t>(owners->counts.size()) : 2;
    std::shared_ptr<BlockEdges> e;
    if (on_device_) e = lend(ex, nd, lo, ne, local + nd, nullptr, 0);
    const bool w = lo.weights && !e;
    const int64_t edges = e ? 0 : edge_words(nd, ne, w);
    auto* packed = reserve<int64_t>(pack_, ns + edges + n);
    ex.copy(packed, sizes, ns * sizeof(int64_t));
    if (!e) pack(ex, packed + ns, nd, lo, ne, local + nd, w);
    ex.copy(packed + ns + edges, src, n * sizeof(int64_t));
    if (src_out) ex.copy(src_out->reserve_n<int64_t>(n), src, n * sizeof(int64_t));
    host_pack_.resize(static_cast<size_t>(ns + edges + n));
    download(ex, host_pack_.data(), packed, ns + edges + n);
    ex.sync();
    const int64_t* h = host_pack_.data();
    DSP_CHECK(h[0] == ne, "relabel: {} picks where exactly {} were given", h[0], ne);
    take_sizes(h, b, owners);
    b.src_ids.assign(h + ns + edges, h + ns + edges + b.num_src);
    if (e) {
      e->num_edges = ne;
      return put(std::move(e), b);
    }
    unpack(h + ns, nd, ne, w, b);
  }

  // Block b's edges from relabel's outputs (ne picks: their local ids at local + nd, the source
  // ids at src): pooled arrays of executor memory set as b.on_device (blocks_on_device), or
  // packed with the source ids (words: edge_words | sources) and read in one copy.
  void set(Exec& ex, int64_t nd, const LayerPicks& lo, int64_t ne, const int64_t* local,
           const int64_t* src, Block& b) {
    if (on_device_) {
      return put(lend(ex, nd, lo, ne, local + nd, ids_on_device_ ? src : nullptr, b.num_src), b);
    }
    const bool w = lo.weights != nullptr;
    const int64_t head = edge_words(nd, ne, w);
    auto* packed = reserve<int64_t>(pack_, head + b.num_src);
    pack(ex, packed, nd, lo, ne, local + nd, w);
    if (b.num_src) ex.copy(packed + head, src, b.num_src * sizeof(int64_t));
    host_pack_.resize(static_cast<size_t>(head + b.num_src));
    download(ex, host_pack_.data(), packed, head + b.num_src);
    ex.sync();
    const int64_t* h = host_pack_.data();
    unpack(h, nd, ne, w, b);
    b.src_ids.assign(h + head, h + head + b.num_src);
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
  bool on_device_, ids_on_device_;
  Buffer pack_;                     // the block packed for one read
  std::vector<int64_t> host_pack_;  // and read back
  std::shared_ptr<RecyclePool<EdgeArrays>> pool_ = std::make_shared<RecyclePool<EdgeArrays>>();
};

}  // namespace dsp
