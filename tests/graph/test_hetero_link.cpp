// Link prediction on a relation of a heterogeneous dataset (split_hetero_links, `dsp generate
// hetero --link-split`): what the split keeps and drops in the relation and its reverse, the
// negatives' types, the files' round trip and checks, and the union ids the partitioner reads.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "error_of.hpp"
#include "graph/commands.hpp"
#include "graph/generate_hetero.hpp"
#include "graph/hetero.hpp"
#include "graph/io_test_util.hpp"
#include "graph/link.hpp"
#include "graph/npy.hpp"
#include "graph/validate.hpp"

namespace dsp {
namespace {
using iotest::TempDir;
using test::error_of;
using Pair = std::pair<int64_t, int64_t>;

HeteroGenOptions small() {
  HeteroGenOptions o;
  o.papers = 1500;
  o.authors = 900;
  o.institutions = 40;
  o.fields = 100;
  o.feature_dim = 8;
  o.seed = 5;
  return o;
}

// A relation's edges as (src, dst) pairs.
std::set<Pair> edges_of(const Csr& g) {
  std::set<Pair> out;
  const int64_t* p = g.rowptr();
  for (int64_t v = 0; v < g.num_nodes; ++v) {
    for (int64_t e = p[v]; e < p[v + 1]; ++e) out.emplace(g.indices.int_at(e), v);
  }
  return out;
}

std::vector<Pair> pairs_of(const Array& a) {
  std::vector<Pair> out;
  for (int64_t i = 0; a.defined() && i < a.dim(0); ++i) {
    out.emplace_back(a.int_at(2 * i), a.int_at(2 * i + 1));
  }
  return out;
}

TEST(HeteroLinks, SplitKeepsTrainingEdgesInTheRelationAndDropsHeldOutOnesFromItsReverse) {
  HeteroGenOptions o = small();
  const HeteroDataset full = generate_hetero(o);
  const int r = full.schema.relation_index("author___writes___paper");
  const int rev = full.schema.reverse_of(r);
  ASSERT_GE(rev, 0);
  EXPECT_EQ(full.schema.relations[rev].key(), "paper___rev_writes___author");
  const std::set<Pair> all = edges_of(full.relations[r]);
  o.link_split = LinkSplitOptions{};
  const HeteroDataset ds = generate_hetero(o);
  EXPECT_EQ(ds.schema.link_relation, "author___writes___paper");
  EXPECT_EQ(ds.schema.link, r);
  const std::vector<Pair> train = pairs_of(ds.link_train), valid = pairs_of(ds.link_valid),
                          test = pairs_of(ds.link_test);
  // The relation is exactly the training edges; held-out + training = every edge, once.
  EXPECT_EQ(edges_of(ds.relations[r]), std::set<Pair>(train.begin(), train.end()));
  std::vector<Pair> every = train;
  every.insert(every.end(), valid.begin(), valid.end());
  every.insert(every.end(), test.begin(), test.end());
  EXPECT_EQ(every.size(), all.size());
  EXPECT_EQ(std::set<Pair>(every.begin(), every.end()), all);
  EXPECT_EQ(static_cast<int64_t>(valid.size()), std::llround(0.05 * all.size()));
  EXPECT_EQ(static_cast<int64_t>(test.size()), std::llround(0.10 * all.size()));
  // The reverse relation is the training edges reversed; the other relations are untouched.
  std::set<Pair> reversed;
  for (const auto& [u, v] : train) reversed.emplace(v, u);
  EXPECT_EQ(edges_of(ds.relations[rev]), reversed);
  for (int q = 0; q < ds.schema.num_relations(); ++q) {
    if (q == r || q == rev) continue;
    EXPECT_EQ(edges_of(ds.relations[q]), edges_of(full.relations[q])) << q;
    EXPECT_EQ(ds.schema.relations[q].edges, full.schema.relations[q].edges) << q;
  }
  EXPECT_EQ(ds.schema.relations[r].edges, static_cast<int64_t>(train.size()));
  // Negatives: an author and a paper, no edge of the full relation, distinct, across communities
  // (so the share of held-out edges inside one is the best Hits@K).
  for (const Array* neg : {&ds.link_valid_neg, &ds.link_test_neg}) {
    const std::vector<Pair> n = pairs_of(*neg);
    EXPECT_EQ(n.size(), std::max(valid.size(), test.size()));
    EXPECT_EQ(std::set<Pair>(n.begin(), n.end()).size(), n.size());
    for (const auto& [u, w] : n) {
      ASSERT_TRUE(u >= 0 && u < o.authors && w >= 0 && w < o.papers) << u << " " << w;
      EXPECT_EQ(all.count({u, w}), 0u) << u << " " << w;
    }
  }
  const double bound = ds.extra.at("link_hits_bound").get<double>();
  EXPECT_GT(bound, 0.7);  // intra 0.8 + 0.2 / 8 inside, about
  EXPECT_LT(bound, 0.9);
  EXPECT_EQ(ds.extra.at("link_split").at("relation"), "author___writes___paper");
}

TEST(HeteroLinks, WriteLoadRoundTripAndUnionIds) {
  HeteroGenOptions o = small();
  o.link_split = LinkSplitOptions{};
  o.link_split->negatives_per_positive = 3;
  o.link_relation = "cites";  // a name only one relation has; within one type
  const HeteroDataset ds = generate_hetero(o);
  EXPECT_EQ(ds.schema.link_relation, "paper___cites___paper");
  EXPECT_EQ(ds.link_valid_neg.dim(0), 3 * ds.link_valid.dim(0));
  for (const auto& [u, w] : pairs_of(ds.link_test_neg)) EXPECT_NE(u, w);
  TempDir tmp("het_link_rt");
  write_hetero_dataset(ds, tmp / "d");
  const HeteroDataset back = load_hetero_dataset(tmp / "d");
  EXPECT_EQ(back.schema.to_json(), ds.schema.to_json());
  EXPECT_EQ(back.link_negatives_per_positive, 3);
  for (const auto& [a, b] :
       {std::pair{&back.link_train, &ds.link_train}, std::pair{&back.link_valid, &ds.link_valid},
        std::pair{&back.link_test, &ds.link_test},
        std::pair{&back.link_valid_neg, &ds.link_valid_neg},
        std::pair{&back.link_test_neg, &ds.link_test_neg}}) {
    EXPECT_EQ(pairs_of(*a), pairs_of(*b));
  }
  // The union graph: pairs in union ids, each training pair an entry of the union CSR.
  const Dataset u = hetero_union(back);
  const int64_t base = back.schema.type_offsets()[back.schema.type_index("paper")];
  EXPECT_EQ(u.meta.link_negatives_per_positive, 3);
  EXPECT_EQ(u.meta.num_link_valid_neg, ds.link_valid_neg.dim(0));
  const std::vector<Pair> tr = pairs_of(ds.link_train), utr = pairs_of(u.link_train);
  ASSERT_EQ(tr.size(), utr.size());
  for (size_t i = 0; i < tr.size(); ++i) {
    EXPECT_EQ(utr[i], Pair(tr[i].first + base, tr[i].second + base));
    // (a union row is its relations' segments one after another: not one sorted row)
    const int64_t* p = u.graph.rowptr();
    bool found = false;
    for (int64_t e = p[utr[i].second]; e < p[utr[i].second + 1]; ++e) {
      found = found || u.graph.indices.int_at(e) == utr[i].first;
    }
    EXPECT_TRUE(found) << i;
  }
}

TEST(HeteroLinks, RefusesBadInput) {
  HeteroGenOptions o = small();
  o.link_split = LinkSplitOptions{};
  o.link_relation = "reads";
  EXPECT_EQ(error_of<InvalidArgument>([&] { generate_hetero(o); }),
            "--link-relation: no relation 'reads' in hetero (a key, or a name only one relation "
            "has; relations: author___affiliated_with___institution, author___writes___paper, "
            "paper___cites___paper, paper___has_topic___field_of_study, "
            "institution___rev_affiliated_with___author, paper___rev_writes___author, "
            "paper___rev_cites___paper, field_of_study___rev_has_topic___paper)");
  HeteroCommand cmd;
  cmd.run.out = "unused";
  cmd.o.link_relation = "cites";
  EXPECT_EQ(error_of<InvalidArgument>([&] { cmd.validate(); }),
            "--link-relation, --link-negatives and --link-negatives-per-positive apply with "
            "--link-split only");
  // Files that do not fit the relation, named.
  o.link_relation = "writes";
  const HeteroDataset ds = generate_hetero(o);
  TempDir tmp("het_link_bad");
  {
    HeteroDataset bad = ds;
    std::vector<int64_t> v = {0, o.papers};  // a paper id past the papers
    bad.link_test = Array::from_vector(std::move(v), {1, 2});
    EXPECT_EQ(error_of<FormatError>([&] { write_hetero_dataset(bad, tmp / "a"); }),
              (tmp / "a") +
                  "/link_test.npy: pair 0 (0, 1500) is outside author's 900 ids "
                  "or paper's 1500 ids");
  }
  {
    HeteroDataset bad = ds;
    bad.link_valid = Array::from_vector(
        std::vector<int64_t>(ds.link_train.data<int64_t>(), ds.link_train.data<int64_t>() + 2),
        {1, 2});
    const Pair e = pairs_of(bad.link_valid)[0];
    EXPECT_EQ(error_of<FormatError>([&] { write_hetero_dataset(bad, tmp / "b"); }),
              fmt::format("{}/link_valid.npy: pair 0 ({}, {}) is an edge of "
                          "author___writes___paper: held-out edges must not be in the stored "
                          "relation",
                          (tmp / "b"), e.first, e.second));
  }
  {
    HeteroDataset bad = ds;
    bad.schema.link_relation.clear();
    bad.schema.resolve("x");
    EXPECT_EQ(error_of<FormatError>([&] { write_hetero_dataset(bad, tmp / "c"); }),
              (tmp / "c") +
                  "/link_train.npy: link pairs but dataset.json's \"hetero\" "
                  "names no link_relation");
  }
  {
    HeteroDataset bad = ds;
    bad.schema.link_relation = "author___reads___paper";
    EXPECT_EQ(error_of<FormatError>([&] { write_hetero_dataset(bad, tmp / "d"); }),
              (tmp / "d") +
                  "/dataset.json: link_relation 'author___reads___paper' is "
                  "not the key of one of its relations");
  }
}

}  // namespace
}  // namespace dsp
