// BGL's BFS-block partitioner (NSDI'23 section 3.3); see BfsBlockOptions in partition.hpp.
//
// Memory: per node a block id (int32), one queue slot (uint32 below 2^32 nodes, else int64) that
// is reused as the counting-sort order of the nodes by block, and the int32 result; per block a
// few counters; the block graph (at most min(entries, blocks^2) weighted pairs). The entries are
// only read, row by row, so a mapped CSR of any size (int32 or int64 indices, more than 2^31-1
// entries) stays on disk except for the pages being read.
#include <algorithm>
#include <numeric>

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "layout/graph_scan.hpp"
#include "layout/partition.hpp"
#include "layout/partition_detail.hpp"

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
// rows are scanned once into a dense per-thread accumulator. The result is symmetric.
template <class Q, class T>
BlockGraph block_graph(const Csr& g, const T* idx, const std::vector<int32_t>& grp, int64_t groups,
                       std::vector<Q>& order) {
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

// Phase 2, one level: every small block joins its large neighbour with the most joining entries
// (while that stays below 2t nodes); the small blocks left are grouped at random, t nodes a group.
// Large: the top 10% of blocks by size (BGL), and every block of at least t/4 nodes (on small
// graphs the top 10% alone would leave full-size blocks to be merged). Returns the new group of
// every block and the number of groups.
int64_t merge_level(const BlockGraph& bg, const std::vector<int64_t>& size, int64_t t,
                    uint64_t key, std::vector<int32_t>& into) {
  const int64_t nb = bg.blocks();
  std::vector<int32_t> by_size(nb);
  std::iota(by_size.begin(), by_size.end(), 0);
  std::sort(by_size.begin(), by_size.end(), [&](int32_t a, int32_t b) {
    return size[a] != size[b] ? size[a] > size[b] : a < b;
  });
  std::vector<uint8_t> large(nb, 0);
  const int64_t top = std::max<int64_t>(1, (nb + 9) / 10);
  for (int64_t i = 0; i < nb; ++i) {
    large[by_size[i]] = i < top || size[by_size[i]] >= std::max<int64_t>(1, t / 4);
  }
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

// Phase 3: greedy assignment of whole blocks, in BFS order over the block graph from the largest
// block (so blocks meet their assigned neighbours). Score of part i for block B:
//   (sum over h = 1..j of B's blocks within h hops that are in i) x (1 - seeds_i / seed cap)
//   x (1 - nodes_i / node cap),
// counted with B added; a part B would overfill is not eligible. With no neighbour assigned yet,
// the best balance product wins; if B fits nowhere, the part it overfills least.
std::vector<int32_t> assign_blocks(const BlockGraph& bg, const std::vector<int64_t>& size,
                                   const std::vector<int64_t>& seeds, int parts, int hops,
                                   double cap_nodes, double cap_seeds) {
  const int64_t nb = bg.blocks();
  std::vector<int32_t> part(nb, -1);
  std::vector<double> nodes(parts, 0), tseeds(parts, 0), loc(parts, 0);
  std::vector<int32_t> dist(nb, -1), frontier, next, touched;
  std::vector<int32_t> order;
  std::vector<uint8_t> queued(nb, 0);
  std::vector<int32_t> by_size(nb);
  std::iota(by_size.begin(), by_size.end(), 0);
  std::stable_sort(by_size.begin(), by_size.end(),
                   [&](int32_t a, int32_t b) { return size[a] > size[b]; });
  for (int32_t root : by_size) {  // BFS over the block graph, largest unvisited block first
    if (queued[root]) continue;
    queued[root] = 1;
    size_t h = order.size();
    order.push_back(root);
    for (; h < order.size(); ++h) {
      const int32_t x = order[h];
      for (int64_t e = bg.ptr[x]; e < bg.ptr[x + 1]; ++e) {
        if (!queued[bg.adj[e]]) {
          queued[bg.adj[e]] = 1;
          order.push_back(bg.adj[e]);
        }
      }
    }
  }
  for (int32_t b : order) {
    // Blocks within `hops` hops (distance-limited BFS), each weighing hops - d + 1.
    std::fill(loc.begin(), loc.end(), 0.0);
    frontier.assign(1, b);
    dist[b] = 0;
    touched.assign(1, b);
    for (int d = 1; d <= hops && !frontier.empty(); ++d) {
      next.clear();
      for (int32_t x : frontier) {
        for (int64_t e = bg.ptr[x]; e < bg.ptr[x + 1]; ++e) {
          const int32_t c = bg.adj[e];
          if (dist[c] >= 0) continue;
          dist[c] = d;
          touched.push_back(c);
          next.push_back(c);
          if (part[c] >= 0) loc[part[c]] += hops - d + 1;
        }
      }
      frontier.swap(next);
    }
    for (int32_t x : touched) dist[x] = -1;
    int best = -1;
    double best_score = -1, best_bal = -1;
    bool any_loc = false;
    for (int i = 0; i < parts; ++i) {
      const double fn = 1.0 - (nodes[i] + size[b]) / cap_nodes;
      const double fs = cap_seeds > 0 ? 1.0 - (tseeds[i] + seeds[b]) / cap_seeds : 1.0;
      if (fn < 0 || fs < 0) continue;
      const double bal = fn * fs, score = loc[i] * bal;
      any_loc = any_loc || loc[i] > 0;
      if (score > best_score || (score == best_score && bal > best_bal)) {
        best = i;
        best_score = score;
        best_bal = bal;
      }
    }
    if (best >= 0 && !any_loc) {  // no assigned neighbour: the best balance wins
      for (int i = 0; i < parts; ++i) {
        const double fn = 1.0 - (nodes[i] + size[b]) / cap_nodes;
        const double fs = cap_seeds > 0 ? 1.0 - (tseeds[i] + seeds[b]) / cap_seeds : 1.0;
        if (fn >= 0 && fs >= 0 && fn * fs > best_bal) {
          best = i;
          best_bal = fn * fs;
        }
      }
    }
    if (best < 0) {  // fits nowhere: overfill the part that is least full afterwards
      double least = 0;
      for (int i = 0; i < parts; ++i) {
        const double f = std::max((nodes[i] + size[b]) / cap_nodes,
                                  cap_seeds > 0 ? (tseeds[i] + seeds[b]) / cap_seeds : 0.0);
        if (best < 0 || f < least) {
          best = i;
          least = f;
        }
      }
    }
    part[b] = best;
    nodes[best] += size[b];
    tseeds[best] += seeds[b];
  }
  return part;
}

template <class Q, class T>
std::vector<int32_t> bfs_blocks_impl(const Csr& g, const T* idx, const Array& train_idx,
                                     int parts, const BfsBlockOptions& o, uint64_t seed,
                                     bool verbose, nlohmann::json* report) {
  const int64_t n = g.num_nodes;
  const int64_t t = o.block_size > 0 ? o.block_size
                                     : std::max<int64_t>(1, n / (64 * static_cast<int64_t>(parts)));
  detail::Progress progress(verbose);
  nlohmann::json rep = {{"block_size", t}, {"hops", o.hops}};
  std::vector<int32_t> block;
  std::vector<int64_t> size;
  std::vector<Q> queue;
  bfs_coarsen<Q>(g, idx, t, rng_key(seed, 0x6266'7362), block, size, queue);  // "bfsb"
  rep["blocks_bfs"] = size.size();
  rep["bfs_s"] = progress.phase(fmt::format("BFS blocks ({})", size.size()));

  // Multi-level merging until the block graph is small (at most 16 blocks per part of t nodes
  // each, roughly) or a level changes nothing.
  BlockGraph bg = block_graph<Q>(g, idx, block, static_cast<int64_t>(size.size()), queue);
  rep["block_graph_entries_bfs"] = bg.adj.size();
  const int64_t target = std::max<int64_t>(4 * parts, (n + t - 1) / t + parts);
  for (int level = 0; level < 4 && bg.blocks() > target; ++level) {
    std::vector<int32_t> into;
    const int64_t groups = merge_level(bg, size, t, rng_key(seed, 0x6d72'6765, level), into);
    if (groups == bg.blocks()) break;
    std::vector<int64_t> merged(groups, 0);
    for (int64_t b = 0; b < bg.blocks(); ++b) merged[into[b]] += size[b];
    size.swap(merged);
    for (int64_t v = 0; v < n; ++v) block[v] = into[block[v]];
    bg = block_graph<Q>(g, idx, block, groups, queue);
  }
  rep["blocks_merged"] = bg.blocks();
  rep["block_graph_entries"] = bg.adj.size();
  rep["merge_s"] = progress.phase(fmt::format("merge blocks ({})", bg.blocks()));

  std::vector<int64_t> bseeds(bg.blocks(), 0);
  const int64_t s = train_idx.defined() ? train_idx.dim(0) : 0;
  for (int64_t i = 0; i < s; ++i) ++bseeds[block[train_idx.int_at(i)]];
  const double cap_nodes = (1.0 + o.slack) * static_cast<double>(n) / parts;
  const double cap_seeds = (1.0 + o.slack) * static_cast<double>(s) / parts;
  std::vector<int32_t> part = assign_blocks(bg, size, bseeds, parts, o.hops, cap_nodes, cap_seeds);
  for (int64_t v = 0; v < n; ++v) block[v] = part[block[v]];  // uncoarsen in place
  rep["assign_s"] = progress.phase("assign blocks");
  // Working memory of the arrays above (the mapped entries excluded).
  rep["working_bytes"] = static_cast<int64_t>(n * (sizeof(int32_t) + sizeof(Q)) +
                                              bg.adj.size() * 12 + bg.ptr.size() * 8 +
                                              size.size() * 24);
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
