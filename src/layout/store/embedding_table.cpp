#include "layout/store/embedding_table.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/hash.hpp"
#include "core/memory.hpp"
#include "core/parallel.hpp"
#include "core/rng.hpp"
#include "layout/store/embedding_file.hpp"

namespace dsp {

namespace {

constexpr uint64_t kEmbeddingTag = 0x454d424544ULL;  // "EMBED"
constexpr int64_t kDigestChunk = 4096;  // ids per Hasher update (a multiple of 4: 32-byte blocks)

OpOptions host_op(const char* label) {
  OpOptions o;
  o.label = label;
  o.host_buffers = true;
  return o;
}

std::vector<int64_t> times(const std::vector<int64_t>& counts, int64_t k) {
  std::vector<int64_t> out(counts.size());
  for (size_t p = 0; p < counts.size(); ++p) out[p] = counts[p] * k;
  return out;
}

// `v` grown to at least n elements and never shrunk: a call's row buffers are reused by the next
// ones without being zeroed (or paged in) again.
float* scratch(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

int64_t total(const std::vector<int64_t>& counts) {
  int64_t t = 0;
  for (int64_t c : counts) t += c;
  return t;
}

// The step's constants in float, each computed in double and rounded once.
EmbeddingStepConsts step_consts(const EmbeddingOptions& o) {
  return {static_cast<float>(o.lr),
          static_cast<float>(o.eps),
          static_cast<float>(o.beta1),
          static_cast<float>(1.0 - o.beta1),
          static_cast<float>(o.beta2),
          static_cast<float>(1.0 - o.beta2),
          o.beta1,
          o.beta2,
          o.optimizer == EmbeddingOptimizer::kAdam};
}

// Digest of the dataset ids of rows [0, n) (ids[r], or begin + r when ids is null), hashed
// kDigestChunk ids at a time whichever way they are given.
uint64_t ids_digest(const int64_t* ids, int64_t begin, int64_t n) {
  Hasher h;
  std::vector<int64_t> chunk;
  for (int64_t b = 0; b < n; b += kDigestChunk) {
    const int64_t len = std::min(kDigestChunk, n - b);
    const int64_t* p = ids + b;
    if (!ids) {
      chunk.resize(static_cast<size_t>(len));
      for (int64_t i = 0; i < len; ++i) chunk[i] = begin + b + i;
      p = chunk.data();
    }
    h.update(p, static_cast<size_t>(len) * sizeof(int64_t));
  }
  return h.digest();
}

}  // namespace

uint64_t embedding_key(uint64_t seed) { return rng_key(seed, kEmbeddingTag); }

const Names<EmbeddingOptimizer>& names_of(EmbeddingOptimizer) {
  using O = EmbeddingOptimizer;
  static const Names<O> n("embedding optimizer", {{O::kAdam, "adam"}, {O::kAdagrad, "adagrad"}});
  return n;
}

void EmbeddingOptions::validate() const {
  DSP_CHECK_ARG(dim > 0, "--embedding-dim must be > 0, got {}", dim);
  DSP_CHECK_ARG(std::isfinite(lr) && lr > 0, "--embedding-lr must be > 0, got {}", lr);
  DSP_CHECK_ARG(beta1 >= 0 && beta1 < 1, "--embedding-beta1 must be in [0, 1), got {}", beta1);
  DSP_CHECK_ARG(beta2 >= 0 && beta2 < 1, "--embedding-beta2 must be in [0, 1), got {}", beta2);
  DSP_CHECK_ARG(std::isfinite(eps) && eps > 0, "--embedding-eps must be > 0, got {}", eps);
  DSP_CHECK_ARG(std::isfinite(init_scale) && init_scale >= 0,
                "--embedding-init-scale must be >= 0, got {}", init_scale);
}

EmbeddingFootprint embedding_footprint(int64_t rows, int64_t dim, EmbeddingOptimizer optimizer,
                                       MemorySpace space) {
  const uint64_t r = static_cast<uint64_t>(std::max<int64_t>(rows, 0));
  const uint64_t row = static_cast<uint64_t>(std::max<int64_t>(dim, 0)) * sizeof(float);
  const bool adam = optimizer == EmbeddingOptimizer::kAdam;
  // values + (m, v | s) and adam's per-row step count in the storage; the per-row slot on the host
  const uint64_t stored = r * row * (adam ? 3 : 2) + (adam ? r * sizeof(int64_t) : 0);
  EmbeddingFootprint f;
  f.host = r * sizeof(int64_t);
  (space == MemorySpace::kDevice ? f.device : f.host) += stored;
  return f;
}

uint64_t embedding_bytes(int64_t rows, int64_t dim, EmbeddingOptimizer optimizer) {
  const EmbeddingFootprint f = embedding_footprint(rows, dim, optimizer, MemorySpace::kHost);
  return f.host + f.device;
}

void check_embedding_memory(int64_t rows, int64_t dim, EmbeddingOptimizer optimizer,
                            uint64_t budget) {
  check_memory(fmt::format("the embedding table ({} rows x {}, {})", rows, dim, optimizer),
               embedding_bytes(rows, dim, optimizer), budget,
               "lower --embedding-dim, use more ranks or raise --memory-budget");
}

void check_embedding_memory(int64_t rows, int64_t dim, EmbeddingOptimizer optimizer,
                            uint64_t budget, MemorySpace space, uint64_t device_free) {
  if (space == MemorySpace::kHost) return check_embedding_memory(rows, dim, optimizer, budget);
  const EmbeddingFootprint f = embedding_footprint(rows, dim, optimizer, space);
  const std::string what =
      fmt::format("the embedding table ({} rows x {}, {})", rows, dim, optimizer);
  check_memory(what + " on the host", f.host, budget,
               "lower --embedding-dim, use more ranks or raise --memory-budget");
  if (f.device > device_free) {
    DSP_THROW(
        "{} on the device needs about {} of device memory but {} is free: lower "
        "--embedding-dim or use more ranks",
        what, format_bytes(f.device), format_bytes(device_free));
  }
}

EmbeddingTable::EmbeddingTable(Communicator& comm, std::vector<int64_t> offsets,
                               const int64_t* dataset_ids, EmbeddingOptions opts,
                               const EmbeddingStorageFactory& storage)
    : comm_(comm),
      ranges_(std::move(offsets), comm.size(), comm.rank(), "embedding table"),
      opts_(std::move(opts)) {
  opts_.validate();
  adam_ = opts_.optimizer == EmbeddingOptimizer::kAdam;
  begin_ = ranges_.begin();
  end_ = ranges_.end();
  slot_.assign(static_cast<size_t>(end_ - begin_), -1);
  ids_digest_ = ids_digest(dataset_ids, begin_, end_ - begin_);
  storage_ = storage ? storage() : make_host_embedding_storage();
  storage_->allocate(end_ - begin_, opts_.dim, adam_, dataset_ids, begin_,
                     embedding_key(opts_.seed), static_cast<float>(opts_.init_scale));
}

std::vector<float> EmbeddingTable::host_rows() const {
  std::vector<float> out(static_cast<size_t>((end_ - begin_) * opts_.dim));
  storage_->read_section(EmbeddingSection::kValues, out.data(), out.size() * sizeof(float));
  return out;
}

void EmbeddingTable::count_bytes(const std::vector<int64_t>& send, const std::vector<int64_t>& recv,
                                 int64_t elem) {
  for (int p = 0; p < comm_.size(); ++p) {
    if (p == comm_.rank()) continue;
    stats_.bytes_sent += send[p] * elem;
    stats_.bytes_recv += recv[p] * elem;
  }
}

const float* EmbeddingTable::fetch(const int64_t* ids, int64_t n, std::vector<int64_t>& pos) {
  std::vector<int64_t> send, counts;
  ranges_.group(ids, n, "embedding gather", send, counts, pos);
  const bool alone = comm_.size() == 1;  // one rank: it serves itself, no rounds
  const std::vector<int64_t> rc =
      alone ? counts : comm_.exchange_counts(counts, host_op("embedding gather counts"));
  std::vector<int64_t> req = alone ? std::move(send) : std::vector<int64_t>(total(rc));
  if (!alone) {
    comm_.all_to_all_v(send.data(), counts, req.data(), rc, DType::kInt64,
                       host_op("embedding gather ids"));
  }
  const int64_t dim = opts_.dim;
  for (int64_t& id : req) id -= begin_;  // local rows
  float* reply = scratch(reply_, req.size() * static_cast<size_t>(dim));
  storage_->read_rows(req.data(), static_cast<int64_t>(req.size()), reply);
  float* rows = reply;
  if (!alone) {
    rows = scratch(rows_, static_cast<size_t>(n * dim));
    comm_.all_to_all_v(reply, times(rc, dim), rows, times(counts, dim), DType::kFloat32,
                       host_op("embedding gather rows"));
  }
  ++stats_.gather_calls;
  stats_.rows_requested += n;
  stats_.rows_remote += n - counts[comm_.rank()];
  stats_.rows_served += static_cast<int64_t>(req.size());
  count_bytes(counts, rc, sizeof(int64_t));
  count_bytes(rc, counts, dim * static_cast<int64_t>(sizeof(float)));
  return rows;
}

void EmbeddingTable::gather(const int64_t* ids, int64_t n, float* out) {
  std::vector<int64_t> pos;
  const float* rows = fetch(ids, n, pos);
  storage_->place_rows(rows, n, pos.data(), n, out);
}

std::vector<float> EmbeddingTable::gather(const std::vector<int64_t>& ids) {
  const int64_t n = static_cast<int64_t>(ids.size()), dim = opts_.dim;
  std::vector<float> out(ids.size() * static_cast<size_t>(dim));
  std::vector<int64_t> pos;
  const float* rows = fetch(ids.data(), n, pos);
  const size_t row_bytes = static_cast<size_t>(dim) * sizeof(float);
  parallel_for(0, n, 1024, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      std::memcpy(out.data() + i * dim, rows + pos[i] * dim, row_bytes);
  });
  return out;
}

void EmbeddingTable::apply_gradients(const int64_t* ids, int64_t n, const float* grads,
                                     float scale) {
  std::vector<int64_t> send, counts, pos;
  ranges_.group(ids, n, "embedding gradients", send, counts, pos);
  const int64_t dim = opts_.dim;
  float* sg = scratch(sg_, static_cast<size_t>(n * dim));
  storage_->scale_rows(grads, n, pos.data(), scale, sg);
  const bool alone = comm_.size() == 1;  // one rank: its own gradients, no rounds
  const std::vector<int64_t> rc =
      alone ? counts : comm_.exchange_counts(counts, host_op("embedding grad counts"));
  std::vector<int64_t> req = alone ? std::move(send) : std::vector<int64_t>(total(rc));
  float* rg = sg;
  if (!alone) {
    comm_.all_to_all_v(send.data(), counts, req.data(), rc, DType::kInt64,
                       host_op("embedding grad ids"));
    rg = scratch(rg_, req.size() * static_cast<size_t>(dim));
    comm_.all_to_all_v(sg, times(counts, dim), rg, times(rc, dim), DType::kFloat32,
                       host_op("embedding grad rows"));
  }
  step_rows(req, rg);
  ++stats_.grad_calls;
  stats_.grads_received += static_cast<int64_t>(req.size());
  count_bytes(counts, rc, sizeof(int64_t) + dim * sizeof(float));
}

// Slots in first-arrival order; then each slot's arrivals in arrival order (a counting sort).
EmbeddingStepPlan EmbeddingTable::plan_step(const std::vector<int64_t>& ids) {
  EmbeddingStepPlan p;
  p.start.assign(1, 0);
  for (int64_t id : ids) {
    int64_t& s = slot_[id - begin_];
    if (s < 0) {
      s = static_cast<int64_t>(p.touched.size());
      p.touched.push_back(id - begin_);
      p.start.push_back(0);
    }
    ++p.start[s + 1];
  }
  const int64_t T = static_cast<int64_t>(p.touched.size());
  for (int64_t t = 0; t < T; ++t) p.start[t + 1] += p.start[t];
  p.order.resize(ids.size());
  std::vector<int64_t> cursor(p.start.begin(), p.start.end() - 1);
  for (size_t k = 0; k < ids.size(); ++k) p.order[cursor[slot_[ids[k] - begin_]]++] = k;
  for (int64_t r : p.touched) slot_[r] = -1;
  return p;
}

void EmbeddingTable::step_rows(const std::vector<int64_t>& ids, const float* grads) {
  const EmbeddingStepPlan plan = plan_step(ids);
  storage_->step(plan, grads, static_cast<int64_t>(ids.size()), step_consts(opts_));
  stats_.rows_updated += static_cast<int64_t>(plan.touched.size());
}

EmbeddingShard EmbeddingTable::shard() const {
  EmbeddingShard sh;
  sh.optimizer = opts_.optimizer;
  sh.dim = opts_.dim;
  sh.begin = begin_;
  sh.end = end_;
  sh.num_nodes = ranges_.num_ids();
  sh.rank = comm_.rank();
  sh.ranks = comm_.size();
  sh.ids_digest = ids_digest_;
  return sh;
}

void EmbeddingTable::save(const std::string& path) const {
  write_embedding_shard(path, shard(), *storage_);
}

void EmbeddingTable::load(const std::string& path) {
  read_embedding_shard(path, shard(), *storage_);
}

void EmbeddingTable::set_lr(double lr) {
  DSP_CHECK_ARG(std::isfinite(lr) && lr > 0, "--embedding-lr must be > 0, got {}", lr);
  opts_.lr = lr;
}

}  // namespace dsp
