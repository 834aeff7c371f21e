#pragma once
// The device feature backend (feature_backend.hpp), written once against an executor
// (core/host_exec.hpp): with CudaExec the CUDA backend (cuda/feature_backend.cu), with HostExec
// the host emulation CPU tests run.
//
// Memory: this rank's hot rows (its cached list, in slot order) in executor memory; cold rows
// read where they are, from the features mapping registered for device access (map_host: UVA on
// a GPU; read-only, so every rank of a machine shares one page cache); features read by reference
// (FeatureSource::row_of) are addressed through the row map as the ids are classified.
//
// Every copy is one CopyRows kernel: thread i copies word i % words of row i / words, so a row's
// words are read by consecutive threads (coalesced; full PCIe requests for cold rows), with the
// widest word (16, 8, 4, 2 or 1 bytes) the row size and pointers allow. The local pass classifies
// the ids on the host (classify_row: the checks every backend shares), then copies cold rows from
// the mapping and own hot rows from the cache in two launches. Ids already in executor memory
// (FeatureStore::gather_resident) are classified on the device instead (ClassifyIds, against the
// slot list copied to executor memory on first use: 4 bytes a node), the local rows copied in one
// launch and the requests grouped by owner there; only the category counts are read back.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/exec_memory.hpp"
#include "core/group_kernels.hpp"
#include "core/host_device.hpp"
#include "core/quant.hpp"
#include "core/recycle_pool.hpp"
#include "layout/store/feature_backend.hpp"

namespace dsp {
namespace kernels {

struct alignas(16) Word16 {  // the 16-byte copy unit
  uint64_t a, b;
};

template <class V>
struct CopyRows {
  const int64_t* src_rows;  // row of `base` for output row r, or null: r
  const V* base;
  const int64_t* dst_pos;  // output row of r, or null: r
  V* out;
  int64_t words;  // V-sized words per row
  DSP_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t r = i / words, w = i - r * words;
    const int64_t to = dst_pos ? dst_pos[r] : r;
    out[to * words + w] = base[(src_rows ? src_rows[r] : r) * words + w];
  }
};

// Requested ids classified on the device (FeatureStore::gather_resident), by category
// (core/group_kernels.hpp): p < P, the owner of a row another rank caches; P (cold) and P + 1
// (hot), rows this rank serves; P + 2, out of range. src[i]: the stored row of a cold row, the
// cache slot otherwise. The same decisions as classify_row, from the slot list (a node is cached
// when it has a slot) and the part offsets.
struct ClassifyIds {
  const int64_t* ids;
  uint64_t num_nodes;
  const int32_t* slot;     // [N]
  const int64_t* row_of;   // [N] (FeatureSource::row_of), or null
  const int64_t* offsets;  // [P + 1]
  int P, rank;
  int64_t* cat;
  int64_t* src;
  DSP_HOST_DEVICE void operator()(int64_t i) const {
    const uint64_t v = static_cast<uint64_t>(ids[i]);
    if (v >= num_nodes) {
      cat[i] = P + 2;
      src[i] = 0;
      return;
    }
    const int32_t s = slot[v];
    const int owner = P == 1 ? 0 : owner_of(offsets, P, static_cast<int64_t>(v));
    cat[i] = s < 0 ? P : owner == rank ? P + 1 : owner;
    src[i] = s >= 0 ? s : row_of ? row_of[v] : static_cast<int64_t>(v);
  }
};

// Output row r from the cold rows (category P) or the cache (P + 1); other rows are left.
template <class V>
struct CopyLocalRows {
  const int64_t* cat;
  const int64_t* src;
  int P;
  const V* cold;
  const V* cache;
  V* out;
  int64_t words;
  DSP_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t r = i / words, w = i - r * words, c = cat[r];
    if (c != P && c != P + 1) return;
    out[r * words + w] = (c == P ? cold : cache)[src[r] * words + w];
  }
};

// CopyLocalRows decoding to float32 (as DecodeRows), with node ids[r]'s per-node scale.
struct DecodeLocalRows {
  const int64_t* cat;
  const int64_t* src;
  int P;
  const unsigned char* cold;
  const unsigned char* cache;
  int64_t row_bytes;
  const int64_t* ids;
  const float* row_scale;  // [N], or null
  FeatureCodec codec;
  float* out;
  DSP_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t d = codec.dim, r = i / d, j = i - r * d, c = cat[r];
    if (c != P && c != P + 1) return;
    const unsigned char* row = (c == P ? cold : cache) + src[r] * row_bytes;
    out[r * d + j] = decode_feature(codec, row, j, row_scale ? row_scale[ids[r]] : 1.0f);
  }
};

// The rows other ranks cache, grouped by owner at their grouped positions (rank, the exclusive
// scan of the category-major flag matrix): slot, output row and node id.
struct ScatterPeers {
  const int64_t* cat;
  const int64_t* src;
  const int64_t* ids;
  const int64_t* rank;
  int64_t n;
  int P;
  int64_t* slots;
  int64_t* pos;
  int64_t* nodes;
  DSP_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t c = cat[i];
    if (c < 0 || c >= P) return;
    const int64_t at = rank[c * n + i];
    slots[at] = src[i];
    pos[at] = i;
    nodes[at] = ids[i];
  }
};

// out[k] = row_scale[node[k]].
struct ScalesOf {
  const int64_t* node;
  const float* row_scale;
  float* out;
  DSP_HOST_DEVICE void operator()(int64_t k) const { out[k] = row_scale[node[k]]; }
};

// Output row dst_pos[r] (r when null) of float32 `out`, decoded from stored row src_rows[r] of
// `base`: thread i decodes element i % dim of row i / dim with decode_feature (core/quant.hpp),
// the element form of the host backend's decode_row, so both give the same bits.
struct DecodeRows {
  const int64_t* src_rows;  // or null: r
  const unsigned char* base;
  int64_t row_bytes;
  const int64_t* dst_pos;
  const float* row_scale;  // per r (int8 per-node scales), or null
  FeatureCodec codec;      // column scales in executor memory
  float* out;
  DSP_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t d = codec.dim, r = i / d, j = i - r * d;
    const int64_t to = dst_pos ? dst_pos[r] : r;
    out[to * d + j] = decode_feature(codec, base + (src_rows ? src_rows[r] : r) * row_bytes, j,
                                     row_scale ? row_scale[r] : 1.0f);
  }
};

}  // namespace kernels

// Rows of one stored width moved by executor loops: copied as stored with the widest word the row
// size and the pointers allow (CopyRows), or decoded to float32 (DecodeRows) when the codec says
// so (bfloat16, int8; its column scales uploaded to executor memory).
template <class Exec>
class DeviceRows {
 public:
  DeviceRows(Exec& ex, size_t row_bytes, FeatureCodec codec)
      : row_bytes_(row_bytes),
        decode_(codec_decodes(codec.dtype)),
        codec_(codec),
        column_scale_(ex.buffer()) {
    if (codec.column_scale)
      codec_.column_scale = upload(ex, column_scale_, codec.column_scale, codec.dim);
  }
  bool decodes() const { return decode_; }
  const FeatureCodec& codec() const { return codec_; }  // column scales in executor memory

  // Output row p[r] (r when p is null) = stored row r[r] (r when null) of base, r < n, as stored.
  void copy(Exec& ex, const int64_t* r, const void* base, const int64_t* p, void* out,
            int64_t n) const {
    by_word({base, out}, [&](auto w) {
      using V = decltype(w);
      const int64_t words = static_cast<int64_t>(row_bytes_ / sizeof(V));
      ex.for_each(n * words, kernels::CopyRows<V>{r, static_cast<const V*>(base), p,
                                                  static_cast<V*>(out), words});
    });
  }
  // The same rows decoded to float32; sc: their per-row scales (executor memory), or null.
  void decode(Exec& ex, const int64_t* r, const void* base, const int64_t* p, const float* sc,
              void* out, int64_t n) const {
    ex.for_each(n * codec_.dim, kernels::DecodeRows{r, static_cast<const unsigned char*>(base),
                                                    static_cast<int64_t>(row_bytes_), p, sc, codec_,
                                                    static_cast<float*>(out)});
  }
  // f(V{}) with the widest copy word V (16, 8, 4, 2 or 1 bytes) dividing the row size and every
  // pointer's address.
  template <class F>
  void by_word(std::initializer_list<const void*> ptrs, const F& f) const {
    auto fits = [&](size_t a) {
      if (row_bytes_ % a) return false;
      for (const void* q : ptrs) {
        if (reinterpret_cast<uintptr_t>(q) % a) return false;
      }
      return true;
    };
    if (fits(16)) return f(kernels::Word16{});
    if (fits(8)) return f(uint64_t{});
    if (fits(4)) return f(uint32_t{});
    if (fits(2)) return f(uint16_t{});
    f(uint8_t{});
  }

 private:
  size_t row_bytes_;
  bool decode_;
  FeatureCodec codec_;
  typename Exec::Buffer column_scale_;
};

template <class Exec>
class KernelFeatureBackend final : public FeatureBackend {
 public:
  KernelFeatureBackend(Exec exec, std::string name, Device device, const FeatureSource& src)
      : ex_(std::move(exec)),
        name_(std::move(name)),
        device_(device),
        src_(src),
        rows_(ex_, src.row_bytes, src.codec) {
    const auto* base = static_cast<const unsigned char*>(src.features.raw());
    cold_ = ex_.map_host(base, src.features.nbytes(), src.features.is_mapped(), cold_reg_);
    // Hot rows in slot order, staged through the host once.
    cached_rows_ = src.cached.defined() ? src.cached.dim(0) : 0;
    std::vector<unsigned char> hot(static_cast<size_t>(cached_rows_) * src.row_bytes);
    const int64_t* c = cached_rows_ ? src.cached.data<int64_t>() : nullptr;
    for (int64_t s = 0; s < cached_rows_; ++s) {
      const int64_t row = src.stored_row(c[s]);
      std::copy(base + row * src.row_bytes, base + (row + 1) * src.row_bytes,
                hot.data() + s * src.row_bytes);
    }
    cache_ = cache_buf_.reserve(std::max<size_t>(hot.size(), 16));
    if (!hot.empty()) ex_.to_device(cache_, hot.data(), hot.size());
    ex_.sync();
  }

  std::string name() const override { return name_; }
  HostTraffic traffic() const override { return ex_.traffic(); }
  Device device() const override { return device_; }

  LocalPass local_pass(const int64_t* ids, int64_t n, void* out, uint8_t* peer,
                       uint64_t* seen) override {
    LocalPass lp;
    std::vector<int64_t>& cold_ids = cold_ids_;
    std::vector<int64_t>& cold_pos = cold_pos_;
    std::vector<int64_t>& hot_slots = hot_slots_;
    std::vector<int64_t>& hot_pos = hot_pos_;
    cold_ids.clear(), cold_pos.clear(), hot_slots.clear(), hot_pos.clear();
    cold_scale_.clear(), hot_scale_.clear();
    const float* row_scale = src_.row_scale;
    const uint64_t nn = static_cast<uint64_t>(src_.num_nodes);
    const uint64_t lo = static_cast<uint64_t>(src_.begin), hi = static_cast<uint64_t>(src_.end);
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t v = static_cast<uint64_t>(ids[i]);
      const RowSource where = classify_row(v, nn, lo, hi, src_.cached_bits, seen);
      if (where == RowSource::kPeer) {
        peer[i] = 1;
      } else if (where == RowSource::kHere) {
        const int32_t s = src_.slot[v];
        if (s >= 0) {
          hot_slots.push_back(s);
          hot_pos.push_back(i);
          if (row_scale) hot_scale_.push_back(row_scale[v]);
        } else {
          cold_ids.push_back(src_.stored_row(static_cast<int64_t>(v)));
          cold_pos.push_back(i);
          if (row_scale) cold_scale_.push_back(row_scale[v]);
        }
      } else {
        (where == RowSource::kOutOfRange ? lp.bad_pos : lp.dup_pos) = i;
        return lp;
      }
    }
    to_out(cold_ids, cold_pos, cold_scale_, cold_, out, ids_a_, pos_a_, scale_a_);
    to_out(hot_slots, hot_pos, hot_scale_, cache_, out, ids_b_, pos_b_, scale_b_);
    ex_.sync();
    lp.rows_cold = static_cast<int64_t>(cold_ids.size());
    lp.rows_local_hot = static_cast<int64_t>(hot_slots.size());
    return lp;
  }

  // Rows in the executor's memory are written / read in place; host rows go through `stage_`.
  void serve_slots(const int64_t* slots, int64_t n, void* rows, MemorySpace space) override {
    if (n == 0) return;
    const bool here = space == MemorySpace::kDevice;
    void* dst = here ? rows : stage_.reserve(n * src_.row_bytes);
    rows_.copy(ex_, upload(ex_, ids_a_, slots, n), cache_, nullptr, dst, n);
    if (!here) ex_.to_host(rows, dst, n * src_.row_bytes);
    ex_.sync();
  }

  void place_rows(const void* rows, MemorySpace space, const int64_t* pos, const int64_t* node,
                  int64_t n, void* out) override {
    if (n == 0) return;
    const void* src = in_executor(rows, space, n);
    std::vector<int64_t> iota(n), p(pos, pos + n);
    for (int64_t k = 0; k < n; ++k) iota[k] = k;
    std::vector<float>& scale = cold_scale_;
    scale.clear();
    for (int64_t k = 0; src_.row_scale && k < n; ++k) scale.push_back(src_.row_scale[node[k]]);
    to_out(iota, p, scale, src, out, ids_a_, pos_a_, scale_a_);
    ex_.sync();
  }

  bool classifies() const override { return true; }

  // One classification kernel, one scan of the category-major flag matrix (core/group_kernels.hpp:
  // P owners, cold, hot, out of range), the local rows in one launch, the requests scattered by
  // owner; one read: the P + 4 category bounds.
  ResidentPass classify_resident(const int64_t* ids, int64_t n, void* out,
                                 const std::vector<int64_t>& offsets, int rank) override {
    const int P = static_cast<int>(offsets.size()) - 1, C = P + 3;
    ResidentPass r;
    r.send_counts.assign(P, 0);
    if (n == 0) return r;
    map_resident_tables();
    auto* off = upload(ex_, ids_b_, offsets.data(), static_cast<int64_t>(offsets.size()));
    auto* cat = reserve<int64_t>(cat_, n);
    auto* src = reserve<int64_t>(src_rows_, n);
    ex_.for_each(n, kernels::ClassifyIds{ids, static_cast<uint64_t>(src_.num_nodes), slot_dev_,
                                         row_of_dev_, off, P, rank, cat, src});
    auto* flag = reserve<int64_t>(flag_, C * n);
    ex_.for_each(C * n, kernels::FlagCategories{cat, n, flag});
    auto* at = reserve<int64_t>(rank_, C * n + 1);
    ex_.zero(at, sizeof(int64_t));
    ex_.inclusive_scan(flag, at + 1, C * n);
    std::vector<int64_t> where(C + 1);
    for (int c = 0; c <= C; ++c) where[c] = c * n;
    auto* bounds = reserve<int64_t>(bounds_, 2 * (C + 1));
    ex_.to_device(bounds, where.data(), where.size() * sizeof(int64_t));
    ex_.for_each(C + 1, kernels::GatherAt{at, bounds, bounds + C + 1});
    const int64_t peers_bound = n;  // at most n requests
    r.slots = reserve<int64_t>(req_slots_, 3 * peers_bound);
    r.pos = r.slots + peers_bound;
    r.nodes = r.pos + peers_bound;
    ex_.for_each(n,
                 kernels::ScatterPeers{cat, src, ids, at, n, P, const_cast<int64_t*>(r.slots),
                                       const_cast<int64_t*>(r.pos), const_cast<int64_t*>(r.nodes)});
    copy_local(cat, src, P, ids, out, n);
    std::vector<int64_t> got(C + 1);
    ex_.to_host(got.data(), bounds + C + 1, got.size() * sizeof(int64_t));
    ex_.sync();
    for (int p = 0; p < P; ++p) r.send_counts[p] = got[p + 1] - got[p];
    r.rows_cold = got[P + 1] - got[P];
    r.rows_local_hot = got[P + 2] - got[P + 1];
    r.bad = got[P + 3] - got[P + 2];
    return r;
  }

  void serve_resident(const int64_t* slots, int64_t n, void* rows) override {
    if (n == 0) return;
    rows_.copy(ex_, slots, cache_, nullptr, rows, n);
    ex_.sync();
  }

  void place_resident(const void* rows, MemorySpace space, const int64_t* pos, const int64_t* node,
                      int64_t n, void* out) override {
    if (n == 0) return;
    const void* src = in_executor(rows, space, n);
    if (!rows_.decodes()) {
      rows_.copy(ex_, nullptr, src, pos, out, n);
    } else {
      float* sc = nullptr;
      if (src_.row_scale) {
        sc = reserve<float>(scale_a_, n);
        ex_.for_each(n, kernels::ScalesOf{node, row_scale_dev_, sc});
      }
      rows_.decode(ex_, nullptr, src, pos, sc, out, n);
    }
    ex_.sync();
  }

  // Output rows come from a pool of growth-only buffers: a batch's buffer returns to the pool when
  // the batch is dropped, so once sizes settle no batch allocates (no cudaMalloc on the hot path).
  // Each carries a release fence: a buffer comes back after its consumer's work on it (the rows
  // a trainer's kernels read), which the next gather into it waits for on the device.
  using FeatureBackend::allocate;
  std::shared_ptr<void> allocate(size_t bytes, std::shared_ptr<ReleaseFence>* fence) override {
    std::shared_ptr<Lent> lent = RecyclePool<Lent>::lend(pool_, [this] {
      return Lent{ex_.buffer(), ex_.fence()};
    });
    ex_.wait(*lent->fence);
    if (fence) *fence = lent->fence;
    void* p = lent->buf.reserve(std::max<size_t>(bytes, 16));
    return std::shared_ptr<void>(lent, p);
  }
  void copy_to_host(const void* src, size_t bytes, void* host) override {
    if (bytes == 0) return;
    ex_.to_host(host, src, bytes);
    ex_.sync();
  }
  void copy_from_host(void* dst, const void* host, size_t bytes) override {
    if (bytes == 0) return;
    ex_.to_device(dst, host, bytes);
    ex_.sync();
  }

 private:
  using Buffer = typename Exec::Buffer;

  // Output row pos[r] (r when pos is empty) from stored row rows[r] of base: copied, or decoded
  // (scale[r]: per-node scales, empty when there are none); the lists uploaded first.
  void to_out(const std::vector<int64_t>& rows, const std::vector<int64_t>& pos,
              const std::vector<float>& scale, const void* base, void* out, Buffer& rows_buf,
              Buffer& pos_buf, Buffer& scale_buf) {
    const int64_t n = static_cast<int64_t>(rows.size());
    if (n == 0) return;
    const int64_t* r = upload(ex_, rows_buf, rows.data(), n);
    const int64_t* p = pos.empty() ? nullptr : upload(ex_, pos_buf, pos.data(), n);
    if (!rows_.decodes()) return rows_.copy(ex_, r, base, p, out, n);
    const float* sc = scale.empty() ? nullptr : upload(ex_, scale_buf, scale.data(), n);
    rows_.decode(ex_, r, base, p, sc, out, n);
  }
  // n stored rows in executor memory: `rows` where they are, host rows staged through stage_.
  const void* in_executor(const void* rows, MemorySpace space, int64_t n) {
    if (space == MemorySpace::kDevice) return rows;
    void* staged = stage_.reserve(n * src_.row_bytes);
    ex_.to_device(staged, rows, n * src_.row_bytes);
    return staged;
  }
  // gather_resident's local rows: output row r from the cold rows or the cache by its category.
  void copy_local(const int64_t* cat, const int64_t* src, int P, const int64_t* ids, void* out,
                  int64_t n) {
    if (rows_.decodes()) {
      const auto* cold = static_cast<const unsigned char*>(cold_);
      return ex_.for_each(
          n * rows_.codec().dim,
          kernels::DecodeLocalRows{cat, src, P, cold, static_cast<const unsigned char*>(cache_),
                                   static_cast<int64_t>(src_.row_bytes), ids, row_scale_dev_,
                                   rows_.codec(), static_cast<float*>(out)});
    }
    rows_.by_word({cold_, cache_, out}, [&](auto w) {
      using V = decltype(w);
      const int64_t words = static_cast<int64_t>(src_.row_bytes / sizeof(V));
      ex_.for_each(n * words, kernels::CopyLocalRows<V>{cat, src, P, static_cast<const V*>(cold_),
                                                        static_cast<const V*>(cache_),
                                                        static_cast<V*>(out), words});
    });
  }
  // What the device classification reads, made once: the slot list in executor memory (4 bytes a
  // node), the row map and per-node scales (host arrays) mapped for the executor's loops.
  void map_resident_tables() {
    if (slot_dev_) return;
    const size_t nn = static_cast<size_t>(std::max<int64_t>(src_.num_nodes, 1));
    auto* slot = static_cast<int32_t*>(slot_buf_.reserve(nn * sizeof(int32_t)));
    if (src_.num_nodes) ex_.to_device(slot, src_.slot, src_.num_nodes * sizeof(int32_t));
    if (src_.row_of) {
      row_of_dev_ = static_cast<const int64_t*>(
          ex_.map_host(src_.row_of, src_.num_nodes * sizeof(int64_t), true, row_of_reg_));
    }
    if (src_.row_scale) {
      row_scale_dev_ = static_cast<const float*>(
          ex_.map_host(src_.row_scale, src_.num_nodes * sizeof(float), true, row_scale_reg_));
    }
    slot_dev_ = slot;
  }
  Exec ex_;
  std::string name_;
  Device device_;
  FeatureSource src_;
  DeviceRows<Exec> rows_;  // how rows of this width are copied or decoded
  typename Exec::Registration cold_reg_;
  const void* cold_ = nullptr;
  Buffer cache_buf_ = ex_.buffer();  // every buffer is the executor's (stream-ordered, counted)
  void* cache_ = nullptr;
  int64_t cached_rows_ = 0;
  Buffer stage_ = ex_.buffer(), ids_a_ = ex_.buffer(), pos_a_ = ex_.buffer(), ids_b_ = ex_.buffer(),
         pos_b_ = ex_.buffer(), scale_a_ = ex_.buffer(), scale_b_ = ex_.buffer();
  std::vector<int64_t> cold_ids_, cold_pos_, hot_slots_, hot_pos_;
  std::vector<float> cold_scale_, hot_scale_;  // per-node scales of the rows (int8 by row)
  struct Lent {  // an output buffer of allocate and its release fence
    Buffer buf;
    std::shared_ptr<ReleaseFence> fence;
  };
  std::shared_ptr<RecyclePool<Lent>> pool_ = std::make_shared<RecyclePool<Lent>>();
  // gather_resident: the classification's arrays, the requests, the tables it reads.
  Buffer cat_ = ex_.buffer(), src_rows_ = ex_.buffer(), flag_ = ex_.buffer(), rank_ = ex_.buffer(),
         bounds_ = ex_.buffer(), req_slots_ = ex_.buffer(), slot_buf_ = ex_.buffer();
  const int32_t* slot_dev_ = nullptr;
  const int64_t* row_of_dev_ = nullptr;
  const float* row_scale_dev_ = nullptr;
  typename Exec::Registration row_of_reg_, row_scale_reg_;
};

}  // namespace dsp
