// Heterogeneous sampling on one rank: the blocks equal the per-relation reference for every
// backend and fanout form; --fanouts' per-relation forms resolve as documented and bad ones are
// refused with one message each.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <tuple>

#include "backends.hpp"
#include "ccc/communicator.hpp"
#include "core/error.hpp"
#include "csp/hetero_reference.hpp"
#include "csp/sampler.hpp"
#include "error_of.hpp"
#include "layout/partition/partition.hpp"

namespace dsp {
namespace {

namespace fs = std::filesystem;
using test::error_of;

struct HeteroPart {
  std::string dir;
  PartitionData part;
  testref::HeteroWhole whole;
};

const HeteroPart& one_part() {
  static HeteroPart* w = [] {
    auto* w = new HeteroPart;
    w->dir = (fs::temp_directory_path() / fmt::format("dsp_hetero_csp_{}", ::getpid())).string();
    PartitionOptions o;
    o.verbose = false;
    o.overwrite = true;
    partition_dataset(hetero_union(testref::hetero_fixture()), o, w->dir);
    w->part = load_partition(w->dir, 0, 1);
    w->whole = testref::hetero_whole(w->dir, 1);
    return w;
  }();
  return *w;
}

void expect_blocks(const std::vector<Block>& got, const std::vector<Block>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t l = 0; l < got.size(); ++l) {
    SCOPED_TRACE(l);
    EXPECT_EQ(got[l].num_dst, want[l].num_dst);
    EXPECT_EQ(got[l].src_ids, want[l].src_ids);
    EXPECT_EQ(got[l].indptr, want[l].indptr);
    EXPECT_EQ(got[l].indices, want[l].indices);
    EXPECT_EQ(got[l].edge_types, want[l].edge_types);
    EXPECT_EQ(got[l].src_types, want[l].src_types);
  }
}

SamplerOptions with_fanouts(const std::string& text) {
  SamplerOptions o;
  parse_fanouts_option(text, o.fanouts, o.relation_fanouts);
  o.seed = 5;
  return o;
}

class HeteroBackends : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { DSP_SKIP_UNAVAILABLE_BACKEND(GetParam()); }
};

TEST_P(HeteroBackends, BlocksEqualThePerRelationReference) {
  const HeteroPart& w = one_part();
  const HeteroLayout& h = *w.part.meta.hetero;
  auto self = make_communicator("self");
  for (const std::string spec : {"4,3", "cites:3,writes:2,*:1;cites:2,rev_writes:4",
                                 "{\"cites\": [2, 2], \"paper___published_in___venue\": [0, 3], "
                                 "\"*\": [1, 1]}"}) {
    SCOPED_TRACE(spec);
    SamplerOptions o = with_fanouts(spec);
    CollectiveSampler s(w.part, *self, o, test::sampler_backend(GetParam()));
    const std::vector<std::vector<int>> fan = s.relation_fanouts();
    ASSERT_EQ(fan.size(), 2u);
    for (int64_t batch = 0; batch < 3; ++batch) {
      std::vector<int64_t> seeds;
      const int64_t* t = w.part.seeds.data<int64_t>();
      for (int64_t i = batch; i < w.part.seeds.dim(0); i += 4) seeds.push_back(t[i]);
      SampledBatch got = s.sample(seeds, 2, batch);
      // every layer has edges of several relations
      for (const Block& b : got.blocks) {
        ASSERT_GT(b.num_edges(), 0);
        EXPECT_NE(std::count(b.edge_types.begin(), b.edge_types.end(), b.edge_types[0]),
                  b.num_edges());
      }
      expect_blocks(got.blocks, testref::hetero_reference(w.whole, h, seeds, fan, 5, 2, batch));
      EXPECT_EQ(got.seeds, seeds);
    }
  }
}

// Link prediction on a relation: an excluded pair (v, u, r) leaves u out of relation r's segment of
// v's row only (u stays where v's other relations list it). With every neighbour drawn, each
// seed's block row is its segments without their excluded entries, relation by relation; with
// fanouts, no excluded edge is drawn and a seed without exclusions keeps its plain picks.
TEST_P(HeteroBackends, ExclusionsLeaveOutTheirRelationsEntriesOnly) {
  const HeteroPart& w = one_part();
  auto self = make_communicator("self");
  std::vector<int64_t> seeds;
  const int64_t* t = w.part.seeds.data<int64_t>();
  for (int64_t i = 0; i < w.part.seeds.dim(0); i += 3) seeds.push_back(t[i]);
  // Every other seed loses the first entry of each non-empty segment.
  CollectiveSampler::ExcludedEdges ex;
  std::set<std::tuple<int64_t, int64_t, int64_t>> gone;  // (v, u, r)
  for (size_t i = 0; i < seeds.size(); i += 2) {
    for (int64_t r = 0; r < w.whole.R; ++r) {
      const int64_t lo = w.whole.rel_ptr[seeds[i] * w.whole.R + r];
      if (lo == w.whole.rel_ptr[seeds[i] * w.whole.R + r + 1]) continue;
      ex.dst.push_back(seeds[i]);
      ex.src.push_back(w.whole.indices[lo]);
      ex.rel.push_back(static_cast<int32_t>(r));
      gone.emplace(seeds[i], w.whole.indices[lo], r);
    }
  }
  ASSERT_GT(gone.size(), 4u);
  {
    CollectiveSampler s(w.part, *self, with_fanouts("-1"), test::sampler_backend(GetParam()));
    const Block b = s.sample(seeds, 1, 0, &ex).blocks.back();
    for (size_t i = 0; i < seeds.size(); ++i) {
      std::multiset<std::pair<int64_t, int64_t>> got, want;  // (relation, source)
      for (int64_t e = b.indptr[i]; e < b.indptr[i + 1]; ++e) {
        got.emplace(b.edge_types[e], b.src_ids[b.indices[e]]);
      }
      for (int64_t r = 0; r < w.whole.R; ++r) {
        for (int64_t j = w.whole.rel_ptr[seeds[i] * w.whole.R + r];
             j < w.whole.rel_ptr[seeds[i] * w.whole.R + r + 1]; ++j) {
          if (!gone.count({seeds[i], w.whole.indices[j], r})) want.emplace(r, w.whole.indices[j]);
        }
      }
      EXPECT_EQ(got, want) << "seed " << seeds[i];
    }
  }
  CollectiveSampler s(w.part, *self, with_fanouts("2,2"), test::sampler_backend(GetParam()));
  const SampledBatch plain = s.sample(seeds, 1, 0);
  const SampledBatch cut = s.sample(seeds, 1, 0, &ex);
  const Block &p = plain.blocks.back(), &c = cut.blocks.back();
  for (size_t i = 0; i < seeds.size(); ++i) {
    std::vector<std::pair<int64_t, int64_t>> pe, ce;
    for (int64_t e = p.indptr[i]; e < p.indptr[i + 1]; ++e) {
      pe.emplace_back(p.edge_types[e], p.src_ids[p.indices[e]]);
    }
    for (int64_t e = c.indptr[i]; e < c.indptr[i + 1]; ++e) {
      ce.emplace_back(c.edge_types[e], c.src_ids[c.indices[e]]);
      EXPECT_FALSE(gone.count({seeds[i], ce.back().second, ce.back().first})) << seeds[i];
    }
    if (i % 2 == 1) EXPECT_EQ(ce, pe) << "seed " << seeds[i] << " has no exclusion";
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, HeteroBackends, ::testing::ValuesIn(test::backend_names()),
                         [](const auto& i) { return i.param; });

TEST(HeteroSampler, FanoutFormsResolveAgainstTheSchema) {
  const HeteroSchema& s = one_part().part.meta.hetero->schema;
  const int cites = s.relation_index("paper___cites___paper");
  const int writes = s.relation_index("author___writes___paper");
  const int rev = s.relation_index("paper___rev_writes___author");
  ASSERT_GE(cites, 0);
  ASSERT_GE(writes, 0);
  ASSERT_GE(rev, 0);
  // plain counts: every relation
  EXPECT_EQ(resolve_relation_fanouts(with_fanouts("4,3"), s),
            (std::vector<std::vector<int>>{std::vector<int>(s.num_relations(), 4),
                                           std::vector<int>(s.num_relations(), 3)}));
  // text: named ones, '*' the rest, unnamed none
  auto f = resolve_relation_fanouts(with_fanouts("cites:3,*:1;writes:2"), s);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0][cites], 3);
  EXPECT_EQ(f[0][writes], 1);
  EXPECT_EQ(f[1][writes], 2);
  EXPECT_EQ(f[1][cites], 0);
  EXPECT_EQ(with_fanouts("cites:3,*:1;writes:2").fanouts, (std::vector<int>{3, 2}));
  // JSON, by key
  f = resolve_relation_fanouts(with_fanouts("{\"author___writes___paper\": [7, 1]}"), s);
  EXPECT_EQ(f[0][writes], 7);
  EXPECT_EQ(f[0][rev], 0);
}

TEST(HeteroSampler, BadFanoutsGetOneMessageEach) {
  const HeteroSchema& s = one_part().part.meta.hetero->schema;
  EXPECT_EQ(
      error_of([&] { resolve_relation_fanouts(with_fanouts("citse:3"), s); }),
      "--fanouts: no relation 'citse' in the graph (relations: paper___cites___paper, "
      "author___writes___paper, paper___published_in___venue, "
      "paper___rev_cites___paper, paper___rev_writes___author, venue___rev_published_in___paper)");
  EXPECT_EQ(error_of([&] { with_fanouts("cites:x"); }),
            "--fanouts: 'cites:x' needs a count in [0, 4194304] or -1 (all) after its relation");
  EXPECT_EQ(error_of([&] { with_fanouts("cites:-2"); }),
            "--fanouts: 'cites:-2' needs a count in [0, 4194304] or -1 (all) after its relation");
  // -1, all neighbours, as the largest count (min(count, degree) picks), per relation or for all.
  EXPECT_EQ(resolve_relation_fanouts(with_fanouts("-1,2"), s)[0],
            std::vector<int>(static_cast<size_t>(s.num_relations()), kMaxFanout));
  const std::vector<int> l0 = resolve_relation_fanouts(with_fanouts("cites:-1,*:3;*:1"), s)[0];
  EXPECT_EQ(l0[0], kMaxFanout);  // paper___cites___paper
  EXPECT_EQ(l0[1], 3);
  EXPECT_EQ(error_of([&] { with_fanouts("cites:3;;writes:1"); }),
            "--fanouts: layer 2 of 'cites:3;;writes:1' names no relation");
  EXPECT_EQ(error_of([&] { with_fanouts("{\"cites\": [1, 2], \"writes\": [3]}"); }),
            "--fanouts: relation 'writes' has 1 layers, another relation 2");
  EXPECT_EQ(error_of([&] { resolve_relation_fanouts(with_fanouts("cites:1,cites:2"), s); }),
            "--fanouts: relation 'cites' is given twice in layer 1");
}

TEST(HeteroSampler, RefusesWhatItDoesNotSample) {
  const HeteroPart& w = one_part();
  auto self = make_communicator("self");
  SamplerOptions o = with_fanouts("2,2");
  o.scheme = LaborSampling{};
  EXPECT_EQ(error_of([&] { CollectiveSampler s(w.part, *self, o); }),
            "sampler: a heterogeneous graph is sampled node-wise and uniformly in CSP mode "
            "(--sampler labor|layer, biased, temporal and pull sampling are not supported on it)");
  CollectiveSampler s(w.part, *self, with_fanouts("2"));
  // sample() of a heterogeneous graph is typed: its blocks carry each source's type
  const Block typed = s.sample({w.part.seeds.data<int64_t>()[0]}, 0, 0).blocks.back();
  EXPECT_EQ(typed.src_types.size(), static_cast<size_t>(typed.num_src));
  EXPECT_EQ(error_of([&] { s.sample({w.part.meta.num_nodes}, 0, 0); }),
            fmt::format("sampler: seed {} is not a node id (graph has {} nodes)",
                        w.part.meta.num_nodes, w.part.meta.num_nodes));
  const int64_t v = w.part.seeds.data<int64_t>()[0];
  CollectiveSampler::ExcludedEdges ex{{v}, {v}, {}};
  EXPECT_EQ(error_of([&] { s.sample({v}, 0, 0, &ex); }),
            "sampler: excluded edges: 1 dst ids, 1 src ids and 0 relations (one of each per edge "
            "on a heterogeneous graph)");
  const int R = w.part.meta.hetero->num_relations();
  ex.rel = {R};
  EXPECT_EQ(error_of([&] { s.sample({v}, 0, 0, &ex); }),
            fmt::format("sampler: excluded edge {} -> {} of relation {} is not between node ids of "
                        "one of the {} relations (graph has {} nodes)",
                        v, v, R, R, w.part.meta.num_nodes));
}

TEST(HeteroSampler, PerRelationFanoutsNeedAHeterogeneousGraph) {
  Csr g;
  g.num_nodes = 2;
  g.indptr = Array::from_vector(std::vector<int64_t>{0, 1, 2});
  g.indices = Array::from_vector(std::vector<int32_t>{1, 0});
  PartitionData p = single_part(g);
  auto self = make_communicator("self");
  EXPECT_EQ(error_of([&] { CollectiveSampler s(p, *self, with_fanouts("cites:2")); }),
            "--fanouts: per-relation fanouts need a heterogeneous graph");
}

}  // namespace
}  // namespace dsp
