#include "layout/feature_store.hpp"

#include <cstring>

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "graph/npy.hpp"

namespace dsp {

void gather_rows(const unsigned char* base, size_t row_bytes, const int64_t* idx, int64_t n,
                 unsigned char* out, const int64_t* out_pos) {
  constexpr int64_t kAhead = 8;
  parallel_for(0, n, 4096, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      if (i + kAhead < e) {
        const unsigned char* p = base + idx[i + kAhead] * row_bytes;
        for (size_t off = 0; off < row_bytes; off += 64) __builtin_prefetch(p + off);
      }
      int64_t o = out_pos ? out_pos[i] : i;
      std::memcpy(out + o * row_bytes, base + idx[i] * row_bytes, row_bytes);
    }
  });
}

FeatureStore::FeatureStore(const PartitionData& part, Communicator& comm)
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
  for (int p = 0; p < meta_.parts; ++p) {
    Array cached = p == part.part ? part.cached
                                  : load_npy(fmt::format("{}/part{}/cached.npy", part.dir, p),
                                             DType::kInt64, 1);
    const int64_t* c = cached.data<int64_t>();
    for (int64_t s = 0; s < cached.dim(0); ++s) {
      DSP_CHECK_FORMAT(c[s] >= meta_.offsets[p] && c[s] < meta_.offsets[p + 1],
                       "{}/part{}/cached.npy: node {} is not owned by part {}", part.dir, p, c[s],
                       p);
      slot_[c[s]] = static_cast<int32_t>(s);
    }
  }
  cache_rows_ = part.cached.dim(0);
  cache_.resize(cache_rows_ * row_bytes_);
  gather_rows(static_cast<const unsigned char*>(features_.raw()), row_bytes_,
              part.cached.data<int64_t>(), cache_rows_, cache_.data());
  stamp_.assign(num_nodes_, 0);
}

void FeatureStore::check_ids(const int64_t* ids, int64_t n) {
  if (++epoch_ == 0) {  // wrapped: clear so stale stamps cannot alias
    std::fill(stamp_.begin(), stamp_.end(), 0);
    epoch_ = 1;
  }
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = ids[i];
    DSP_CHECK_ARG(v >= 0 && v < num_nodes_, "gather: id {} at position {} is out of range [0, {})",
                  v, i, num_nodes_);
    DSP_CHECK_ARG(stamp_[v] != epoch_, "gather: id {} is requested twice (ids must be unique)", v);
    stamp_[v] = epoch_;
  }
}

void FeatureStore::gather(const int64_t* ids, int64_t n, void* out_raw) {
  check_ids(ids, n);
  auto* out = static_cast<unsigned char*>(out_raw);
  const int P = comm_.size(), me = comm_.rank();
  const auto* base = static_cast<const unsigned char*>(features_.raw());

  // Classify: remote hot (grouped by owner), local hot, cold.
  std::vector<int64_t> send_counts(P, 0);
  std::vector<int64_t> cold_pos, cold_ids, local_pos, local_slots;
  std::vector<int> owner_of(n);
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = ids[i];
    if (slot_[v] < 0) {
      cold_pos.push_back(i);
      cold_ids.push_back(v);
      continue;
    }
    int o = meta_.owner(v);
    owner_of[i] = o;
    if (o == me) {
      local_pos.push_back(i);
      local_slots.push_back(slot_[v]);
    } else {
      ++send_counts[o];
    }
  }
  std::vector<int64_t> displ(P + 1, 0);
  for (int p = 0; p < P; ++p) displ[p + 1] = displ[p] + send_counts[p];
  std::vector<int64_t> req(displ[P]), req_pos(displ[P]);
  {
    std::vector<int64_t> cur(displ.begin(), displ.end() - 1);
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = ids[i];
      if (slot_[v] < 0 || owner_of[i] == me) continue;
      int64_t k = cur[owner_of[i]]++;
      req[k] = slot_[v];
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

  // Place everything in request order. Cold reads overlap nothing on the CPU build, but they are
  // independent of the collective and could run concurrently with it on a GPU build.
  for (int64_t k = 0; k < displ[P]; ++k) {
    std::memcpy(out + req_pos[k] * row_bytes_, rows_in.data() + k * row_bytes_, row_bytes_);
  }
  gather_rows(cache_.data(), row_bytes_, local_slots.data(),
              static_cast<int64_t>(local_slots.size()), out, local_pos.data());
  gather_rows(base, row_bytes_, cold_ids.data(), static_cast<int64_t>(cold_ids.size()), out,
              cold_pos.data());

  stats_.calls += 1;
  stats_.rows_remote_hot += displ[P];
  stats_.rows_local_hot += static_cast<int64_t>(local_pos.size());
  stats_.rows_cold += static_cast<int64_t>(cold_pos.size());
  stats_.bytes_remote_hot += displ[P] * static_cast<int64_t>(row_bytes_);
  stats_.bytes_local_hot += static_cast<int64_t>(local_pos.size() * row_bytes_);
  stats_.bytes_cold += static_cast<int64_t>(cold_pos.size() * row_bytes_);
}

std::vector<unsigned char> FeatureStore::gather(const std::vector<int64_t>& ids) {
  std::vector<unsigned char> out(ids.size() * row_bytes_);
  gather(ids.data(), static_cast<int64_t>(ids.size()), out.data());
  return out;
}

}  // namespace dsp
