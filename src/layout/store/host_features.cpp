// The host feature backend (feature_backend.hpp): the CPU build's gather data path.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <numeric>
#include <vector>

#include <sys/mman.h>

#include "core/huge_pages.hpp"
#include "core/logging.hpp"
#include "core/parallel.hpp"
#include "layout/store/feature_backend.hpp"
#include "layout/store/feature_store.hpp"

namespace dsp {
namespace {

// Software prefetch of one row, kRowAhead rows before it is copied. Measured on this machine
// (400-byte rows, 2.4M-row file, one run with the variants interleaved): the first and the last
// line 4 rows ahead give 1.23x the plain per-row memcpy loop; every line 8 rows ahead gives 0.91x
// (the misses it issues exceed what the core can track, so prefetches wait or are dropped); the
// hardware prefetcher fills the lines in between as the copy streams through the row.
constexpr int64_t kRowAhead = 4;
// Reads outstanding at once from a mapping beyond memory (waiting_parallel_for, core/parallel.hpp),
// in chunks of kWaitGrain ids.
constexpr int kReadDepth = kWaitingDepth;
constexpr int64_t kWaitGrain = 512;
// Read-ahead (superbatches): the rows are read in pieces of at most kPieceBytes of the file, a gap
// of more than kGapBytes ending a piece, kAheadDepth pieces at once, each announced to the kernel
// first (MADV_WILLNEED: one large read instead of a fault per page). The gap is where reading
// through it costs about what one more random read does (here ~20,000 random reads/s against
// ~700 MB/s in sequence: ~35 KB), so a sparse group is read as single pages, a dense one as a
// sweep.
constexpr size_t kPieceBytes = size_t{4} << 20;
constexpr size_t kGapBytes = size_t{64} << 10;
constexpr int kAheadDepth = 16;
inline void prefetch_row(const unsigned char* p, size_t row_bytes) {
  __builtin_prefetch(p);
  if (row_bytes > 64) __builtin_prefetch(p + row_bytes - 1);
}

// Where node v's row is read: from the cache copy when it is hot and the rows are beyond memory
// (hot_rows set); a cold row from the rows read ahead when it is among them (ahead_rows:
// ascending stored rows, n_ahead of them; ahead_bytes: theirs), counted in *read; else from the
// rows, through the row map when read by reference. A plain struct of locals: local_pass keeps it
// in registers (see there).
struct RowPlaces {
  const unsigned char* base;
  const int64_t* row_of;
  const unsigned char* hot_rows;
  const int32_t* slot;
  const int64_t* ahead_rows;
  int64_t n_ahead;
  const unsigned char* ahead_bytes;
  size_t rb;
  const unsigned char* row(uint64_t v, bool hot, int64_t* read) const {
    if (hot && hot_rows) return hot_rows + static_cast<size_t>(slot[v]) * rb;
    const int64_t stored = row_of ? row_of[v] : static_cast<int64_t>(v);
    if (!hot && n_ahead) {
      const int64_t* p = std::lower_bound(ahead_rows, ahead_rows + n_ahead, stored);
      if (p != ahead_rows + n_ahead && *p == stored) {
        ++*read;
        return ahead_bytes + static_cast<size_t>(p - ahead_rows) * rb;
      }
    }
    return base + static_cast<size_t>(stored) * rb;
  }
};

class HostFeatureBackend final : public FeatureBackend {
 public:
  explicit HostFeatureBackend(const FeatureSource& src) : src_(src) {
    // Rows are read at random, a few hundred bytes at a time: with the mapping's 4 KiB pages
    // nearly every row also misses the TLB. An anonymous copy on huge pages when it fits
    // (core/huge_pages.hpp). Measured (dsp bench gather, 1M rows of 400 B, one thread, three
    // rounds alternating): gather / contiguous memcpy 0.61 (0.60-0.64) against 0.53 (0.49-0.54)
    // from the mapping. Streaming stores for the output were tried and lost (0.31): rows that
    // do not start on a cache line leave partial write-combining lines.
    // Features read by reference (src.row_of) are copied in node order, so that the copy needs
    // no row map; without a copy every row is read through it.
    const auto* mapped = static_cast<const unsigned char*>(src.features.raw());
    rows_copy_ = src.row_of
                     ? huge_page_fill(src.features.nbytes(),
                                      [&](void* p) {
                                        gather_rows(mapped, src.row_bytes, src.row_of,
                                                    src.num_nodes, static_cast<unsigned char*>(p));
                                      })
                     : huge_page_copy(mapped, src.features.nbytes());
    rows_ = static_cast<const unsigned char*>(rows_copy_.data ? rows_copy_.data.get() : mapped);
    if (rows_copy_.data) src_.row_of = nullptr;  // the copy is in node order
    // A mapping beyond this rank's memory share is mostly read from disk: its rows are read by
    // kReadDepth threads at once, and the rank's own hot rows from its cache copy.
    waits_ =
        !rows_copy_.data && src.features.is_mapped() && beyond_memory_share(src.features.nbytes());
    fill_cache(src, mapped);  // before the advice: a sorted fill gains from read-around
    if (!rows_copy_.data && src.features.is_mapped()) {
      advise_random_reads(mapped, src.features.nbytes(), "the feature rows");
    }
    if (waits_) {
      DSP_INFO("memory",
               "feature rows beyond this rank's memory share: read {} at a time, this rank's {} "
               "hot rows from its cache copy",
               kReadDepth, cache_.size() / src.row_bytes);
    }
  }
  std::string name() const override { return "host"; }
  Device device() const override { return Device::cpu(); }
  LocalPass local_pass(const int64_t* ids, int64_t n, void* out, uint8_t* peer,
                       uint64_t* seen) override;
  // Host memory is this backend's memory: `space` names the same memory either way.
  void serve_slots(const int64_t* slots, int64_t n, void* rows, MemorySpace) override {
    gather_rows(cache_.data(), src_.row_bytes, slots, n, static_cast<unsigned char*>(rows));
  }
  void place_rows(const void* rows, MemorySpace, const int64_t* pos, const int64_t* node, int64_t n,
                  void* out) override {
    auto* o = static_cast<unsigned char*>(out);
    const auto* r = static_cast<const unsigned char*>(rows);
    const size_t rb = src_.row_bytes, ob = src_.out_row_bytes;
    const bool decode = codec_decodes(src_.codec.dtype);
    for (int64_t k = 0; k < n; ++k) {
      if (!decode) {
        std::memcpy(o + pos[k] * ob, r + k * rb, rb);
      } else {
        decode_row(src_.codec, r + k * rb, src_.row_scale ? src_.row_scale[node[k]] : 1.0f,
                   reinterpret_cast<float*>(o + pos[k] * ob));
      }
    }
  }
  bool reads_ahead() const override { return waits_; }
  void read_ahead(const int64_t* ids, int64_t n) override;
  using FeatureBackend::allocate;
  std::shared_ptr<void> allocate(size_t bytes, std::shared_ptr<ReleaseFence>* fence) override {
    if (fence) fence->reset();  // host memory: freed when its last holder lets go
    return std::shared_ptr<void>(new unsigned char[std::max<size_t>(bytes, 1)],
                                 [](void* p) { delete[] static_cast<unsigned char*>(p); });
  }
  void copy_to_host(const void* src, size_t bytes, void* host) override {
    if (bytes) std::memcpy(host, src, bytes);
  }
  void copy_from_host(void* dst, const void* host, size_t bytes) override {
    if (bytes) std::memcpy(dst, host, bytes);
  }

 private:
  void fill_cache(const FeatureSource& src, const unsigned char* mapped);

  FeatureSource src_;
  bool waits_ = false;                // rows_ is a mapping beyond memory: reads wait on the disk
  HugePageBuffer rows_copy_;          // the feature rows on huge pages, when they fit
  const unsigned char* rows_;         // where rows are read: rows_copy_ or the mapping
  std::vector<unsigned char> cache_;  // this rank's hot rows in slot order: what peers read
  std::vector<int64_t> ahead_rows_;   // stored rows read ahead, ascending (read_ahead)
  std::vector<unsigned char> ahead_bytes_;  // their bytes, in that order
};

// Superbatches: the cold rows of `ids` (rows this rank serves from the file: not cached by any
// rank), each once, read in file order in pieces. Hot rows need no disk: the rank's own come
// from its cache copy, the others' from their owners.
void HostFeatureBackend::read_ahead(const int64_t* ids, int64_t n) {
  std::vector<int64_t>().swap(ahead_rows_);  // the previous group's memory first
  std::vector<unsigned char>().swap(ahead_bytes_);
  if (!waits_ || n == 0) return;
  const uint64_t nn = static_cast<uint64_t>(src_.num_nodes);
  std::vector<int64_t> rows;
  rows.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t v = static_cast<uint64_t>(ids[i]);
    if (v < nn && !((src_.cached_bits[v >> 6] >> (v & 63)) & 1)) {
      rows.push_back(src_.stored_row(static_cast<int64_t>(v)));
    }
  }
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  const size_t rb = src_.row_bytes;
  std::vector<unsigned char> bytes(rows.size() * rb);
  std::vector<size_t> piece{0};  // first row of each piece
  for (size_t k = 1; k < rows.size(); ++k) {
    const size_t span = static_cast<size_t>(rows[k] - rows[piece.back()] + 1) * rb;
    const size_t gap = static_cast<size_t>(rows[k] - rows[k - 1] - 1) * rb;
    if (span > kPieceBytes || gap > kGapBytes) piece.push_back(k);
  }
  piece.push_back(rows.size());
  const int64_t pieces = static_cast<int64_t>(piece.size()) - 1;
  waiting_parallel_for(0, pieces, 1, kAheadDepth, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      const size_t k0 = piece[p], k1 = piece[p + 1];
      const size_t off = static_cast<size_t>(rows[k0]) * rb;
      const size_t len = static_cast<size_t>(rows[k1 - 1] + 1) * rb - off;
      advise_pages(rows_ + off, len, MADV_WILLNEED);  // read it now, in large requests
      for (size_t k = k0; k < k1; ++k) {
        std::memcpy(bytes.data() + k * rb, rows_ + static_cast<size_t>(rows[k]) * rb, rb);
      }
      // Read once: first out of the page cache's working set (deactivated, so memory pressure
      // takes these pages before the neighbour arrays the sampler keeps reading), then out of
      // this process's resident set.
      advise_pages(rows_ + off, len, MADV_COLD);
      src_.features.release_pages(off, len);
    }
  });
  ahead_rows_ = std::move(rows);
  ahead_bytes_ = std::move(bytes);
}

// The rank's hot rows in slot order. From a mapping beyond memory, read in file order by
// kReadDepth threads: a cache of a fifth of the nodes touches nearly every page, so the reads are
// nearly sequential and the kernel's read-around (still on here) serves most of them.
void HostFeatureBackend::fill_cache(const FeatureSource& src, const unsigned char* mapped) {
  const int64_t rows = src.cached.defined() ? src.cached.dim(0) : 0;
  cache_.resize(static_cast<size_t>(rows) * src.row_bytes);
  if (!rows) return;
  const int64_t* cached = src.cached.data<int64_t>();
  std::vector<int64_t> stored(rows);
  for (int64_t s = 0; s < rows; ++s) stored[s] = src.stored_row(cached[s]);
  if (!waits_) {
    gather_rows(mapped, src.row_bytes, stored.data(), rows, cache_.data());
    return;
  }
  std::vector<int64_t> slot(rows);
  std::iota(slot.begin(), slot.end(), 0);
  std::sort(slot.begin(), slot.end(), [&](int64_t a, int64_t b) { return stored[a] < stored[b]; });
  const size_t rb = src.row_bytes;
  unsigned char* out = cache_.data();
  waiting_parallel_for(0, rows, 4096, kReadDepth, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      std::memcpy(out + slot[k] * rb, mapped + stored[slot[k]] * rb, rb);
    }
    // Read once: out of this process's resident set (the file's pages stay in the page cache
    // until memory is needed; a neighbouring chunk's thread refaults a shared page, no more).
    const size_t off = static_cast<size_t>(stored[slot[b]]) * rb;
    src.features.release_pages(off, static_cast<size_t>(stored[slot[e - 1]] + 1) * rb - off);
  });
}

// One fused, software-pipelined pass: classify each id (range, duplicates, where its row is),
// then copy cold and locally cached rows straight into place; ids cached by another rank are only
// flagged. Whether a node is cached, and whether this call saw it already, are bits in two bitmaps
// of N bits (300 KB each at 2.4M nodes: cache resident), so the pass adds no memory miss to the
// row copy itself. The row of id i+kRowAhead is prefetched, so the row misses overlap.
//
// Rows this rank caches itself are read from the mapping too: on the CPU, cache and mapping are
// the same tier of memory holding the same bytes, and going through the cache would add a
// dependent slot lookup (4 bytes x N, not cache resident) before every hot row. Not so from a
// mapping beyond memory (waits_), where the mapping is the disk: there hot rows come from the
// cache copy, and the pass runs on kReadDepth threads, most of them waiting on a page.
//
// The duplicate check is a plain read-modify-write, not a locked one: x86 locked instructions wait
// for the row loads in flight and serialise the misses the prefetches overlap. With one thread the
// check is exact; with several, a duplicate whose copies race in two threads' chunks can slip
// through and is then merely copied twice.
LocalPass HostFeatureBackend::local_pass(const int64_t* ids, int64_t n, void* out_raw,
                                         uint8_t* peer, uint64_t* seen) {
  // Everything the loop reads is hoisted into locals: the row copies go through `out`, an
  // unsigned char pointer that may alias anything, so member reads inside the loop would be
  // reloaded after every copy. Measured (400-byte rows, one thread): this loop with its checks
  // runs at 1.3x the plain per-row memcpy loop; written with capturing lambdas, 0.87x.
  auto* const out = static_cast<unsigned char*>(out_raw);
  const auto* const base = rows_;
  const uint64_t* const cached_bits = src_.cached_bits;
  const size_t rb = src_.row_bytes, ob = src_.out_row_bytes;
  const bool decode = codec_decodes(src_.codec.dtype);
  const FeatureCodec codec = src_.codec;
  const float* const row_scale = src_.row_scale;
  const int64_t* const row_of = src_.row_of;  // null unless read by reference without a copy
  const RowPlaces places{base,
                         row_of,
                         waits_ ? cache_.data() : nullptr,
                         src_.slot,
                         ahead_rows_.data(),
                         static_cast<int64_t>(ahead_rows_.size()),
                         ahead_bytes_.data(),
                         rb};
  const uint64_t nn = static_cast<uint64_t>(src_.num_nodes);
  const uint64_t lo = static_cast<uint64_t>(src_.begin), hi = static_cast<uint64_t>(src_.end);
  std::atomic<int64_t> bad_pos{-1}, dup_pos{-1}, n_cold{0}, n_local{0}, n_read{0};
  auto pass = [=, &bad_pos, &dup_pos, &n_cold, &n_local, &n_read](int64_t b, int64_t e) {
    int64_t cold = 0, local = 0, read = 0;
    for (int64_t i = b; i < e; ++i) {
      // Read by reference without a copy: the map's entry of a row is one more dependent miss,
      // prefetched twice as far ahead, so it is in cache when the row's prefetch needs it.
      if (row_of && i + 2 * kRowAhead < e) {
        const uint64_t w = static_cast<uint64_t>(ids[i + 2 * kRowAhead]);
        if (w < nn) __builtin_prefetch(row_of + w);
      }
      if (i + kRowAhead < e) {
        const uint64_t w = static_cast<uint64_t>(ids[i + kRowAhead]);
        if (w < nn && (!((cached_bits[w >> 6] >> (w & 63)) & 1) || (w >= lo && w < hi))) {
          prefetch_row(base + (row_of ? row_of[w] : w) * rb, rb);
        }
      }
      const uint64_t v = static_cast<uint64_t>(ids[i]);
      const RowSource where = classify_row(v, nn, lo, hi, cached_bits, seen);
      if (where == RowSource::kHere) {
        const bool hot = (cached_bits[v >> 6] >> (v & 63)) & 1;
        const unsigned char* row = places.row(v, hot, &read);
        if (!decode) {
          std::memcpy(out + i * rb, row, rb);
        } else {
          decode_row(codec, row, row_scale ? row_scale[v] : 1.0f,
                     reinterpret_cast<float*>(out + i * ob));
        }
        (hot ? local : cold) += 1;
      } else if (where == RowSource::kPeer) {
        peer[i] = 1;
      } else {
        int64_t expect = -1;
        (where == RowSource::kOutOfRange ? bad_pos : dup_pos).compare_exchange_strong(expect, i);
        return;
      }
    }
    n_cold += cold;
    n_local += local;
    n_read += read;
  };
  if (waits_) {
    waiting_parallel_for(0, n, kWaitGrain, kReadDepth, pass);
  } else {
    parallel_for(0, n, 16384, pass);
  }
  return {n_cold.load(), n_local.load(), n_read.load(), bad_pos.load(), dup_pos.load()};
}

}  // namespace

std::unique_ptr<FeatureBackend> make_host_feature_backend(const FeatureSource& src) {
  return std::make_unique<HostFeatureBackend>(src);
}

void gather_rows(const unsigned char* base, size_t row_bytes, const int64_t* idx, int64_t n,
                 unsigned char* out, const int64_t* out_pos) {
  constexpr int64_t kAhead = kRowAhead;
  parallel_for(0, n, 4096, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      if (i + kAhead < e) {
        prefetch_row(base + idx[i + kAhead] * row_bytes, row_bytes);
      }
      int64_t o = out_pos ? out_pos[i] : i;
      std::memcpy(out + o * row_bytes, base + idx[i] * row_bytes, row_bytes);
    }
  });
}

}  // namespace dsp
