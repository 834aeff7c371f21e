// PaGraph's self-reliant partitioner (GNNSys'21 section 3.2); see PagraphOptions in partition.hpp.
#include <algorithm>
#include <numeric>

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "layout/partition/graph_scan.hpp"
#include "layout/partition/partition.hpp"
#include "layout/partition/partition_detail.hpp"

namespace dsp {
namespace {

constexpr uint32_t kPurposeHalo = 0x6861'6c6fu;  // "halo"

uint64_t entry_key(uint64_t key, int64_t v, int64_t u) {
  return mix64(key ^ mix64(static_cast<uint64_t>(v)) ^ (static_cast<uint64_t>(u) << 1));
}

// Positions (in row order) of the entries of row v that a cap keeps.
template <class T>
void capped_positions(const int64_t* p, const T* idx, int64_t v, int64_t cap, uint64_t key,
                      std::vector<std::pair<uint64_t, int64_t>>& tmp, std::vector<int64_t>& out) {
  out.clear();
  const int64_t deg = p[v + 1] - p[v];
  if (cap <= 0 || deg <= cap) {
    for (int64_t e = p[v]; e < p[v + 1]; ++e) out.push_back(e);
    return;
  }
  tmp.resize(deg);
  for (int64_t j = 0; j < deg; ++j) {
    tmp[j] = {entry_key(key, v, static_cast<int64_t>(idx[p[v] + j])), p[v] + j};
  }
  std::nth_element(tmp.begin(), tmp.begin() + cap, tmp.end());
  for (int64_t j = 0; j < cap; ++j) out.push_back(tmp[j].second);
  std::sort(out.begin(), out.end());
}

// The rows every replicated row and the greedy scan use: g itself without a cap, else each row
// cut to its `cap` kept entries (int64 indices, weights kept).
Csr cap_rows(const Csr& g, int64_t cap, uint64_t seed) {
  if (cap <= 0) return g;
  const int64_t n = g.num_nodes;
  const int64_t* p = g.rowptr();
  Csr c;
  c.num_nodes = n;
  std::vector<int64_t> ptr(n + 1, 0);
  for (int64_t v = 0; v < n; ++v) ptr[v + 1] = ptr[v] + std::min(cap, g.degree(v));
  std::vector<int64_t> idx(ptr[n]);
  std::vector<float> w(g.has_weights() ? ptr[n] : 0);
  const float* gw = g.has_weights() ? g.weights.data<float>() : nullptr;
  const uint64_t key = rng_key(seed, kPurposeHalo);
  with_indices(g, [&](const auto* gi) {
    parallel_for(0, n, 4096, [&](int64_t lo, int64_t hi) {
      std::vector<std::pair<uint64_t, int64_t>> tmp;
      std::vector<int64_t> pos;
      for (int64_t v = lo; v < hi; ++v) {
        capped_positions(p, gi, v, cap, key, tmp, pos);
        for (size_t j = 0; j < pos.size(); ++j) {
          idx[ptr[v] + j] = static_cast<int64_t>(gi[pos[j]]);
          if (gw) w[ptr[v] + j] = gw[pos[j]];
        }
      }
    });
  });
  c.indptr = Array::from_vector(std::move(ptr));
  c.indices = Array::from_vector(std::move(idx));
  if (gw) c.weights = Array::from_vector(std::move(w));
  return c;
}

// Membership of nodes in the parts' replicated sets PV_i: one bit per (part, node).
class PartBits {
 public:
  PartBits(int parts, int64_t n) : words_((n + 63) / 64), bits_(parts * words_, 0) {}
  // Sets the bit; true if it was clear.
  bool set(int i, int64_t v) {
    uint64_t& w = bits_[i * words_ + (v >> 6)];
    const uint64_t m = uint64_t{1} << (v & 63);
    const bool was = w & m;
    w |= m;
    return !was;
  }
  bool test(int i, int64_t v) const { return bits_[i * words_ + (v >> 6)] >> (v & 63) & 1; }

 private:
  int64_t words_;
  std::vector<uint64_t> bits_;
};

}  // namespace

std::vector<int64_t> capped_row(const Csr& g, int64_t v, int64_t cap, uint64_t seed) {
  std::vector<int64_t> pos, out;
  std::vector<std::pair<uint64_t, int64_t>> tmp;
  with_indices(g, [&](const auto* idx) {
    capped_positions(g.rowptr(), idx, v, cap, rng_key(seed, kPurposeHalo), tmp, pos);
    for (int64_t e : pos) out.push_back(static_cast<int64_t>(idx[e]));
  });
  return out;
}

namespace {

// The greedy scan of Eq. (1) and the owners of the other nodes, over `rows` (capped or whole).
class PagraphGreedy {
 public:
  PagraphGreedy(const Csr& rows, int parts, int hops)
      : rows_(rows),
        parts_(parts),
        hops_(hops),
        belongs_(rows.num_nodes, -1),
        stamp_(rows.num_nodes, -1),
        pv_(parts, rows.num_nodes),
        n_pv_(parts, 0),
        n_tv_(parts, 0) {}

  // Assigns the seeds in order; returns the number of neighbourhood nodes visited.
  int64_t seeds(const Array& train_idx) {
    const int64_t s = train_idx.defined() ? train_idx.dim(0) : 0;
    const double tv_avg = static_cast<double>(s) / parts_;
    std::vector<int64_t> cnt(parts_);
    int64_t visits = 0;
    for (int64_t t = 0; t < s; ++t) {
      const int64_t v = train_idx.int_at(t);
      in_hops(v, static_cast<int32_t>(t));
      visits += static_cast<int64_t>(nbrs_.size());
      // Eq. (1) with PaGraph's smoothing: (1 + |TV_i n IN_L|) (TV_avg - |TV_i|) / (1 + |PV_i|),
      // ties to the part with fewer seeds.
      std::fill(cnt.begin(), cnt.end(), 1);
      for (int64_t u : nbrs_) {
        if (belongs_[u] >= 0) ++cnt[belongs_[u]];
      }
      int best = 0;
      double best_score = 0;
      for (int i = 0; i < parts_; ++i) {
        const double score = static_cast<double>(cnt[i]) *
                             (tv_avg - static_cast<double>(n_tv_[i])) /
                             static_cast<double>(n_pv_[i] + 1);
        if (i == 0 || score > best_score || (score == best_score && n_tv_[i] < n_tv_[best])) {
          best = i;
          best_score = score;
        }
      }
      belongs_[v] = best;
      ++n_tv_[best];
      n_pv_[best] += pv_.set(best, v);
      for (int64_t u : nbrs_) n_pv_[best] += pv_.set(best, u);
    }
    return visits;
  }

  // Every other node (in id order) of g: among the parts whose seeds reach it (any part if none
  // does) that stay below (1 + 5%) of the mean nodes and adjacency entries, the one owning most
  // of its in-neighbours so far, then the least loaded. Owned rows need no replica, evaluation
  // cuts fewer edges, and no part ends up with every hub's row.
  std::vector<int32_t> owners(const Csr& g) {
    const int64_t n = g.num_nodes;
    Loads l;
    l.owned.assign(n_tv_.begin(), n_tv_.end());
    l.entries.assign(parts_, 0);
    l.cnt.resize(parts_);
    for (int64_t v = 0; v < n; ++v) {
      if (belongs_[v] >= 0) l.entries[belongs_[v]] += g.degree(v);
    }
    l.cap_n = 1.05 * static_cast<double>(n) / parts_ + 1;
    l.cap_e = 1.05 * static_cast<double>(g.num_edges()) / parts_ + 1;
    with_indices(g, [&](const auto* idx) {
      const int64_t* gp = g.rowptr();
      for (int64_t v = 0; v < n; ++v) {
        if (belongs_[v] >= 0) continue;
        std::fill(l.cnt.begin(), l.cnt.end(), 0);
        for (int64_t e = gp[v]; e < gp[v + 1]; ++e) {
          const int32_t b = belongs_[static_cast<int64_t>(idx[e])];
          if (b >= 0) ++l.cnt[b];
        }
        const int64_t deg = gp[v + 1] - gp[v];
        const int best = owner_of(v, deg, l);
        belongs_[v] = best;
        ++l.owned[best];
        l.entries[best] += deg;
      }
    });
    return std::move(belongs_);
  }

  const std::vector<int64_t>& replicated() const { return n_pv_; }

 private:
  // The parts' loads while owners() assigns, and the in-neighbours of the node at hand per part.
  struct Loads {
    std::vector<int64_t> owned, entries, cnt;
    double cap_n = 0, cap_e = 0;
    bool fits(int i, int64_t deg) const {
      return owned[i] + 1 <= cap_n && static_cast<double>(entries[i] + deg) <= cap_e;
    }
  };

  // owners()' choice for node v of in-degree deg (see there).
  int owner_of(int64_t v, int64_t deg, const Loads& l) const {
    bool any = false;
    for (int i = 0; i < parts_ && !any; ++i) any = pv_.test(i, v) && l.fits(i, deg);
    int best = -1;
    for (int i = 0; i < parts_; ++i) {
      if (!l.fits(i, deg) || (any && !pv_.test(i, v))) continue;
      if (best < 0 || l.cnt[i] > l.cnt[best] ||
          (l.cnt[i] == l.cnt[best] && l.owned[i] < l.owned[best])) {
        best = i;
      }
    }
    if (best >= 0) return best;
    auto fill = [&](int j) {  // fits nowhere: the least full part
      return std::max(l.owned[j] / l.cap_n, static_cast<double>(l.entries[j] + deg) / l.cap_e);
    };
    best = 0;
    for (int j = 1; j < parts_; ++j) best = fill(j) < fill(best) ? j : best;
    return best;
  }

  // IN_L(v) into nbrs_: the distinct nodes within L hops along in-edges (stamp t marks them).
  void in_hops(int64_t v, int32_t t) {
    nbrs_.clear();
    frontier_.assign(1, v);
    stamp_[v] = t;
    const int64_t* p = rows_.rowptr();
    with_indices(rows_, [&](const auto* idx) {
      for (int d = 1; d <= hops_ && !frontier_.empty(); ++d) {
        next_.clear();
        for (int64_t x : frontier_) {
          for (int64_t e = p[x]; e < p[x + 1]; ++e) {
            const int64_t u = static_cast<int64_t>(idx[e]);
            if (stamp_[u] == t) continue;
            stamp_[u] = t;
            nbrs_.push_back(u);
            next_.push_back(u);
          }
        }
        frontier_.swap(next_);
      }
    });
  }

  const Csr& rows_;
  const int parts_, hops_;
  std::vector<int32_t> belongs_, stamp_;
  PartBits pv_;
  std::vector<int64_t> n_pv_, n_tv_, nbrs_, frontier_, next_;
};

}  // namespace

std::vector<int32_t> assign_pagraph(const Csr& g, const Array& train_idx, int parts,
                                    const PagraphOptions& o, uint64_t seed, bool verbose,
                                    nlohmann::json* report) {
  DSP_CHECK_ARG(o.hops >= 1, "pagraph: --hops must be >= 1, got {}", o.hops);
  DSP_CHECK_ARG(o.halo_cap >= 0, "pagraph: --halo-cap must be >= 0, got {}", o.halo_cap);
  const int64_t n = g.num_nodes;
  const int64_t s = train_idx.defined() ? train_idx.dim(0) : 0;
  DSP_CHECK_ARG(s < INT32_MAX, "pagraph: {} training seeds exceed 2^31-1", s);
  detail::Progress progress(verbose);
  const Csr rows = cap_rows(g, o.halo_cap, seed);
  nlohmann::json rep = {{"hops", o.hops}, {"halo_cap", o.halo_cap}};
  rep["cap_s"] = progress.phase("cap rows");
  detail::release_pages(g);
  PagraphGreedy greedy(rows, parts, o.hops);
  const int64_t visits = greedy.seeds(train_idx);
  rep["greedy_s"] = progress.phase(fmt::format("greedy seeds ({} visits)", visits));
  detail::release_pages(g);
  rep["visits"] = visits;
  rep["replicated_nodes"] = greedy.replicated();
  std::vector<int32_t> belongs = greedy.owners(g);
  rep["owners_s"] = progress.phase("owners of other nodes");
  detail::release_pages(g);
  // stamps and owners, the PV bits, the capped rows
  rep["working_bytes"] = static_cast<int64_t>(n * 8 + parts * ((n + 63) / 64) * 8 +
                                              (o.halo_cap > 0 ? rows.num_edges() * 8 + n * 8 : 0));
  if (report) *report = rep;
  return belongs;
}

namespace detail {

namespace {

// The part's halo ids (new ids, ascending: nodes within L-1 hops of its seeds that it does not
// own) and its reach (nodes within L hops): a multi-source BFS from the seeds; a row is expanded
// when its node is within L-1 hops, own rows whole, replicated rows as the cap leaves them.
// `depth` is all -1 before and after.
std::vector<int64_t> halo_ids(const Csr& g, const Csr& rows, const std::vector<int64_t>& old2new,
                              const std::vector<int64_t>& new2old, int64_t begin, int64_t end,
                              const std::vector<int64_t>& seeds_new, int hops,
                              std::vector<int8_t>& depth, int64_t* reach) {
  auto owned = [&](int64_t x) { return old2new[x] >= begin && old2new[x] < end; };
  std::vector<int64_t> touched, frontier, next, ids;
  for (int64_t sn : seeds_new) {
    const int64_t x = new2old[sn];
    if (depth[x] < 0) {
      depth[x] = 0;
      touched.push_back(x);
      frontier.push_back(x);
    }
  }
  for (int d = 1; d <= hops && !frontier.empty(); ++d) {
    next.clear();
    for (int64_t x : frontier) {
      const Csr& src = owned(x) ? g : rows;
      with_indices(src, [&](const auto* idx) {
        for (int64_t e = src.rowptr()[x]; e < src.rowptr()[x + 1]; ++e) {
          const int64_t u = static_cast<int64_t>(idx[e]);
          if (depth[u] >= 0) continue;
          depth[u] = static_cast<int8_t>(d);
          touched.push_back(u);
          next.push_back(u);
        }
      });
    }
    frontier.swap(next);
  }
  for (int64_t x : touched) {
    if (depth[x] < hops && !owned(x)) ids.push_back(old2new[x]);
    depth[x] = -1;
  }
  *reach = static_cast<int64_t>(touched.size());
  std::sort(ids.begin(), ids.end());
  return ids;
}

// The rows of `ids` (new ids) from `rows`, renumbered and ascending (as the owner's patch row, or
// its capped subset), in g's index type.
Csr halo_rows(const Csr& g, const Csr& rows, const std::vector<int64_t>& ids,
              const std::vector<int64_t>& old2new, const std::vector<int64_t>& new2old) {
  const int64_t k = static_cast<int64_t>(ids.size());
  std::vector<int64_t> ptr(k + 1, 0);
  for (int64_t i = 0; i < k; ++i) ptr[i + 1] = ptr[i] + rows.degree(new2old[ids[i]]);
  std::vector<int64_t> idx_out(ptr[k]);
  std::vector<float> w_out(rows.has_weights() ? ptr[k] : 0);
  const float* rw = rows.has_weights() ? rows.weights.data<float>() : nullptr;
  with_indices(rows, [&](const auto* idx) {
    parallel_for(0, k, 1024, [&](int64_t lo, int64_t hi) {
      std::vector<std::pair<int64_t, float>> tmp;
      for (int64_t i = lo; i < hi; ++i) {
        const int64_t x = new2old[ids[i]], b = rows.rowptr()[x];
        tmp.resize(ptr[i + 1] - ptr[i]);
        for (size_t j = 0; j < tmp.size(); ++j) {
          tmp[j] = {old2new[static_cast<int64_t>(idx[b + j])], rw ? rw[b + j] : 0.0f};
        }
        std::sort(tmp.begin(), tmp.end(),
                  [](const auto& a, const auto& c) { return a.first < c.first; });
        for (size_t j = 0; j < tmp.size(); ++j) {
          idx_out[ptr[i] + j] = tmp[j].first;
          if (rw) w_out[ptr[i] + j] = tmp[j].second;
        }
      }
    });
  });
  Csr out;
  out.num_nodes = k;
  out.indptr = Array::from_vector(std::move(ptr));
  if (g.index_dtype() == DType::kInt32) {
    out.indices = Array::from_vector(std::vector<int32_t>(idx_out.begin(), idx_out.end()));
  } else {
    out.indices = Array::from_vector(std::move(idx_out));
  }
  if (rw) out.weights = Array::from_vector(std::move(w_out));
  return out;
}

}  // namespace

Halo build_halo(const Csr& g, const Csr& rows, const std::vector<int64_t>& old2new,
                const std::vector<int64_t>& new2old, int64_t begin, int64_t end,
                const std::vector<int64_t>& seeds_new, int hops, std::vector<int8_t>& depth) {
  Halo h;
  h.ids = halo_ids(g, rows, old2new, new2old, begin, end, seeds_new, hops, depth, &h.reach);
  h.rows = halo_rows(g, rows, h.ids, old2new, new2old);
  return h;
}

Csr halo_rows_source(const Csr& g, int64_t cap, uint64_t seed) { return cap_rows(g, cap, seed); }

}  // namespace detail

PartitionData replicated_view(const PartitionData& part) {
  const PartitionMeta& m = part.meta;
  DSP_CHECK_ARG(m.hops > 0,
                "{}: the partition replicates no halo (method {}); partition with --method "
                "pagraph --hops L for self-reliant parts",
                part.dir, m.method);
  const int64_t n = m.num_nodes, begin = m.offsets[part.part], end = m.offsets[part.part + 1];
  const int64_t k = part.halo_ids.defined() ? part.halo_ids.dim(0) : 0;
  const int64_t* hid = k ? part.halo_ids.data<int64_t>() : nullptr;
  PartitionData v;
  v.meta = m;
  v.meta.parts = 1;
  v.meta.offsets = {0, n};
  PartStats ps;
  ps.end = n;
  ps.edges = part.patch.num_edges() + part.halo.num_edges();
  ps.seeds = part.seeds.defined() ? part.seeds.dim(0) : 0;
  v.meta.part = {ps};
  v.dir = part.dir;
  v.part = 0;
  v.seeds = part.seeds;
  v.link_train = part.link_train;  // the part's training edges, like its seeds
  share_node_arrays(part, v);
  // Row v comes from the own patch, the halo (binary search in halo_ids) or nowhere.
  std::vector<int64_t> ptr(n + 1, 0);
  for (int64_t x = 0, j = 0; x < n; ++x) {
    int64_t len = 0;
    if (x >= begin && x < end) {
      len = part.patch.degree(x - begin);
    } else if (j < k && hid[j] == x) {
      len = part.halo.degree(j++);
    }
    ptr[x + 1] = ptr[x] + len;
  }
  const bool w = m.has_weights;
  std::vector<float> wt(w ? ptr[n] : 0);
  dispatch_index(m.index_dtype, [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> idx(ptr[n]);
    auto copy = [&](const Csr& src, int64_t r, int64_t x) {
      const int64_t b = src.rowptr()[r], len = src.degree(r);
      if (len == 0) return;
      std::copy_n(src.indices.data<T>() + b, len, idx.begin() + ptr[x]);
      if (w) std::copy_n(src.weights.data<float>() + b, len, wt.begin() + ptr[x]);
    };
    parallel_for(begin, end, 4096, [&](int64_t lo, int64_t hi) {
      for (int64_t x = lo; x < hi; ++x) copy(part.patch, x - begin, x);
    });
    parallel_for(0, k, 4096, [&](int64_t lo, int64_t hi) {
      for (int64_t j = lo; j < hi; ++j) copy(part.halo, j, hid[j]);
    });
    v.patch.indices = Array::from_vector(std::move(idx));
  });
  v.patch.num_nodes = n;
  v.patch.indptr = Array::from_vector(std::move(ptr));
  if (w) v.patch.weights = Array::from_vector(std::move(wt));
  return v;
}

}  // namespace dsp
