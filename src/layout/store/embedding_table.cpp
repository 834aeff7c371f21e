#include "layout/store/embedding_table.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/hash.hpp"
#include "core/memory.hpp"
#include "core/parallel.hpp"
#include "core/rng.hpp"

namespace dsp {

namespace {

constexpr uint64_t kEmbeddingTag = 0x454d424544ULL;  // "EMBED"
constexpr char kMagic[8] = {'D', 'S', 'P', 'E', 'M', 'B', 'D', '\0'};
constexpr uint32_t kVersion = 1;
constexpr int64_t kDigestChunk = 4096;  // ids per Hasher update (a multiple of 4: 32-byte blocks)

// The file: this header, then the sections (values, state1, state2, steps; those the optimizer
// has), each in native byte order, each with its checksum in sums[].
struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t optimizer;  // 0 adam, 1 adagrad
  int64_t dim, begin, end, num_nodes, ranks, rank;
  uint64_t ids_digest;
  uint64_t sums[4];
  uint64_t header_sum;  // of the bytes before it
};
static_assert(sizeof(FileHeader) == 112, "FileHeader has no padding");

uint64_t digest(const void* data, size_t bytes) {
  Hasher h;
  static const char kNone = 0;  // an empty section's data() may be null: no null to memcpy
  h.update(bytes ? data : &kNone, bytes);
  return h.digest();
}

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

int64_t total(const std::vector<int64_t>& counts) {
  int64_t t = 0;
  for (int64_t c : counts) t += c;
  return t;
}

// The step's constants in float, each computed in double and rounded once; the betas in double
// for the bias corrections.
struct StepConsts {
  float lr, eps, b1, one_minus_b1, b2, one_minus_b2;
  double beta1, beta2;
};

StepConsts step_consts(const EmbeddingOptions& o) {
  return {static_cast<float>(o.lr),
          static_cast<float>(o.eps),
          static_cast<float>(o.beta1),
          static_cast<float>(1.0 - o.beta1),
          static_cast<float>(o.beta2),
          static_cast<float>(1.0 - o.beta2),
          o.beta1,
          o.beta2};
}

void adam_step(const StepConsts& c, int64_t dim, int64_t& t, float* x, float* m, float* v,
               const float* g) {
  ++t;
  const float bc1 = static_cast<float>(1.0 - std::pow(c.beta1, static_cast<double>(t)));
  const float bc2 = static_cast<float>(1.0 - std::pow(c.beta2, static_cast<double>(t)));
  for (int64_t j = 0; j < dim; ++j) {
    m[j] = c.b1 * m[j] + c.one_minus_b1 * g[j];
    v[j] = c.b2 * v[j] + c.one_minus_b2 * (g[j] * g[j]);
    x[j] -= c.lr * (m[j] / bc1) / (std::sqrt(v[j] / bc2) + c.eps);
  }
}

void adagrad_step(const StepConsts& c, int64_t dim, float* x, float* s, const float* g) {
  for (int64_t j = 0; j < dim; ++j) {
    s[j] += g[j] * g[j];
    x[j] -= c.lr * g[j] / (std::sqrt(s[j]) + c.eps);
  }
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

void EmbeddingOptions::validate() const {
  DSP_CHECK_ARG(dim > 0, "--embedding-dim must be > 0, got {}", dim);
  DSP_CHECK_ARG(optimizer == "adam" || optimizer == "adagrad",
                "--embedding-optimizer must be adam or adagrad, got '{}'", optimizer);
  DSP_CHECK_ARG(std::isfinite(lr) && lr > 0, "--embedding-lr must be > 0, got {}", lr);
  DSP_CHECK_ARG(beta1 >= 0 && beta1 < 1, "--embedding-beta1 must be in [0, 1), got {}", beta1);
  DSP_CHECK_ARG(beta2 >= 0 && beta2 < 1, "--embedding-beta2 must be in [0, 1), got {}", beta2);
  DSP_CHECK_ARG(std::isfinite(eps) && eps > 0, "--embedding-eps must be > 0, got {}", eps);
  DSP_CHECK_ARG(std::isfinite(init_scale) && init_scale >= 0,
                "--embedding-init-scale must be >= 0, got {}", init_scale);
}

uint64_t EmbeddingTable::bytes(int64_t rows, int64_t dim, const std::string& optimizer) {
  const uint64_t r = static_cast<uint64_t>(std::max<int64_t>(rows, 0));
  const uint64_t row = static_cast<uint64_t>(std::max<int64_t>(dim, 0)) * sizeof(float);
  const bool adam = optimizer == "adam";
  // values + (m, v | s), the per-row slot, adam's per-row step count
  return r * row * (adam ? 3 : 2) + r * sizeof(int64_t) * (adam ? 2 : 1);
}

void check_embedding_memory(int64_t rows, int64_t dim, const std::string& optimizer,
                            uint64_t budget) {
  check_memory(fmt::format("the embedding table ({} rows x {}, {})", rows, dim, optimizer),
               EmbeddingTable::bytes(rows, dim, optimizer), budget,
               "lower --embedding-dim, use more ranks or raise --memory-budget");
}

EmbeddingTable::EmbeddingTable(Communicator& comm, std::vector<int64_t> offsets,
                               const int64_t* dataset_ids, EmbeddingOptions opts)
    : comm_(comm), offsets_(std::move(offsets)), opts_(std::move(opts)) {
  opts_.validate();
  const int P = comm_.size();
  DSP_CHECK_ARG(static_cast<int>(offsets_.size()) == P + 1,
                "embedding table: {} partition offsets for {} ranks (need {})", offsets_.size(), P,
                P + 1);
  DSP_CHECK_ARG(offsets_[0] == 0 && std::is_sorted(offsets_.begin(), offsets_.end()),
                "embedding table: partition offsets must start at 0 and not decrease");
  adam_ = opts_.optimizer == "adam";
  begin_ = offsets_[comm_.rank()];
  end_ = offsets_[comm_.rank() + 1];
  const size_t rows = static_cast<size_t>(end_ - begin_);
  const size_t cells = rows * static_cast<size_t>(opts_.dim);
  values_.resize(cells);
  state1_.assign(cells, 0.0f);
  if (adam_) {
    state2_.assign(cells, 0.0f);
    steps_.assign(rows, 0);
  }
  slot_.assign(rows, -1);
  ids_digest_ = ids_digest(dataset_ids, begin_, end_ - begin_);
  init_rows(dataset_ids);
}

void EmbeddingTable::init_rows(const int64_t* dataset_ids) {
  const uint64_t key = embedding_key(opts_.seed);
  const float scale = static_cast<float>(opts_.init_scale);
  const int64_t dim = opts_.dim;
  parallel_for(0, end_ - begin_, 1024, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t id = dataset_ids ? dataset_ids[r] : begin_ + r;
      RngStream rs(key, static_cast<uint64_t>(id));
      float* x = values_.data() + r * dim;
      for (int64_t j = 0; j < dim; ++j) x[j] = (2.0f * rs.uniform01f() - 1.0f) * scale;
    }
  });
}

int EmbeddingTable::owner(int64_t id) const {
  return static_cast<int>(std::upper_bound(offsets_.begin(), offsets_.end(), id) -
                          offsets_.begin()) -
         1;
}

void EmbeddingTable::group_by_owner(const int64_t* ids, int64_t n, const char* what,
                                    std::vector<int64_t>& send, std::vector<int64_t>& counts,
                                    std::vector<int64_t>& pos) const {
  const int P = comm_.size();
  const int64_t N = num_nodes();
  std::vector<int> own(static_cast<size_t>(n));
  counts.assign(P, 0);
  for (int64_t i = 0; i < n; ++i) {
    DSP_CHECK_ARG(ids[i] >= 0 && ids[i] < N,
                  "embedding {}: id {} at position {} is outside [0, {})", what, ids[i], i, N);
    own[i] = owner(ids[i]);
    ++counts[own[i]];
  }
  std::vector<int64_t> cursor(P, 0);
  for (int p = 1; p < P; ++p) cursor[p] = cursor[p - 1] + counts[p - 1];
  send.resize(static_cast<size_t>(n));
  pos.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    pos[i] = cursor[own[i]]++;
    send[pos[i]] = ids[i];
  }
}

void EmbeddingTable::count_bytes(const std::vector<int64_t>& send, const std::vector<int64_t>& recv,
                                 int64_t elem) {
  for (int p = 0; p < comm_.size(); ++p) {
    if (p == comm_.rank()) continue;
    stats_.bytes_sent += send[p] * elem;
    stats_.bytes_recv += recv[p] * elem;
  }
}

void EmbeddingTable::gather(const int64_t* ids, int64_t n, float* out) {
  std::vector<int64_t> send, counts, pos;
  group_by_owner(ids, n, "gather", send, counts, pos);
  const std::vector<int64_t> rc = comm_.exchange_counts(counts, host_op("embedding gather counts"));
  std::vector<int64_t> req(static_cast<size_t>(total(rc)));
  comm_.all_to_all_v(send.data(), counts, req.data(), rc, DType::kInt64,
                     host_op("embedding gather ids"));
  const int64_t dim = opts_.dim;
  const size_t row_bytes = static_cast<size_t>(dim) * sizeof(float);
  std::vector<float> reply(req.size() * static_cast<size_t>(dim));
  parallel_for(0, static_cast<int64_t>(req.size()), 1024, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      std::memcpy(reply.data() + k * dim, values_.data() + (req[k] - begin_) * dim, row_bytes);
    }
  });
  std::vector<float> rows(static_cast<size_t>(n * dim));
  comm_.all_to_all_v(reply.data(), times(rc, dim), rows.data(), times(counts, dim), DType::kFloat32,
                     host_op("embedding gather rows"));
  parallel_for(0, n, 1024, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      std::memcpy(out + i * dim, rows.data() + pos[i] * dim, row_bytes);
  });
  ++stats_.gather_calls;
  stats_.rows_requested += n;
  stats_.rows_remote += n - counts[comm_.rank()];
  stats_.rows_served += static_cast<int64_t>(req.size());
  count_bytes(counts, rc, sizeof(int64_t));
  count_bytes(rc, counts, row_bytes);
}

std::vector<float> EmbeddingTable::gather(const std::vector<int64_t>& ids) {
  std::vector<float> out(ids.size() * static_cast<size_t>(opts_.dim));
  gather(ids.data(), static_cast<int64_t>(ids.size()), out.data());
  return out;
}

void EmbeddingTable::apply_gradients(const int64_t* ids, int64_t n, const float* grads,
                                     float scale) {
  std::vector<int64_t> send, counts, pos;
  group_by_owner(ids, n, "gradients", send, counts, pos);
  const int64_t dim = opts_.dim;
  std::vector<float> sg(static_cast<size_t>(n * dim));
  parallel_for(0, n, 1024, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      for (int64_t j = 0; j < dim; ++j) sg[pos[i] * dim + j] = grads[i * dim + j] * scale;
    }
  });
  const std::vector<int64_t> rc = comm_.exchange_counts(counts, host_op("embedding grad counts"));
  std::vector<int64_t> req(static_cast<size_t>(total(rc)));
  comm_.all_to_all_v(send.data(), counts, req.data(), rc, DType::kInt64,
                     host_op("embedding grad ids"));
  std::vector<float> rg(req.size() * static_cast<size_t>(dim));
  comm_.all_to_all_v(sg.data(), times(counts, dim), rg.data(), times(rc, dim), DType::kFloat32,
                     host_op("embedding grad rows"));
  step_rows(req, rg);
  ++stats_.grad_calls;
  stats_.grads_received += static_cast<int64_t>(req.size());
  count_bytes(counts, rc, sizeof(int64_t) + dim * sizeof(float));
}

void EmbeddingTable::step_rows(const std::vector<int64_t>& ids, const std::vector<float>& grads) {
  // Slots in first-arrival order; then each slot's arrivals in arrival order (a counting sort).
  std::vector<int64_t> touched, start(1, 0);
  for (int64_t id : ids) {
    int64_t& s = slot_[id - begin_];
    if (s < 0) {
      s = static_cast<int64_t>(touched.size());
      touched.push_back(id - begin_);
      start.push_back(0);
    }
    ++start[s + 1];
  }
  const int64_t T = static_cast<int64_t>(touched.size());
  for (int64_t t = 0; t < T; ++t) start[t + 1] += start[t];
  std::vector<int64_t> order(ids.size()), cursor(start.begin(), start.end() - 1);
  for (size_t k = 0; k < ids.size(); ++k) order[cursor[slot_[ids[k] - begin_]]++] = k;
  const StepConsts c = step_consts(opts_);
  const int64_t dim = opts_.dim;
  parallel_for(0, T, 64, [&](int64_t b, int64_t e) {
    std::vector<float> g(static_cast<size_t>(dim));
    for (int64_t t = b; t < e; ++t) {
      std::fill(g.begin(), g.end(), 0.0f);
      for (int64_t q = start[t]; q < start[t + 1]; ++q) {
        const float* src = grads.data() + order[q] * dim;
        for (int64_t j = 0; j < dim; ++j) g[j] += src[j];
      }
      const int64_t r = touched[t];
      float* x = values_.data() + r * dim;
      if (adam_) {
        adam_step(c, dim, steps_[r], x, state1_.data() + r * dim, state2_.data() + r * dim,
                  g.data());
      } else {
        adagrad_step(c, dim, x, state1_.data() + r * dim, g.data());
      }
    }
  });
  for (int64_t r : touched) slot_[r] = -1;
  stats_.rows_updated += T;
}

std::vector<EmbeddingTable::Section> EmbeddingTable::sections() const {
  const size_t cells = values_.size() * sizeof(float);
  return {{"the rows", values_.data(), cells},
          {adam_ ? "the optimizer state (m)" : "the optimizer state (s)", state1_.data(), cells},
          {"the optimizer state (v)", state2_.data(), state2_.size() * sizeof(float)},
          {"the step counts", steps_.data(), steps_.size() * sizeof(int64_t)}};
}

void EmbeddingTable::save(const std::string& path) const {
  FileHeader h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = kVersion;
  h.optimizer = adam_ ? 0 : 1;
  h.dim = opts_.dim;
  h.begin = begin_;
  h.end = end_;
  h.num_nodes = num_nodes();
  h.ranks = comm_.size();
  h.rank = comm_.rank();
  h.ids_digest = ids_digest_;
  const std::vector<Section> secs = sections();
  for (size_t i = 0; i < secs.size(); ++i) h.sums[i] = digest(secs[i].data, secs[i].bytes);
  h.header_sum = digest(&h, offsetof(FileHeader, header_sum));
  remove_stale_temps(path);
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  DSP_CHECK_T(IoError, f != nullptr, "{}: cannot open for writing: {}", tmp, std::strerror(errno));
  bool ok = std::fwrite(&h, sizeof(h), 1, f) == 1;
  for (const Section& s : secs)
    ok = ok && (!s.bytes || std::fwrite(s.data, 1, s.bytes, f) == s.bytes);
  ok = std::fflush(f) == 0 && ok;
  int err = errno;
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  std::error_code ec;
  if (ok) std::filesystem::rename(tmp, path, ec);
  if (!ok || ec) {
    std::remove(tmp.c_str());
    DSP_THROW_T(IoError, "{}: write failed: {} (nothing was replaced)", path,
                ok ? ec.message() : std::strerror(err));
  }
}

// The header of `file` against this table: FormatError naming the file and the first difference.
void EmbeddingTable::check_header(const std::string& path, const MappedFile& file) const {
  FileHeader h;
  DSP_CHECK_FORMAT(file.size() >= sizeof(h) && std::memcmp(file.data(), kMagic, 8) == 0,
                   "{} is not a dsp embedding table", path);
  std::memcpy(&h, file.data(), sizeof(h));
  DSP_CHECK_FORMAT(h.header_sum == digest(&h, offsetof(FileHeader, header_sum)),
                   "{}: checksum mismatch in the header: the file is damaged", path);
  DSP_CHECK_FORMAT(h.version == kVersion, "{}: embedding table version {}; this build reads {}",
                   path, h.version, kVersion);
  DSP_CHECK_FORMAT(h.dim == opts_.dim, "{}: embedding dim {} but this table's is {}", path, h.dim,
                   opts_.dim);
  const char* opt = h.optimizer == 0 ? "adam" : h.optimizer == 1 ? "adagrad" : "unknown";
  DSP_CHECK_FORMAT(opt == opts_.optimizer, "{}: {} optimizer state but this table uses {}", path,
                   opt, opts_.optimizer);
  DSP_CHECK_FORMAT(h.begin == begin_ && h.end == end_ && h.num_nodes == num_nodes(),
                   "{}: rows [{}, {}) of {} (rank {} of {}) but this rank owns [{}, {}) of {}",
                   path, h.begin, h.end, h.num_nodes, h.rank, h.ranks, begin_, end_, num_nodes());
  DSP_CHECK_FORMAT(h.ids_digest == ids_digest_,
                   "{}: rows [{}, {}) are other dataset nodes than this table's (another "
                   "partition)",
                   path, begin_, end_);
  size_t need = sizeof(h);
  for (const Section& s : sections()) need += s.bytes;
  DSP_CHECK_FORMAT(file.size() == need,
                   "{}: {} bytes where the header implies {}: the file is "
                   "damaged",
                   path, file.size(), need);
  const unsigned char* p = file.data() + sizeof(h);
  const std::vector<Section> secs = sections();
  for (size_t i = 0; i < secs.size(); ++i) {
    DSP_CHECK_FORMAT(h.sums[i] == digest(p, secs[i].bytes),
                     "{}: checksum mismatch in {}: the file is damaged", path, secs[i].what);
    p += secs[i].bytes;
  }
}

void EmbeddingTable::load(const std::string& path) {
  check_file_readable(path, "no such embedding table file");
  const MappedFile file(path);
  check_header(path, file);  // every check first: a refused file leaves the table unchanged
  const unsigned char* p = file.data() + sizeof(FileHeader);
  for (const Section& s : sections()) {
    if (s.bytes) std::memcpy(const_cast<void*>(s.data), p, s.bytes);
    p += s.bytes;
  }
}

void EmbeddingTable::set_lr(double lr) {
  DSP_CHECK_ARG(std::isfinite(lr) && lr > 0, "--embedding-lr must be > 0, got {}", lr);
  opts_.lr = lr;
}

}  // namespace dsp
