#include "layout/store/feature_store.hpp"

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/error.hpp"
#include "graph/npy.hpp"

namespace dsp {

FeatureStore::FeatureStore(const PartitionData& part, Communicator& comm,
                           const std::vector<Array>& all_cached,
                           const FeatureBackendFactory& backend)
    : comm_(comm), meta_(part.meta), features_(part.features) {
  DSP_CHECK_ARG(comm.size() == meta_.parts,
                "{}: the partition has {} parts but the communicator has {} ranks", part.dir,
                meta_.parts, comm.size());
  DSP_CHECK_ARG(part.part == comm.rank(), "FeatureStore: part {} loaded on rank {}", part.part,
                comm.rank());
  DSP_CHECK_ARG(features_.defined() && features_.ndim() == 2,
                "{}: the partition has no features to gather", part.dir);
  fmt_.num_nodes = features_.dim(0);
  fmt_.dim = features_.dim(1);
  fmt_.dtype = features_.dtype();
  fmt_.row_bytes = static_cast<size_t>(fmt_.dim) * dtype_size(fmt_.dtype);
  fmt_.out_dtype = codec_decodes(fmt_.dtype) ? DType::kFloat32 : fmt_.dtype;
  fmt_.out_row_bytes = static_cast<size_t>(fmt_.dim) * dtype_size(fmt_.out_dtype);

  // Feature position list: the slot of every node in its owner's cache.
  slot_.assign(fmt_.num_nodes, -1);
  cached_bits_.assign((fmt_.num_nodes + 63) / 64, 0);
  seen_bits_.assign((fmt_.num_nodes + 63) / 64, 0);
  for (int p = 0; p < meta_.parts; ++p) {
    Array cached = !all_cached.empty() ? all_cached.at(p)
                   : p == part.part    ? part.cached
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
  FeatureSource src;
  src.features = features_;
  src.row_bytes = fmt_.row_bytes;
  src.out_row_bytes = fmt_.out_row_bytes;
  src.codec = stored_feature_codec(features_, part.feature_scale, &src.row_scale);
  src.num_nodes = fmt_.num_nodes;
  src.begin = meta_.offsets[part.part];
  src.end = meta_.offsets[part.part + 1];
  src.cached = all_cached.empty() ? part.cached : all_cached.at(part.part);
  src.slot = slot_.data();
  src.cached_bits = cached_bits_.data();
  if (part.feature_rows.defined()) {
    DSP_CHECK_ARG(
        part.feature_rows.dim(0) == fmt_.num_nodes && part.feature_rows.dtype() == DType::kInt64,
        "{}: the feature row map has {} ids for {} feature rows", part.dir,
        part.feature_rows.dim(0), fmt_.num_nodes);
    feature_rows_ = part.feature_rows;
    src.row_of = feature_rows_.data<int64_t>();
  }
  cache_rows_ = src.cached.defined() ? src.cached.dim(0) : 0;
  backend_ = backend ? backend(src) : make_host_feature_backend(src);
  DSP_CHECK(backend_ != nullptr, "FeatureStore: the backend factory returned no backend");
  peers_ = std::make_unique<PeerRows>(comm_, *backend_, fmt_.row_bytes, cache_rows_);
  host0_ = backend_->traffic();  // construction's uploads are not a gather's
}

FeatureStore::~FeatureStore() = default;

FeatureStore::Requests FeatureStore::prepare(const int64_t* ids, int64_t n, void* out) {
  const int P = comm_.size();
  // Local pass: every check completes before any communication, so a bad request fails on its
  // own rank without stranding peers.
  peer_.assign(n, 0);
  const LocalPass lp = backend_->local_pass(ids, n, out, peer_.data(), seen_bits_.data());
  for (int64_t i = 0; i < n; ++i) {  // clear exactly the words this call touched
    const uint64_t v = static_cast<uint64_t>(ids[i]);
    if (v < static_cast<uint64_t>(fmt_.num_nodes)) seen_bits_[v >> 6] = 0;
  }
  if (lp.bad_pos >= 0) {
    DSP_THROW_T(InvalidArgument, "gather: id {} at position {} is out of range [0, {})",
                ids[lp.bad_pos], lp.bad_pos, fmt_.num_nodes);
  }
  if (lp.dup_pos >= 0) {
    DSP_THROW_T(InvalidArgument, "gather: id {} is requested twice (ids must be unique)",
                ids[lp.dup_pos]);
  }

  if (fifo_.on()) {  // the levels' rows placed with the backend's place_rows, and counted
    int64_t hits[2];
    fifo_.serve(
        ids, n, peer_.data(),
        [&](const unsigned char* rows, const int64_t* pos, const int64_t* got, int64_t h) {
          backend_->place_rows(rows, MemorySpace::kHost, pos, got, h, out);
        },
        hits);
    stats_.count_fifo(hits, static_cast<int64_t>(fmt_.row_bytes));
  }

  // Requests for rows other ranks cache: their cache slots, grouped by owner.
  Requests r;
  std::vector<int32_t> owner(n, -1);
  r.send_counts.assign(P, 0);
  for (int64_t i = 0; i < n; ++i) {
    if (peer_[i]) ++r.send_counts[owner[i] = meta_.owner(ids[i])];
  }
  std::vector<int64_t> cur(P, 0);
  for (int p = 1; p < P; ++p) cur[p] = cur[p - 1] + r.send_counts[p - 1];
  const int64_t total = cur[P - 1] + r.send_counts[P - 1];
  r.req.resize(total);
  r.req_pos.resize(total);
  for (int64_t i = 0; i < n; ++i) {
    if (owner[i] < 0) continue;
    const int64_t k = cur[owner[i]]++;
    r.req[k] = slot_[ids[i]];
    r.req_pos[k] = i;
  }
  stats_.count(lp.rows_cold, lp.rows_ahead, lp.rows_local_hot, total,
               static_cast<int64_t>(fmt_.row_bytes));
  return r;
}

void GatherStats::count(int64_t cold, int64_t cold_ahead, int64_t local_hot, int64_t remote_hot,
                        int64_t row_bytes) {
  calls += 1;
  rows_remote_hot += remote_hot;
  rows_local_hot += local_hot;
  rows_cold += cold;
  rows_cold_ahead += cold_ahead;
  bytes_remote_hot += remote_hot * row_bytes;
  bytes_local_hot += local_hot * row_bytes;
  bytes_cold += cold * row_bytes;
}

void GatherStats::count_fifo(const int64_t hits[2], int64_t row_bytes) {
  rows_fifo += hits[0];
  rows_fifo_shared += hits[1];
  bytes_fifo += (hits[0] + hits[1]) * row_bytes;
}

void FeatureStore::receive(const int64_t* ids, const Requests& r, int64_t k0, int64_t m,
                           const void* rows, MemorySpace space, void* out) {
  if (m == 0) return;
  std::vector<int64_t> got(m);
  for (int64_t k = 0; k < m; ++k) got[k] = ids[r.req_pos[k0 + k]];
  backend_->place_rows(rows, space, r.req_pos.data() + k0, got.data(), m, out);
  if (!fifo_.on()) return;
  std::vector<unsigned char> host;
  const unsigned char* h = static_cast<const unsigned char*>(rows);
  if (space == MemorySpace::kDevice) {
    host.resize(m * fmt_.row_bytes);
    backend_->copy_to_host(rows, m * fmt_.row_bytes, host.data());
    h = host.data();
  }
  fifo_.insert(got.data(), h, m);
}

void FeatureStore::gather(const int64_t* ids, int64_t n, void* out) {
  const Requests r = prepare(ids, n, out);
  const std::shared_ptr<void> rows = peers_->fetch(r.req, r.send_counts);
  receive(ids, r, 0, static_cast<int64_t>(r.req.size()), rows.get(), comm_.memory_space(), out);
  note_traffic();
}

void FeatureStore::gather_resident(const int64_t* ids, int64_t n, void* out) {
  if (!backend_->classifies()) return gather(ids, n, out);  // ids in host memory
  if (fifo_.on()) {  // the FIFO levels look ids up on the host
    std::vector<int64_t> host(n);
    backend_->copy_to_host(ids, n * sizeof(int64_t), host.data());
    return gather(host.data(), n, out);
  }
  const ResidentPass r = prepare_resident(ids, n, out);
  peers_->fetch_resident(r, out);
  note_traffic();
}

ResidentPass FeatureStore::prepare_resident(const int64_t* ids, int64_t n, void* out) {
  ResidentPass r = backend_->classify_resident(ids, n, out, meta_.offsets, comm_.rank());
  if (r.bad > 0) {  // the error path reads the ids back to name the first bad one
    std::vector<int64_t> host(n);
    backend_->copy_to_host(ids, n * sizeof(int64_t), host.data());
    for (int64_t i = 0; i < n; ++i) {
      if (host[i] < 0 || host[i] >= fmt_.num_nodes) {
        DSP_THROW_T(InvalidArgument, "gather: id {} at position {} is out of range [0, {})",
                    host[i], i, fmt_.num_nodes);
      }
    }
  }
  int64_t remote = 0;
  for (const int64_t c : r.send_counts) remote += c;
  stats_.count(r.rows_cold, 0, r.rows_local_hot, remote, static_cast<int64_t>(fmt_.row_bytes));
  return r;
}

ResidentPass FeatureBackend::classify_resident(const int64_t*, int64_t, void*,
                                               const std::vector<int64_t>&, int) {
  DSP_THROW("{}: the feature backend does not classify resident ids", name());
}
void FeatureBackend::serve_resident(const int64_t*, int64_t, void*) {
  DSP_THROW("{}: the feature backend does not serve resident slots", name());
}
void FeatureBackend::place_resident(const void*, MemorySpace, const int64_t*, const int64_t*,
                                    int64_t, void*) {
  DSP_THROW("{}: the feature backend does not place resident rows", name());
}

std::vector<unsigned char> FeatureStore::gather(const std::vector<int64_t>& ids) {
  const int64_t n = static_cast<int64_t>(ids.size());
  std::vector<unsigned char> out(n * fmt_.out_row_bytes);
  std::shared_ptr<void> rows = allocate_rows(n);
  gather(ids.data(), n, rows.get());
  backend_->copy_to_host(rows.get(), out.size(), out.data());
  return out;
}

}  // namespace dsp
