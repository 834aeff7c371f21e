// BGL's BFS-block partitioner (NSDI'23 section 3.3); see BfsBlockOptions in partition.hpp.
//
// Memory: per node a block id (int32), one queue slot (uint32 below 2^32 nodes, else int64) that
// is reused as the counting-sort order of the nodes by block, and the int32 result; per block a
// few counters; the block graph (at most min(entries, blocks^2) weighted pairs). The entries are
// only read, row by row, so a mapped CSR of any size (int32 or int64 indices, more than 2^31-1
// entries) stays on disk except for the pages being read; each phase releases the pages it read
// (the rows are read out of order, so within a phase they stay mapped).
#include <algorithm>
#include <array>
#include <numeric>

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "layout/partition/graph_scan.hpp"
#include "layout/partition/partition.hpp"
#include "layout/partition/partition_detail.hpp"

namespace dsp {
namespace {

// Symmetric weighted graph over blocks: adj[ptr[b], ptr[b+1]) are b's neighbour blocks
// (ascending, no self loops), w the number of adjacency entries joining the two.
struct BlockGraph {
  std::vector<int64_t> ptr{0};
  std::vector<int32_t> adj;
  std::vector<int64_t> w;
  int64_t blocks() const { return static_cast<int64_t>(ptr.size()) - 1; }
};

// Phase 1: multi-source BFS along in-edges. Each round draws ceil(unvisited / t) random roots
// among the unvisited nodes (ScanOrder), gives each a new block id and grows all of them level by
// level from one FIFO queue (first visitor wins); a block stops growing at t nodes. Rounds repeat
// until every node has a block (nodes no root reaches start blocks of their own).
template <class Q, class T>
void bfs_coarsen(const Csr& g, const T* idx, int64_t t, uint64_t key, std::vector<int32_t>& block,
                 std::vector<int64_t>& size, std::vector<Q>& queue) {
  const int64_t n = g.num_nodes;
  const int64_t* p = g.rowptr();
  block.assign(n, -1);
  size.clear();
  queue.resize(n);
  ScanOrder scan(n, key);
  int64_t next = 0, assigned = 0;
  while (assigned < n) {
    int64_t want = std::max<int64_t>(1, (n - assigned + t - 1) / t);
    int64_t head = 0, tail = 0;
    for (; want > 0 && next < n; ++next) {
      int64_t v = scan[next];
      if (block[v] >= 0) continue;
      DSP_CHECK_ARG(size.size() < static_cast<size_t>(INT32_MAX),
                    "bfs-blocks: more than 2^31-1 blocks; raise --block-size");
      block[v] = static_cast<int32_t>(size.size());
      size.push_back(1);
      queue[tail++] = static_cast<Q>(v);
      ++assigned;
      --want;
    }
    while (head < tail) {
      const int64_t u = static_cast<int64_t>(queue[head++]);
      const int32_t b = block[u];
      for (int64_t e = p[u]; e < p[u + 1] && size[b] < t; ++e) {
        const int64_t w = static_cast<int64_t>(idx[e]);
        if (block[w] >= 0) continue;
        block[w] = b;
        ++size[b];
        queue[tail++] = static_cast<Q>(w);
        ++assigned;
      }
    }
  }
}

// Sums the entries joining every pair of groups, where node v is in group grp[v] (< groups):
// nodes are counting-sorted by group into `order` (the BFS queue's memory), then every group's
// rows are scanned once into a dense per-thread accumulator. The result is symmetric. With
// `scan`, only the rows of the groups it marks are read (pairs with at least one such group).
template <class Q, class T>
BlockGraph block_graph(const Csr& g, const T* idx, const std::vector<int32_t>& grp, int64_t groups,
                       std::vector<Q>& order, const std::vector<uint8_t>* scan = nullptr) {
  const int64_t n = g.num_nodes;
  const int64_t* p = g.rowptr();
  std::vector<int64_t> start(groups + 1, 0);
  for (int64_t v = 0; v < n; ++v) ++start[grp[v] + 1];
  std::partial_sum(start.begin(), start.end(), start.begin());
  {
    std::vector<int64_t> cur(start.begin(), start.end() - 1);
    for (int64_t v = 0; v < n; ++v) order[cur[grp[v]]++] = static_cast<Q>(v);
  }
  // Directed pairs (b -> c: an entry of a row in b names a node in c), per group.
  std::vector<std::vector<std::pair<int32_t, int64_t>>> out(groups);
  parallel_for(0, groups, 16, [&](int64_t lo, int64_t hi) {
    std::vector<int64_t> acc(groups, 0);
    std::vector<int32_t> touched;
    for (int64_t b = lo; b < hi; ++b) {
      if (scan && !(*scan)[b]) continue;
      for (int64_t i = start[b]; i < start[b + 1]; ++i) {
        const int64_t v = static_cast<int64_t>(order[i]);
        for (int64_t e = p[v]; e < p[v + 1]; ++e) {
          const int32_t c = grp[static_cast<int64_t>(idx[e])];
          if (c == b) continue;
          if (acc[c]++ == 0) touched.push_back(c);
        }
      }
      for (int32_t c : touched) {
        out[b].push_back({c, acc[c]});
        acc[c] = 0;
      }
      touched.clear();
    }
  });
  // Symmetrize: both directions of every pair, then merge repeats per block.
  BlockGraph bg;
  std::vector<int64_t> deg(groups + 1, 0);
  for (int64_t b = 0; b < groups; ++b) {
    deg[b + 1] += static_cast<int64_t>(out[b].size());
    for (const auto& [c, w] : out[b]) ++deg[c + 1];
  }
  std::partial_sum(deg.begin(), deg.end(), deg.begin());
  std::vector<std::pair<int32_t, int64_t>> all(deg[groups]);
  {
    std::vector<int64_t> cur(deg.begin(), deg.end() - 1);
    for (int64_t b = 0; b < groups; ++b) {
      for (const auto& [c, w] : out[b]) {
        all[cur[b]++] = {c, w};
        all[cur[c]++] = {static_cast<int32_t>(b), w};
      }
      std::vector<std::pair<int32_t, int64_t>>().swap(out[b]);
    }
  }
  bg.ptr.assign(1, 0);
  for (int64_t b = 0; b < groups; ++b) {
    std::sort(all.begin() + deg[b], all.begin() + deg[b + 1]);
    for (int64_t i = deg[b]; i < deg[b + 1]; ++i) {
      if (!bg.adj.empty() && static_cast<int64_t>(bg.adj.size()) > bg.ptr.back() &&
          bg.adj.back() == all[i].first) {
        bg.w.back() += all[i].second;
      } else {
        bg.adj.push_back(all[i].first);
        bg.w.push_back(all[i].second);
      }
    }
    bg.ptr.push_back(static_cast<int64_t>(bg.adj.size()));
  }
  return bg;
}

// Large blocks: the top 10% by size (BGL), and every block of at least t/4 nodes (on small
// graphs the top 10% alone would leave full-size blocks to be merged).
std::vector<uint8_t> large_blocks(const std::vector<int64_t>& size, int64_t t) {
  const int64_t nb = static_cast<int64_t>(size.size());
  std::vector<int32_t> by_size(nb);
  std::iota(by_size.begin(), by_size.end(), 0);
  std::sort(by_size.begin(), by_size.end(),
            [&](int32_t a, int32_t b) { return size[a] != size[b] ? size[a] > size[b] : a < b; });
  std::vector<uint8_t> large(nb, 0);
  const int64_t top = std::max<int64_t>(1, (nb + 9) / 10);
  for (int64_t i = 0; i < nb; ++i) {
    large[by_size[i]] = i < top || size[by_size[i]] >= std::max<int64_t>(1, t / 4);
  }
  return large;
}

// Phase 2, one level: every small block joins its large neighbour with the most joining entries
// (while that stays below 2t nodes); the small blocks left are grouped at random, t nodes a group.
// `bg` needs the pairs of the small blocks only. Returns the new group of every block and the
// number of groups.
int64_t merge_level(const BlockGraph& bg, const std::vector<int64_t>& size,
                    const std::vector<uint8_t>& large, int64_t t, uint64_t key,
                    std::vector<int32_t>& into) {
  const int64_t nb = bg.blocks();
  into.assign(nb, -1);
  std::vector<int64_t> grown(size);  // sizes of large blocks with their merged small ones
  for (int64_t b = 0; b < nb; ++b) {
    if (large[b]) into[b] = static_cast<int32_t>(b);
  }
  for (int64_t b = 0; b < nb; ++b) {
    if (large[b]) continue;
    int64_t best = -1, best_w = 0;
    for (int64_t e = bg.ptr[b]; e < bg.ptr[b + 1]; ++e) {
      const int32_t c = bg.adj[e];
      if (large[c] && bg.w[e] > best_w && grown[c] + size[b] <= 2 * t) {
        best = c;
        best_w = bg.w[e];
      }
    }
    if (best >= 0) {
      into[b] = static_cast<int32_t>(best);
      grown[best] += size[b];
    }
  }
  // Random groups of the small blocks left, in a seeded order.
  ScanOrder scan(nb, key);
  int32_t group = -1;
  int64_t group_size = t;
  for (int64_t i = 0; i < nb; ++i) {
    const int64_t b = scan[i];
    if (into[b] >= 0) continue;
    if (group_size >= t) {
      group = static_cast<int32_t>(b);
      group_size = 0;
    }
    into[b] = group;
    group_size += size[b];
  }
  // Renumber the groups densely.
  std::vector<int32_t> id(nb, -1);
  int64_t groups = 0;
  for (int64_t b = 0; b < nb; ++b) {
    if (id[into[b]] < 0) id[into[b]] = static_cast<int32_t>(groups++);
  }
  for (int64_t b = 0; b < nb; ++b) into[b] = id[into[b]];
  return groups;
}

// Per block (and per part) what the balance constraints count: nodes, training seeds, adjacency
// entries (the rows' lengths: a part's topology memory).
constexpr int kLoads = 3;
using Load = std::array<int64_t, kLoads>;

// Phase 3: greedy assignment of whole blocks. Score of part i for block B (BGL's product, with
// the entries as a third balance term unless it is off):
//   locality_i x (1 - seeds_i / seed cap) x (1 - nodes_i / node cap) [x (1 - entries_i / cap)],
// balances counted with B added; a part B would overfill in what B brings is not eligible.
// locality_i: the blocks of part i within `hops` hops of B, each weighted by the probability that
// a random walk from B along joining entries is there after h steps (BGL counts the blocks; on
// dense block graphs every part is within two hops of every block and the counts do not tell the
// parts apart). BGL leaves the order open; started from one block, its first part collects every
// block (the others have no locality yet) until it is full, which is a random split of the blocks.
// So each part first gets one centre block, chosen to be the least reachable from the centres
// before it, and the others follow in multi-source BFS order over the block graph from them.
// With no neighbour assigned, the best balance wins; if B fits nowhere, the part it overfills
// least.
class BlockAssigner {
 public:
  // cap[r] <= 0: load r is not balanced.
  BlockAssigner(const BlockGraph& bg, const std::vector<Load>& load, int parts, int hops,
                const std::array<double, kLoads>& cap)
      : bg_(bg),
        load_(load),
        parts_(parts),
        hops_(hops),
        cap_(cap),
        nb_(bg.blocks()),
        part_(nb_, -1),
        dist_(nb_, -1),
        reach_(nb_, 0.0),
        vol_(nb_, 0.0),
        part_load_(parts, Load{}) {
    for (int64_t x = 0; x < nb_; ++x) {
      for (int64_t e = bg.ptr[x]; e < bg.ptr[x + 1]; ++e) vol_[x] += static_cast<double>(bg.w[e]);
    }
  }

  std::vector<int32_t> run() {
    std::vector<int32_t> order = centres();
    for (size_t i = 0; i < order.size(); ++i) place(order[i], static_cast<int>(i));
    const size_t first = order.size();
    std::vector<uint8_t> queued(nb_, 0);
    for (int32_t c : order) queued[c] = 1;
    std::vector<int32_t> by_size = blocks_by_size();
    size_t h = 0;
    for (size_t r = 0;; ++r) {  // BFS from the centres, then from any block left, largest first
      for (; h < order.size(); ++h) {
        for (int64_t e = bg_.ptr[order[h]]; e < bg_.ptr[order[h] + 1]; ++e) {
          if (!queued[bg_.adj[e]]) {
            queued[bg_.adj[e]] = 1;
            order.push_back(bg_.adj[e]);
          }
        }
      }
      while (r < by_size.size() && queued[by_size[r]]) ++r;
      if (r == by_size.size()) break;
      queued[by_size[r]] = 1;
      order.push_back(by_size[r]);
    }
    for (size_t i = first; i < order.size(); ++i) place(order[i], choose(order[i]));
    return part_;
  }

 private:
  std::vector<int32_t> blocks_by_size() const {
    std::vector<int32_t> v(nb_);
    std::iota(v.begin(), v.end(), 0);
    std::stable_sort(v.begin(), v.end(),
                     [&](int32_t a, int32_t b) { return load_[a][0] > load_[b][0]; });
    return v;
  }

  // Random-walk reach of the blocks within hops_ of b: fn(block, probability) for each.
  template <class F>
  void walk(int32_t b, F&& fn) {
    frontier_.assign(1, b);
    dist_[b] = 0;
    reach_[b] = 1.0;
    touched_.assign(1, b);
    for (int d = 1; d <= hops_ && !frontier_.empty(); ++d) {
      next_.clear();
      for (int32_t x : frontier_) {
        for (int64_t e = bg_.ptr[x]; e < bg_.ptr[x + 1]; ++e) {
          const int32_t c = bg_.adj[e];
          if (dist_[c] >= 0 && dist_[c] < d) continue;
          if (dist_[c] < 0) {
            dist_[c] = d;
            touched_.push_back(c);
            next_.push_back(c);
          }
          reach_[c] += reach_[x] * static_cast<double>(bg_.w[e]) / vol_[x];
        }
      }
      frontier_.swap(next_);
    }
    for (int32_t x : touched_) {
      if (x != b) fn(x, reach_[x]);
      dist_[x] = -1;
      reach_[x] = 0.0;
    }
  }

  // One centre per part: the largest block, then each time the block least reachable from the
  // centres so far (ties: the larger).
  std::vector<int32_t> centres() {
    std::vector<int32_t> by_size = blocks_by_size(), out;
    std::vector<double> near(nb_, 0.0);
    for (int i = 0; i < parts_ && i < nb_; ++i) {
      int32_t best = -1;
      for (int32_t b : by_size) {
        if (part_[b] < 0 && std::find(out.begin(), out.end(), b) == out.end() &&
            (best < 0 || near[b] < near[best])) {
          best = b;
        }
      }
      out.push_back(best);
      near[best] = 1e300;
      walk(best, [&](int32_t x, double r) { near[x] += r; });
    }
    return out;
  }

  // Balance product of part i with b added; *ok: b does not overfill i in what b brings (a block
  // without seeds may still go to a part that is full of seeds).
  double balance(int i, int32_t b, bool* ok) const {
    double prod = 1.0;
    *ok = true;
    for (int r = 0; r < kLoads; ++r) {
      if (cap_[r] <= 0) continue;
      const double f = 1.0 - static_cast<double>(part_load_[i][r] + load_[b][r]) / cap_[r];
      *ok = *ok && (f >= 0 || load_[b][r] == 0);
      prod *= std::max(f, 1e-3);
    }
    return prod;
  }

  // How full part i would be with b added: the largest load over its capacity.
  double fill(int i, int32_t b) const {
    double f = 0;
    for (int r = 0; r < kLoads; ++r) {
      if (cap_[r] > 0) {
        f = std::max(f, static_cast<double>(part_load_[i][r] + load_[b][r]) / cap_[r]);
      }
    }
    return f;
  }

  int choose(int32_t b) {
    std::vector<double> loc(parts_, 0.0);
    walk(b, [&](int32_t x, double r) {
      if (part_[x] >= 0) loc[part_[x]] += r;
    });
    int best = -1, best_bal_part = -1;
    double best_score = 0, best_bal = -1;
    for (int i = 0; i < parts_; ++i) {
      bool ok = false;
      const double bal = balance(i, b, &ok);
      if (!ok) continue;
      if (loc[i] * bal > best_score) {
        best = i;
        best_score = loc[i] * bal;
      }
      if (bal > best_bal) {
        best_bal_part = i;
        best_bal = bal;
      }
    }
    if (best < 0) best = best_bal_part;  // no assigned neighbour: the best balance
    if (best < 0) {                      // fits nowhere: the part least overfilled
      double least = 0;
      for (int i = 0; i < parts_; ++i) {
        const double f = fill(i, b);
        if (best < 0 || f < least) {
          best = i;
          least = f;
        }
      }
    }
    return best;
  }

  void place(int32_t b, int i) {
    part_[b] = i;
    for (int r = 0; r < kLoads; ++r) part_load_[i][r] += load_[b][r];
  }

  const BlockGraph& bg_;
  const std::vector<Load>& load_;
  const int parts_, hops_;
  const std::array<double, kLoads> cap_;
  const int64_t nb_;
  std::vector<int32_t> part_, dist_, frontier_, next_, touched_;
  std::vector<double> reach_, vol_;
  std::vector<Load> part_load_;
};

// 256 blocks per part, but not below 256 nodes (smaller blocks are mostly boundary) unless that
// leaves fewer than 4 blocks per part.
int64_t default_block_size(int64_t n, int parts) {
  const int64_t p = parts;
  return std::max<int64_t>({1, n / (256 * p), std::min<int64_t>(256, n / (4 * p))});
}

template <class Q, class T>
std::vector<int32_t> bfs_blocks_impl(const Csr& g, const T* idx, const Array& train_idx, int parts,
                                     const BfsBlockOptions& o, uint64_t seed, bool verbose,
                                     nlohmann::json* report) {
  const int64_t n = g.num_nodes;
  const int64_t t = o.block_size > 0 ? o.block_size : default_block_size(n, parts);
  detail::Progress progress(verbose);
  nlohmann::json rep = {{"block_size", t}, {"hops", o.hops}};
  std::vector<int32_t> block;
  std::vector<int64_t> size;
  std::vector<Q> queue;
  bfs_coarsen<Q>(g, idx, t, rng_key(seed, 0x6266'7362), block, size, queue);  // "bfsb"
  rep["blocks_bfs"] = size.size();
  rep["bfs_s"] = progress.phase(fmt::format("BFS blocks ({})", size.size()));
  detail::release_pages(g);

  // Multi-level merging until about the blocks of t nodes it takes to hold the graph are left, or
  // a level changes nothing. A level reads the rows of its small blocks only; the block graph of
  // the result is built once, at the end.
  const int64_t target = std::max<int64_t>(4 * parts, (n + t - 1) / t + parts);
  for (int level = 0; level < 4 && static_cast<int64_t>(size.size()) > target; ++level) {
    const int64_t nb = static_cast<int64_t>(size.size());
    std::vector<uint8_t> large = large_blocks(size, t), small(nb);
    for (int64_t b = 0; b < nb; ++b) small[b] = !large[b];
    BlockGraph sg = block_graph<Q>(g, idx, block, nb, queue, &small);
    detail::release_pages(g);
    std::vector<int32_t> into;
    const int64_t groups = merge_level(sg, size, large, t, rng_key(seed, 0x6d72'6765, level), into);
    if (groups == nb) break;
    std::vector<int64_t> merged(groups, 0);
    for (int64_t b = 0; b < nb; ++b) merged[into[b]] += size[b];
    size.swap(merged);
    for (int64_t v = 0; v < n; ++v) block[v] = into[block[v]];
  }
  BlockGraph bg = block_graph<Q>(g, idx, block, static_cast<int64_t>(size.size()), queue);
  rep["blocks_merged"] = bg.blocks();
  rep["block_graph_entries"] = bg.adj.size();
  // adjacency entries between blocks (each pair's weight counts both rows)
  rep["entries_between_blocks"] = std::accumulate(bg.w.begin(), bg.w.end(), int64_t{0}) / 2;
  rep["merge_s"] = progress.phase(fmt::format("merge blocks ({})", bg.blocks()));
  detail::release_pages(g);

  std::vector<Load> load(bg.blocks(), Load{});
  const int64_t s = train_idx.defined() ? train_idx.dim(0) : 0;
  for (int64_t v = 0; v < n; ++v) {
    ++load[block[v]][0];
    load[block[v]][2] += g.degree(v);
  }
  for (int64_t i = 0; i < s; ++i) ++load[block[train_idx.int_at(i)]][1];
  const double k = (1.0 + o.slack) / parts;
  const std::array<double, kLoads> cap = {
      k * static_cast<double>(n), k * static_cast<double>(s),
      o.balance_entries ? k * static_cast<double>(g.num_edges()) : 0.0};
  std::vector<int32_t> part = BlockAssigner(bg, load, parts, o.hops, cap).run();
  for (int64_t v = 0; v < n; ++v) block[v] = part[block[v]];  // uncoarsen in place
  rep["assign_s"] = progress.phase("assign blocks");
  detail::release_pages(g);
  // Working memory of the arrays above (the mapped entries excluded).
  rep["working_bytes"] =
      static_cast<int64_t>(n * (sizeof(int32_t) + sizeof(Q)) + bg.adj.size() * 12 +
                           bg.ptr.size() * 8 + size.size() * 24);
  if (report) *report = rep;
  return block;
}

}  // namespace

std::vector<int32_t> assign_bfs_blocks(const Csr& g, const Array& train_idx, int parts,
                                       const BfsBlockOptions& opts, uint64_t seed, bool verbose,
                                       nlohmann::json* report) {
  DSP_CHECK_ARG(parts >= 1, "bfs-blocks: parts must be >= 1, got {}", parts);
  DSP_CHECK_ARG(opts.block_size >= 0, "--block-size must be >= 0, got {}", opts.block_size);
  DSP_CHECK_ARG(opts.hops >= 1, "bfs-blocks: --block-hops must be >= 1, got {}", opts.hops);
  DSP_CHECK_ARG(opts.slack >= 0, "bfs-blocks: slack must be >= 0, got {}", opts.slack);
  if (parts == 1) return std::vector<int32_t>(g.num_nodes, 0);
  return with_indices(g, [&](const auto* idx) {
    if (g.num_nodes < (int64_t{1} << 32)) {
      return bfs_blocks_impl<uint32_t>(g, idx, train_idx, parts, opts, seed, verbose, report);
    }
    return bfs_blocks_impl<int64_t>(g, idx, train_idx, parts, opts, seed, verbose, report);
  });
}

}  // namespace dsp
