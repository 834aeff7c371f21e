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
// the mapping and own hot rows from the cache in two launches.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
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
  const int64_t* src_rows;  // row of `base` for output row r
  const V* base;
  const int64_t* dst_pos;  // output row of r, or null: r
  V* out;
  int64_t words;  // V-sized words per row
  DSP_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t r = i / words, w = i - r * words;
    const int64_t to = dst_pos ? dst_pos[r] : r;
    out[to * words + w] = base[src_rows[r] * words + w];
  }
};

// Output row dst_pos[r] (r when null) of float32 `out`, decoded from stored row src_rows[r] of
// `base`: thread i decodes element i % dim of row i / dim with decode_feature (core/quant.hpp),
// the element form of the host backend's decode_row, so both give the same bits.
struct DecodeRows {
  const int64_t* src_rows;
  const unsigned char* base;
  int64_t row_bytes;
  const int64_t* dst_pos;
  const float* row_scale;  // per r (int8 per-node scales), or null
  FeatureCodec codec;      // column scales in executor memory
  float* out;
  DSP_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t d = codec.dim, r = i / d, j = i - r * d;
    const int64_t to = dst_pos ? dst_pos[r] : r;
    out[to * d + j] =
        decode_feature(codec, base + src_rows[r] * row_bytes, j, row_scale ? row_scale[r] : 1.0f);
  }
};

}  // namespace kernels

template <class Exec>
class KernelFeatureBackend final : public FeatureBackend {
 public:
  KernelFeatureBackend(Exec exec, std::string name, Device device, const FeatureSource& src)
      : ex_(std::move(exec)), name_(std::move(name)), device_(device), src_(src) {
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
    decode_ = codec_decodes(src.codec.dtype);
    codec_ = src.codec;
    if (codec_.column_scale) {  // the column scales where the kernel reads them
      const size_t bytes = static_cast<size_t>(codec_.dim) * sizeof(float);
      void* d = column_scale_buf_.reserve(std::max<size_t>(bytes, 16));
      ex_.to_device(d, codec_.column_scale, bytes);
      codec_.column_scale = static_cast<const float*>(d);
    }
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
    std::vector<int64_t> s(slots, slots + n);
    copy_rows(s, {}, cache_, dst, ids_a_, pos_a_);
    if (!here) ex_.to_host(rows, dst, n * src_.row_bytes);
    ex_.sync();
  }

  void place_rows(const void* rows, MemorySpace space, const int64_t* pos, const int64_t* node,
                  int64_t n, void* out) override {
    if (n == 0) return;
    const void* src = rows;
    if (space != MemorySpace::kDevice) {
      void* staged = stage_.reserve(n * src_.row_bytes);
      ex_.to_device(staged, rows, n * src_.row_bytes);
      src = staged;
    }
    std::vector<int64_t> iota(n), p(pos, pos + n);
    for (int64_t k = 0; k < n; ++k) iota[k] = k;
    std::vector<float>& scale = cold_scale_;
    scale.clear();
    for (int64_t k = 0; src_.row_scale && k < n; ++k) scale.push_back(src_.row_scale[node[k]]);
    to_out(iota, p, scale, src, out, ids_a_, pos_a_, scale_a_);
    ex_.sync();
  }

  // Output rows come from a pool of growth-only buffers: a batch's buffer returns to the pool when
  // the batch is dropped, so once sizes settle no batch allocates (no cudaMalloc on the hot path).
  std::shared_ptr<void> allocate(size_t bytes) override {
    std::shared_ptr<Buffer> buf = RecyclePool<Buffer>::lend(pool_, [this] { return ex_.buffer(); });
    void* p = buf->reserve(std::max<size_t>(bytes, 16));
    return std::shared_ptr<void>(buf, p);
  }
  void copy_to_host(const void* src, size_t bytes, void* host) override {
    if (bytes == 0) return;
    ex_.to_host(host, src, bytes);
    ex_.sync();
  }

 private:
  using Buffer = typename Exec::Buffer;

  // Output row pos[r] (r when pos is empty) from stored row rows[r] of base: copied, or decoded
  // (scale[r]: per-node scales, empty when there are none).
  void to_out(const std::vector<int64_t>& rows, const std::vector<int64_t>& pos,
              const std::vector<float>& scale, const void* base, void* out, Buffer& rows_buf,
              Buffer& pos_buf, Buffer& scale_buf) {
    const int64_t n = static_cast<int64_t>(rows.size());
    if (!decode_ || n == 0) return copy_rows(rows, pos, base, out, rows_buf, pos_buf);
    auto* r = static_cast<int64_t*>(rows_buf.reserve(n * sizeof(int64_t)));
    ex_.to_device(r, rows.data(), n * sizeof(int64_t));
    int64_t* p = nullptr;
    if (!pos.empty()) {
      p = static_cast<int64_t*>(pos_buf.reserve(n * sizeof(int64_t)));
      ex_.to_device(p, pos.data(), n * sizeof(int64_t));
    }
    float* sc = nullptr;
    if (!scale.empty()) {
      sc = static_cast<float*>(scale_buf.reserve(n * sizeof(float)));
      ex_.to_device(sc, scale.data(), n * sizeof(float));
    }
    ex_.for_each(n * codec_.dim, kernels::DecodeRows{r, static_cast<const unsigned char*>(base),
                                                     static_cast<int64_t>(src_.row_bytes), p, sc,
                                                     codec_, static_cast<float*>(out)});
  }

  // out row pos[r] (r when pos is empty) = row rows[r] of base, r < rows.size().
  void copy_rows(const std::vector<int64_t>& rows, const std::vector<int64_t>& pos,
                 const void* base, void* out, Buffer& rows_buf, Buffer& pos_buf) {
    const int64_t n = static_cast<int64_t>(rows.size());
    if (n == 0) return;
    auto* r = static_cast<int64_t*>(rows_buf.reserve(n * sizeof(int64_t)));
    ex_.to_device(r, rows.data(), n * sizeof(int64_t));
    int64_t* p = nullptr;
    if (!pos.empty()) {
      p = static_cast<int64_t*>(pos_buf.reserve(n * sizeof(int64_t)));
      ex_.to_device(p, pos.data(), n * sizeof(int64_t));
    }
    const size_t rb = src_.row_bytes;
    auto fits = [&](size_t a) {
      return rb % a == 0 && reinterpret_cast<uintptr_t>(base) % a == 0 &&
             reinterpret_cast<uintptr_t>(out) % a == 0;
    };
    if (fits(16)) return launch<kernels::Word16>(r, base, p, out, n);
    if (fits(8)) return launch<uint64_t>(r, base, p, out, n);
    if (fits(4)) return launch<uint32_t>(r, base, p, out, n);
    if (fits(2)) return launch<uint16_t>(r, base, p, out, n);
    launch<uint8_t>(r, base, p, out, n);
  }
  template <class V>
  void launch(const int64_t* r, const void* base, const int64_t* p, void* out, int64_t n) {
    const int64_t words = static_cast<int64_t>(src_.row_bytes / sizeof(V));
    ex_.for_each(n * words, kernels::CopyRows<V>{r, static_cast<const V*>(base), p,
                                                 static_cast<V*>(out), words});
  }

  Exec ex_;
  std::string name_;
  Device device_;
  FeatureSource src_;
  typename Exec::Registration cold_reg_;
  const void* cold_ = nullptr;
  Buffer cache_buf_ = ex_.buffer();  // every buffer is the executor's (stream-ordered, counted)
  void* cache_ = nullptr;
  int64_t cached_rows_ = 0;
  Buffer stage_ = ex_.buffer(), ids_a_ = ex_.buffer(), pos_a_ = ex_.buffer(), ids_b_ = ex_.buffer(),
         pos_b_ = ex_.buffer(), scale_a_ = ex_.buffer(), scale_b_ = ex_.buffer();
  std::vector<int64_t> cold_ids_, cold_pos_, hot_slots_, hot_pos_;
  std::vector<float> cold_scale_, hot_scale_;  // per-node scales of the rows (int8 by row)
  bool decode_ = false;                        // stored rows decode to float32 (bfloat16, int8)
  FeatureCodec codec_;                         // column scales in executor memory
  Buffer column_scale_buf_ = ex_.buffer();
  std::shared_ptr<RecyclePool<Buffer>> pool_ = std::make_shared<RecyclePool<Buffer>>();
};

}  // namespace dsp
