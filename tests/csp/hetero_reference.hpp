#pragma once
// Heterogeneous sampling tests' shared parts: a small typed graph built in memory, and the blocks
// of a batch computed directly from the whole renumbered graph (every node's relation rows), one
// task at a time on the stream CSP keys by (seed, epoch, batch, layer, v R + r).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/rng.hpp"
#include "csp/block.hpp"
#include "csp/floyd_reference.hpp"
#include "csp/sample_kernels.hpp"
#include "graph/hetero.hpp"
#include "graph/hetero_fixture.hpp"
#include "layout/partition/partition.hpp"

namespace dsp::testref {

// The whole renumbered graph of a heterogeneous partition: every part's rows and relation
// segments concatenated (entries are new ids).
struct HeteroWhole {
  std::vector<int64_t> indptr, indices, rel_ptr;
  int64_t R = 0;
};
inline HeteroWhole hetero_whole(const std::string& dir, int parts) {
  HeteroWhole w;
  w.indptr = {0};
  for (int p = 0; p < parts; ++p) {
    PartitionData d = load_partition(dir, p, parts);
    w.R = d.meta.hetero->num_relations();
    const int64_t base = static_cast<int64_t>(w.indices.size());
    const int64_t* rp = d.relation_indptr.data<int64_t>();
    for (int64_t i = 0; i < d.patch.num_nodes * w.R; ++i) w.rel_ptr.push_back(base + rp[i]);
    for (int64_t e = 0; e < d.patch.num_edges(); ++e)
      w.indices.push_back(d.patch.indices.int_at(e));
    for (int64_t v = 0; v < d.patch.num_nodes; ++v)
      w.indptr.push_back(base + d.patch.rowptr()[v + 1]);
  }
  w.rel_ptr.push_back(static_cast<int64_t>(w.indices.size()));
  return w;
}

// The blocks of `seeds` (input layer first), fanouts [layer][relation] from the seeds out.
inline std::vector<Block> hetero_reference(const HeteroWhole& w, const HeteroLayout& h,
                                           const std::vector<int64_t>& seeds,
                                           const std::vector<std::vector<int>>& fanouts,
                                           uint64_t seed, int64_t epoch, int64_t batch) {
  std::vector<Block> blocks;
  std::vector<int64_t> frontier = seeds;
  for (size_t l = 0; l < fanouts.size(); ++l) {
    const uint64_t key = rng_key(seed, epoch, batch, static_cast<int64_t>(l));
    Block b;
    b.num_dst = static_cast<int64_t>(frontier.size());
    b.src_ids = frontier;
    std::map<int64_t, int64_t> local;
    for (size_t i = 0; i < frontier.size(); ++i) local[frontier[i]] = static_cast<int64_t>(i);
    b.indptr = {0};
    for (int64_t v : frontier) {
      b.src_types.push_back(h.type_of(v));
      for (int64_t r = 0; r < w.R; ++r) {
        const int k = fanouts[l][r];
        if (k == 0 || h.schema.relations[r].dst_type != h.type_of(v)) continue;
        const int64_t lo = w.rel_ptr[v * w.R + r], deg = w.rel_ptr[v * w.R + r + 1] - lo;
        RngStream s(key, static_cast<uint64_t>(v * w.R + r), csp::kPurposeNodeWise);
        for (int64_t p : floyd_reference(deg, k, s)) {
          const int64_t u = w.indices[lo + p];
          auto it = local.emplace(u, static_cast<int64_t>(b.src_ids.size())).first;
          if (it->second == static_cast<int64_t>(b.src_ids.size())) b.src_ids.push_back(u);
          b.indices.push_back(it->second);
          b.edge_types.push_back(static_cast<int32_t>(r));
        }
      }
      b.indptr.push_back(static_cast<int64_t>(b.indices.size()));
    }
    b.num_src = static_cast<int64_t>(b.src_ids.size());
    for (int64_t i = b.num_dst; i < b.num_src; ++i) b.src_types.push_back(h.type_of(b.src_ids[i]));
    frontier = b.src_ids;
    blocks.push_back(std::move(b));
  }
  std::reverse(blocks.begin(), blocks.end());
  return blocks;
}

}  // namespace dsp::testref
