#include "layout/feature_store.hpp"

#include <atomic>
#include <cstring>

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "graph/npy.hpp"

namespace dsp {

namespace {
// Software prefetch of one row, kRowAhead rows before it is copied. Measured on this machine
// (400-byte rows, 2.4M-row file, one run with the variants interleaved): the first and the last
// line 4 rows ahead give 1.23x the plain per-row memcpy loop; every line 8 rows ahead gives 0.91x
// (the misses it issues exceed what the core can track, so prefetches wait or are dropped); the
// hardware prefetcher fills the lines in between as the copy streams through the row.
constexpr int64_t kRowAhead = 4;
inline void prefetch_row(const unsigned char* p, size_t row_bytes) {
  __builtin_prefetch(p);
  if (row_bytes > 64) __builtin_prefetch(p + row_bytes - 1);
}
}  // namespace

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

FeatureStore::FeatureStore(const PartitionData& part, Communicator& comm)
    : FeatureStore(part, comm, {}) {}

FeatureStore::FeatureStore(const PartitionData& part, Communicator& comm,
                           const std::vector<Array>& all_cached)
    : comm_(comm), meta_(part.meta), features_(part.features) {
  DSP_CHECK_ARG(comm.size() == meta_.parts,
                "{}: the partition has {} parts but the communicator has {} ranks", part.dir,
                meta_.parts, comm.size());
  DSP_CHECK_ARG(part.part == comm.rank(), "FeatureStore: part {} loaded on rank {}", part.part,
                comm.rank());
  DSP_CHECK_ARG(features_.defined() && features_.ndim() == 2,
                "{}: the partition has no features to gather", part.dir);
  num_nodes_ = features_.dim(0);
  dim_ = features_.dim(1);
  dtype_ = features_.dtype();
  row_bytes_ = static_cast<size_t>(dim_) * dtype_size(dtype_);

  // Feature position list: the slot of every node in its owner's cache.
  slot_.assign(num_nodes_, -1);
  cached_bits_.assign((num_nodes_ + 63) / 64, 0);
  seen_bits_.assign((num_nodes_ + 63) / 64, 0);
  for (int p = 0; p < meta_.parts; ++p) {
    Array cached = !all_cached.empty() ? all_cached.at(p)
                   : p == part.part  ? part.cached
                                     : load_npy(fmt::format("{}/part{}/cached.npy", part.dir, p),
                                                DType::kInt64, 1);
    const int64_t* c = cached.data<int64_t>();
    for (int64_t s = 0; s < cached.dim(0); ++s) {
      DSP_CHECK_FORMAT(c[s] >= meta_.offsets[p] && c[s] < meta_.offsets[p + 1],
                       "{}/part{}/cached.npy: node {} is not owned by part {}", part.dir, p, c[s],
                       p);
      slot_[c[s]] = static_cast<int32_t>(s);
      cached_bits_[c[s] >> 6] |= uint64_t{1} << (c[s] & 63);
    }
  }
  const Array& mine = all_cached.empty() ? part.cached : all_cached.at(part.part);
  cache_rows_ = mine.dim(0);
  cache_.resize(cache_rows_ * row_bytes_);
  gather_rows(static_cast<const unsigned char*>(features_.raw()), row_bytes_,
              mine.data<int64_t>(), cache_rows_, cache_.data());
}

void FeatureStore::gather(const int64_t* ids, int64_t n, void* out_raw) {
  auto* out = static_cast<unsigned char*>(out_raw);
  const int P = comm_.size(), me = comm_.rank();
  const auto* base = static_cast<const unsigned char*>(features_.raw());
  const int64_t my_begin = meta_.offsets[me], my_end = meta_.offsets[me + 1];

  // One fused, software-pipelined pass: check each id (range, duplicates), then copy cold and
  // locally cached rows straight into place; ids cached by another rank are only marked. Whether
  // a node is cached, and whether this call saw it already, are bits in two bitmaps of N bits
  // (300 KB each at 2.4M nodes: cache resident), so the pass adds no memory miss to the row copy
  // itself. The row of id i+kRowAhead is prefetched, so the row misses overlap. All checks
  // complete before any communication: a bad request fails on its own rank without stranding
  // peers.
  std::vector<int32_t> remote_owner(n, -1);
  std::atomic<int64_t> bad_pos{-1}, dup_pos{-1};
  std::atomic<int64_t> n_cold{0}, n_local{0};
  // Everything the loop reads is hoisted into locals: the row copies go through `out`, an
  // unsigned char pointer that may alias anything, so member reads inside the loop would be
  // reloaded after every copy. Measured (400-byte rows, one thread): this loop with its checks
  // runs at 1.3x the plain per-row memcpy loop; written with capturing lambdas, 0.87x.
  const uint64_t* const cached_bits = cached_bits_.data();
  uint64_t* const seen_bits = seen_bits_.data();
  const size_t rb = row_bytes_;
  const uint64_t nn = static_cast<uint64_t>(num_nodes_);
  const uint64_t lo = static_cast<uint64_t>(my_begin), hi = static_cast<uint64_t>(my_end);
  int32_t* const remote = remote_owner.data();
  parallel_for(0, n, 16384, [=, &bad_pos, &dup_pos, &n_cold, &n_local](int64_t b, int64_t e) {
    int64_t cold = 0, local = 0;
    for (int64_t i = b; i < e; ++i) {
      if (i + kRowAhead < e) {
        const uint64_t w = static_cast<uint64_t>(ids[i + kRowAhead]);
        // Rows this rank caches itself are read from the mapping too: on the CPU build cache and
        // mapping are the same tier of memory holding the same bytes, and going through the cache
        // would add a dependent slot lookup (4 bytes x N, not cache resident) before every hot
        // row. The cache copy serves the requests of other ranks, as DSP's owners do.
        if (w < nn && (!((cached_bits[w >> 6] >> (w & 63)) & 1) || (w >= lo && w < hi))) {
          prefetch_row(base + w * rb, rb);
        }
      }
      const uint64_t v = static_cast<uint64_t>(ids[i]);
      if (v >= nn) {
        int64_t expect = -1;
        bad_pos.compare_exchange_strong(expect, i);
        return;
      }
      // A plain read-modify-write, not a locked one: x86 locked instructions wait for the row
      // loads in flight and serialise the misses the prefetches overlap. With one thread the
      // check is exact; with several, a duplicate whose copies race in two threads' chunks can
      // slip through and is then merely copied twice.
      const uint64_t bit = uint64_t{1} << (v & 63);
      const uint64_t word = seen_bits[v >> 6];
      seen_bits[v >> 6] = word | bit;
      if (word & bit) {
        int64_t expect = -1;
        dup_pos.compare_exchange_strong(expect, i);
        return;
      }
      const bool hot = (cached_bits[v >> 6] >> (v & 63)) & 1;
      if (!hot || (v >= lo && v < hi)) {
        std::memcpy(out + i * rb, base + v * rb, rb);
        (hot ? local : cold) += 1;
      } else {
        remote[i] = -2;  // cached by another rank; its owner is looked up after the pass
      }
    }
    n_cold += cold;
    n_local += local;
  });
  for (int64_t i = 0; i < n; ++i) {
    if (remote[i] == -2) remote[i] = meta_.owner(ids[i]);
  }
  // Clear exactly the bits this call set (cheaper than clearing N bits).
  for (int64_t i = 0; i < n; ++i) {
    uint64_t v = static_cast<uint64_t>(ids[i]);
    if (v < static_cast<uint64_t>(num_nodes_)) seen_bits_[v >> 6] = 0;
  }
  if (bad_pos >= 0) {
    DSP_THROW_T(InvalidArgument, "gather: id {} at position {} is out of range [0, {})",
                ids[bad_pos], bad_pos.load(), num_nodes_);
  }
  if (dup_pos >= 0) {
    DSP_THROW_T(InvalidArgument, "gather: id {} is requested twice (ids must be unique)",
                ids[dup_pos]);
  }

  std::vector<int64_t> send_counts(P, 0);
  for (int64_t i = 0; i < n; ++i) {
    if (remote_owner[i] >= 0) ++send_counts[remote_owner[i]];
  }
  std::vector<int64_t> displ(P + 1, 0);
  for (int p = 0; p < P; ++p) displ[p + 1] = displ[p] + send_counts[p];
  std::vector<int64_t> req(displ[P]), req_pos(displ[P]);
  {
    std::vector<int64_t> cur(displ.begin(), displ.end() - 1);
    for (int64_t i = 0; i < n; ++i) {
      if (remote_owner[i] < 0) continue;
      int64_t k = cur[remote_owner[i]]++;
      req[k] = slot_[ids[i]];
      req_pos[k] = i;
    }
  }

  // One round: slots to owners, rows back. Owners serve from their cache.
  std::vector<int64_t> recv_counts = comm_.exchange_counts(send_counts, {{}, "gather.counts"});
  int64_t total_in = 0;
  for (auto c : recv_counts) total_in += c;
  std::vector<int64_t> slots_in(total_in);
  comm_.all_to_all_v(req.data(), send_counts, slots_in.data(), recv_counts, DType::kInt64,
                     {{}, "gather.slots"});
  for (int64_t s : slots_in) {
    DSP_CHECK(s >= 0 && s < cache_rows_, "gather: peer asked for cache slot {} of {}", s,
              cache_rows_);
  }
  std::vector<unsigned char> rows_out(total_in * row_bytes_);
  gather_rows(cache_.data(), row_bytes_, slots_in.data(), total_in, rows_out.data());
  std::vector<unsigned char> rows_in(displ[P] * row_bytes_);
  {
    // Rows travel as bytes: counts in rows * row_bytes.
    std::vector<int64_t> sc(P), rc(P);
    for (int p = 0; p < P; ++p) {
      sc[p] = recv_counts[p] * static_cast<int64_t>(row_bytes_);
      rc[p] = send_counts[p] * static_cast<int64_t>(row_bytes_);
    }
    comm_.all_to_all_v(rows_out.data(), sc, rows_in.data(), rc, DType::kUInt8, {{}, "gather.rows"});
  }

  // Remote rows into place; local and cold rows were placed by the first pass.
  for (int64_t k = 0; k < displ[P]; ++k) {
    std::memcpy(out + req_pos[k] * row_bytes_, rows_in.data() + k * row_bytes_, row_bytes_);
  }
  stats_.calls += 1;
  stats_.rows_remote_hot += displ[P];
  stats_.rows_local_hot += n_local;
  stats_.rows_cold += n_cold;
  stats_.bytes_remote_hot += displ[P] * static_cast<int64_t>(row_bytes_);
  stats_.bytes_local_hot += n_local * static_cast<int64_t>(row_bytes_);
  stats_.bytes_cold += n_cold * static_cast<int64_t>(row_bytes_);
}

std::vector<unsigned char> FeatureStore::gather(const std::vector<int64_t>& ids) {
  std::vector<unsigned char> out(ids.size() * row_bytes_);
  gather(ids.data(), static_cast<int64_t>(ids.size()), out.data());
  return out;
}

}  // namespace dsp
