#pragma once
// A small heterogeneous graph built in memory, for the tests of every layer (partitioning,
// sampling, loading, training).
#include <cstdint>
#include <utility>
#include <vector>

#include "core/rng.hpp"
#include "graph/hetero.hpp"
#include "graph/hetero_detail.hpp"

namespace dsp::testref {

// Types paper (target, 4 features, 4 classes), author (none), venue (2 features); relations
// paper___cites___paper, author___writes___paper, paper___published_in___venue, and the reverses
// of writes and published_in. Edges are hashes of (relation, index): some rows empty, some long.
inline HeteroDataset hetero_fixture(int64_t papers = 300, int64_t authors = 160,
                                    int64_t venues = 12) {
  HeteroDataset ds;
  ds.name = "hetero-fixture";
  ds.schema.node_types = {{"paper", papers, 4, DType::kFloat32},
                          {"author", authors, 0, DType::kFloat32},
                          {"venue", venues, 2, DType::kFloat32}};
  ds.schema.relations = {{"paper", "cites", "paper"},
                         {"author", "writes", "paper"},
                         {"paper", "published_in", "venue"}};
  ds.schema.target_type = "paper";
  ds.schema.num_classes = 4;
  ds.schema.resolve("fixture");
  const int64_t counts[] = {papers, authors, venues};
  const int64_t per_rel[] = {papers * 4, papers * 3, papers};
  for (int r = 0; r < 3; ++r) {
    const RelationInfo& ri = ds.schema.relations[r];
    std::vector<int64_t> src, dst;
    RngStream s(rng_key(77, r), 0);
    for (int64_t i = 0; i < per_rel[r]; ++i) {
      // skewed sources: low ids are hubs
      const uint32_t a = s.next_u32(), b = s.next_u32();
      src.push_back(static_cast<int64_t>((a % counts[ri.src_type]) * (b % 97) / 97));
      dst.push_back(r == 2 ? i % papers : static_cast<int64_t>(b % counts[ri.dst_type]));
    }
    if (r == 2) std::swap(src, dst);  // paper -> venue: src papers, dst venues
    for (auto& d : dst) d %= counts[ri.dst_type];
    for (auto& x : src) x %= counts[ri.src_type];
    ds.relations.push_back(detail::build_relation_csr(counts[ri.src_type], counts[ri.dst_type],
                                                      src.data(), dst.data(),
                                                      static_cast<int64_t>(src.size()), "fixture"));
  }
  for (int t : {0, 2}) {
    const int64_t f = ds.schema.node_types[t].feature_dim;
    std::vector<float> x(counts[t] * f);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7 + t) % 11) - 5.0f;
    ds.features.push_back(Array::from_vector(std::move(x), {counts[t], f}));
    if (t == 0) ds.features.push_back(Array());
  }
  std::vector<int64_t> y(papers), train, valid, test;
  for (int64_t i = 0; i < papers; ++i) {
    y[i] = i % 4;
    (i % 3 == 0 ? train : i % 3 == 1 ? valid : test).push_back(i);
  }
  ds.labels = Array::from_vector(std::move(y));
  ds.train_idx = Array::from_vector(std::move(train));
  ds.valid_idx = Array::from_vector(std::move(valid));
  ds.test_idx = Array::from_vector(std::move(test));
  add_reverse_relations(ds);
  ds.sync_schema();
  return ds;
}

}  // namespace dsp::testref
