#include "csp/exclusions.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "csp/sample_kernels.hpp"
#include "csp/sampler_detail.hpp"

namespace dsp {

namespace {
using csp_detail::a2a;
using csp_detail::host_view;
using csp_detail::prefix;
using csp_detail::upload;
}  // namespace

std::string exclusion_error(const SamplerOptions& o, int64_t num_nodes,
                            const CollectiveSampler::ExcludedEdges& ex) {
  if (ex.dst.empty() && ex.src.empty()) return "";
  if (o.biased() || o.layer()) {
    return "sampler: edge exclusion supports node-wise uniform sampling; biased and layer-wise "
           "sampling are not supported";
  }
  if (o.labor()) {
    return "sampler: edge exclusion (link prediction) is not supported with --sampler labor";
  }
  if (ex.dst.size() != ex.src.size()) {
    return fmt::format("sampler: excluded edges: {} dst ids and {} src ids (one of each per edge)",
                       ex.dst.size(), ex.src.size());
  }
  if (!ex.rel.empty()) {
    return "sampler: excluded edges name relations, but the graph is homogeneous";
  }
  const int64_t n = num_nodes;
  for (size_t i = 0; i < ex.dst.size(); ++i) {
    if (ex.dst[i] < 0 || ex.dst[i] >= n || ex.src[i] < 0 || ex.src[i] >= n) {
      return fmt::format(
          "sampler: excluded edge {} -> {} is not between node ids (graph has {} "
          "nodes)",
          ex.src[i], ex.dst[i], n);
    }
  }
  return "";
}

namespace {
// Pairs per requester, each sorted and made distinct, packed as TaskExclusions::pairs reads them:
// P + 1 offsets, then every dst, then every src.
std::vector<int64_t> pack_pairs(std::vector<std::vector<std::pair<int64_t, int64_t>>>& by) {
  const int P = static_cast<int>(by.size());
  std::vector<int64_t> off(P + 1, 0);
  for (int q = 0; q < P; ++q) {
    std::sort(by[q].begin(), by[q].end());
    by[q].erase(std::unique(by[q].begin(), by[q].end()), by[q].end());
    off[q + 1] = off[q] + static_cast<int64_t>(by[q].size());
  }
  const int64_t M = off[P];
  std::vector<int64_t> out(P + 1 + 2 * M);
  std::copy(off.begin(), off.end(), out.begin());
  for (int q = 0; q < P; ++q) {
    for (int64_t j = 0; j < off[q + 1] - off[q]; ++j) {
      out[P + 1 + off[q] + j] = by[q][j].first;
      out[P + 1 + M + off[q] + j] = by[q][j].second;
    }
  }
  return out;
}
}  // namespace

EdgeExclusions::EdgeExclusions(Communicator& comm, SamplerBackend& backend,
                               std::vector<int64_t> offsets, bool pull)
    : comm_(comm),
      be_(backend),
      offsets_(std::move(offsets)),
      pull_(pull),
      size_(comm.size()),
      task_buf_(backend.make_buffer()),
      pair_buf_(backend.make_buffer()),
      count_buf_(backend.make_buffer()) {}

void EdgeExclusions::clear() {
  pairs_.clear();
  own_.clear();
}

void EdgeExclusions::zero() {
  upload(be_, *count_buf_, std::vector<uint64_t>{0}, true);
  used_ = false;
}

int64_t EdgeExclusions::read_count() const {
  std::vector<uint64_t> tmp;
  return static_cast<int64_t>(*host_view(be_, *count_buf_, 1, tmp));
}

void EdgeExclusions::share(const CollectiveSampler::ExcludedEdges* ex) {
  const int64_t m = ex ? static_cast<int64_t>(ex->dst.size()) : 0;
  std::vector<int64_t> sc(size_, 0), owner(m);
  for (int64_t i = 0; i < m; ++i) {
    owner[i] = size_ == 1 ? 0 : csp::owner_of(offsets_.data(), size_, ex->dst[i]);
    sc[owner[i]] += 2;
  }
  std::vector<int64_t> at = prefix(sc), send(2 * m);
  for (int64_t i = 0; i < m; ++i) {
    send[at[owner[i]]++] = ex->dst[i];
    send[at[owner[i]]++] = ex->src[i];
  }
  std::vector<int64_t> rc = sc, recv;
  if (size_ == 1) {
    recv = std::move(send);
  } else {
    OpOptions o;
    o.label = "csp.exclude.counts";
    o.host_buffers = true;
    rc = comm_.exchange_counts(sc, o);
    recv = a2a(comm_, send, sc, rc, "csp.exclude");
  }
  const std::vector<int64_t> ro = prefix(rc);
  std::vector<std::vector<std::pair<int64_t, int64_t>>> by(size_);
  for (int q = 0; q < size_; ++q) {
    for (int64_t j = ro[q]; j < ro[q + 1]; j += 2) by[q].emplace_back(recv[j], recv[j + 1]);
  }
  pairs_ = pack_pairs(by);
  if (be_.memory() != MemorySpace::kHost) upload(be_, *pair_buf_, pairs_, true);
  if (pull_ && size_ > 1 && m > 0) {
    // pull mode samples the rows it fetches itself, under its own pairs
    std::vector<std::vector<std::pair<int64_t, int64_t>>> own(1);
    for (int64_t i = 0; i < m; ++i) own[0].emplace_back(ex->dst[i], ex->src[i]);
    own_ = pack_pairs(own);
  }
}

// The exclusions of the served tasks [b, e): their requesters' pairs (pairs_), the tasks'
// offsets per requester uploaded (P + 1 words, no read); null when this rank has no pairs.
const TaskExclusions* EdgeExclusions::served(const std::vector<int64_t>& served_off, int64_t b,
                                             int64_t e) {
  if (pairs_.empty() || pairs_[size_] == 0 || e == b) return nullptr;
  task_off_.resize(size_ + 1);
  for (int q = 0; q <= size_; ++q) {
    task_off_[q] = std::clamp<int64_t>(served_off[q] - b, 0, e - b);
  }
  const bool host = be_.memory() == MemorySpace::kHost;
  if (!host) upload(be_, *task_buf_, task_off_, true);
  used_ = true;
  tasks_ = {host ? task_off_.data() : task_buf_->as<int64_t>(),
            host ? pairs_.data() : pair_buf_->as<int64_t>(), size_, count_buf_->as<uint64_t>()};
  return &tasks_;
}

}  // namespace dsp
