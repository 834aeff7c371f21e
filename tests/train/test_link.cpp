// Link prediction's pieces (train/link.hpp): the metrics against OGB's definitions, the batches
// (pairs, seeds, exclusions) and the negatives' distributions.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "ccc/communicator.hpp"
#include "core/error.hpp"
#include "error_of.hpp"
#include "pipeline/link_batch.hpp"
#include "train/link.hpp"

namespace dsp {
namespace {
using test::error_of;

TEST(LinkMetrics, HitsAndMrrFollowOgbsDefinitions) {
  auto comm = make_communicator("self");
  const std::vector<float> pos = {0.9f, 0.5f, 0.1f}, neg = {0.8f, 0.6f, 0.5f, 0.2f};
  const LinkMetrics m = link_metrics(*comm, pos, neg, {1, 2, 3, 4});
  // Hits@K: positives strictly above the K-th highest negative (0.8, 0.6, 0.5, 0.2).
  EXPECT_DOUBLE_EQ(m.hits[0], 1.0 / 3);
  EXPECT_DOUBLE_EQ(m.hits[1], 1.0 / 3);
  EXPECT_DOUBLE_EQ(m.hits[2], 1.0 / 3);  // 0.5 ties the third negative: not above it
  EXPECT_DOUBLE_EQ(m.hits[3], 2.0 / 3);
  // Ranks: 0.9 -> 1; 0.5 -> 1 + (2 above + 3 at least as high) / 2 = 3.5; 0.1 -> 5.
  EXPECT_DOUBLE_EQ(m.mrr, (1.0 + 1.0 / 3.5 + 1.0 / 5) / 3);
  // AUC: 0.9 beats all 4; 0.5 beats 0.2 and ties 0.5 (half); 0.1 beats none.
  EXPECT_DOUBLE_EQ(m.auc, (1.0 + 1.5 / 4 + 0) / 3);
  EXPECT_EQ(m.positives, 3);
  EXPECT_EQ(m.negatives, 4);
  EXPECT_DOUBLE_EQ(m.selected(false), m.hits[0]);
  EXPECT_DOUBLE_EQ(m.selected(true), m.auc);
  EXPECT_EQ(link_selection(false, 0, {1, 2, 3, 4}), "hits@1");
  EXPECT_EQ(link_selection(true, 0, {1, 2, 3, 4}), "rocauc");
}

// OGB's evaluator (ogb 1.3.6, ogb.linkproppred.Evaluator) on fixed scores with many ties, as
// scripts/peers/ogb_link_evaluator.py prints it: the same arrays, OGB's values pinned.
TEST(LinkMetrics, EqualOgbsEvaluatorOnFixedScores) {
  auto comm = make_communicator("self");
  std::vector<float> pos, neg;
  for (int i = 0; i < 12; ++i) pos.push_back(static_cast<float>((i * 7) % 11) / 4 - 1);
  for (int j = 0; j < 20; ++j) neg.push_back(static_cast<float>((j * 5) % 13) / 4 - 1.5f);
  const LinkMetrics shared = link_metrics(*comm, pos, neg, {1, 3, 10, 20});
  EXPECT_DOUBLE_EQ(shared.hits[0], 0);  // ogbl-collab's Hits@K with K = 1, 3, 10, 20
  EXPECT_DOUBLE_EQ(shared.hits[1], 0.083333333333333329);
  EXPECT_DOUBLE_EQ(shared.hits[2], 0.5);
  EXPECT_DOUBLE_EQ(shared.hits[3], 1);
  EXPECT_NEAR(shared.mrr, 0.15134734225769839, 1e-7);  // OGB sums float32 reciprocals
  // scikit-learn 1.x's roc_auc_score of the positives (label 1) and negatives (label 0), the AUC
  // PyG's and DGL's link examples report.
  EXPECT_NEAR(shared.auc, 0.5520833333333335, 1e-12);
  // ogbl-citation2's lists: 6 positives, 8 negatives each.
  pos.clear();
  neg.clear();
  for (int i = 0; i < 6; ++i) {
    pos.push_back(static_cast<float>((i * 3) % 7) / 4 - 0.5f);
    for (int j = 0; j < 8; ++j) neg.push_back(static_cast<float>((i * 5 + j * 3) % 9) / 4 - 0.75f);
  }
  const LinkMetrics own = link_metrics_per_positive(*comm, pos, neg, 8, {1, 3});
  EXPECT_DOUBLE_EQ(own.hits[0], 0);
  EXPECT_DOUBLE_EQ(own.hits[1], 0.33333333333333331);
  EXPECT_NEAR(own.mrr, 0.25158730645974475, 1e-7);
  // Per positive: the mean of roc_auc_score of each positive against its own 8 negatives.
  EXPECT_NEAR(own.auc, 0.5208333333333334, 1e-12);
  EXPECT_EQ(own.positives, 6);
  EXPECT_DOUBLE_EQ(own.selected(false), own.mrr);  // MRR picks the best epoch, as OGB's citation2
  EXPECT_EQ(link_selection(false, 8, {1, 3}), "mrr");
  try {
    link_metrics_per_positive(*comm, pos, neg, 8, {10});
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(),
                 "--hits-k 10 is larger than the 8 negatives of each held-out positive: Hits@K "
                 "ranks a positive among its own negatives");
  }
}

// Recall@K of one source: its held-out destinations' ranks among the candidates that are not its
// training destinations (strictly higher scores only), per K.
TEST(LinkMetrics, SourceRecallRanksTheHeldOutAmongTheKeptCandidates) {
  // candidate 0 is a training destination (left out); 2 and 4 are held out; 3 ties 2.
  const std::vector<float> scores = {0.9f, 0.8f, 0.7f, 0.7f, 0.5f};
  const std::vector<char> excluded = {1, 0, 0, 0, 0};
  const std::vector<double> r = source_recall(scores, excluded, {2, 4}, {1, 2, 4, 10});
  // 2: one kept candidate above (0.8): in the top 2; 4: three above: in the top 4.
  EXPECT_EQ(r, (std::vector<double>{0.0, 0.5, 1.0, 1.0}));
  // Without the exclusion 0.9 ranks above both.
  EXPECT_EQ(source_recall(scores, {0, 0, 0, 0, 0}, {2, 4}, {2, 4, 5}),
            (std::vector<double>{0.0, 0.5, 1.0}));
  EXPECT_EQ(source_recall(scores, excluded, {}, {1}), (std::vector<double>{0.0}));
}

TEST(LinkMetrics, KLargerThanTheNegativesIsRefused) {
  auto comm = make_communicator("self");
  try {
    link_metrics(*comm, {0.5f}, {0.1f, 0.2f}, {3});
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(),
                 "--hits-k 3 is larger than the split's 2 negative edges: Hits@K ranks a positive "
                 "among them");
  }
}

TEST(LinkOptions, BadValuesNameTheirFlag) {
  auto message = [](LinkOptions o) {
    try {
      o.validate();
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  LinkOptions o;
  o.neg_ratio = 0;
  EXPECT_EQ(message(o), "--neg-ratio must lie in [1, 4096] (negatives per positive edge), got 0");
  o = {};
  o.hits_k = {0};
  EXPECT_EQ(message(o), "--hits-k: every K must be >= 1, got 0");
  EXPECT_EQ(error_of<InvalidArgument>([] { parse_choice<TaskKind>("edge"); }),
            "unknown task 'edge' (node, link)");
}

// A part over N nodes holding `edges` as its training edges, in-degrees `deg`.
PartitionData link_part(int64_t n, const std::vector<int64_t>& edges, std::vector<int64_t> deg) {
  PartitionData p;
  p.meta.num_nodes = n;
  p.meta.parts = 1;
  p.meta.offsets = {0, n};
  p.link_train = Array::from_vector(edges, {static_cast<int64_t>(edges.size() / 2), 2});
  p.in_degree = Array::from_vector(std::move(deg), {n});
  return p;
}

TEST(LinkBatcher, PairsIndexDistinctSeedsAndExclusionsHideThePositives) {
  const PartitionData part = link_part(6, {0, 1, 1, 2, 3, 4, 0, 2}, {1, 1, 1, 1, 1, 1});
  LinkOptions o;
  o.neg_ratio = 3;
  o.exclude = ExcludeKind::kReverse;
  LinkBatcher lb(part, o, 7, /*undirected=*/true);
  EXPECT_EQ(lb.num_edges(), 4);
  EXPECT_EQ(lb.exclusion(), ExcludeKind::kReverse);
  const LinkBatch b = lb.make({2, 0, 3}, 1, 5);
  ASSERT_EQ(b.pairs.size(), 3 * (1 + 3));
  EXPECT_EQ(std::set<int64_t>(b.seeds.begin(), b.seeds.end()).size(), b.seeds.size());
  const int64_t* e = part.link_train.data<int64_t>();
  int k = 0;
  for (int64_t i : {2, 0, 3}) {
    EXPECT_EQ(b.seeds[b.pairs.src[k]], e[2 * i]);
    EXPECT_EQ(b.seeds[b.pairs.dst[k]], e[2 * i + 1]);
    EXPECT_EQ(b.pairs.label[k], 1.0f);
    for (int j = 1; j <= 3; ++j) {
      EXPECT_EQ(b.seeds[b.pairs.src[k + j]], e[2 * i]);
      EXPECT_EQ(b.pairs.label[k + j], 0.0f);
    }
    k += 4;
  }
  // reverse: (dst v, src u) and (dst u, src v) per positive.
  EXPECT_EQ(b.exclude.dst, (std::vector<int64_t>{4, 3, 1, 0, 2, 0}));
  EXPECT_EQ(b.exclude.src, (std::vector<int64_t>{3, 4, 0, 1, 0, 2}));
  // The same step draws the same negatives; another step others.
  auto negatives = [](const LinkBatch& x) {
    std::vector<int64_t> w;
    for (int64_t i = 0; i < x.pairs.size(); ++i) {
      if (x.pairs.label[i] == 0.0f) w.push_back(x.seeds[x.pairs.dst[i]]);
    }
    return w;
  };
  EXPECT_EQ(negatives(lb.make({2, 0, 3}, 1, 5)), negatives(b));
  EXPECT_NE(negatives(lb.make({2, 0, 3}, 1, 6)), negatives(b));
  o.exclude = ExcludeKind::kAuto;
  EXPECT_EQ(LinkBatcher(part, o, 7, false).exclusion(), ExcludeKind::kSelf);
  EXPECT_EQ(LinkBatcher(part, o, 7, false).make({1}, 0, 0).exclude.dst, (std::vector<int64_t>{2}));
  o.exclude = ExcludeKind::kNone;
  EXPECT_TRUE(LinkBatcher(part, o, 7, true).make({1}, 0, 0).exclude.dst.empty());
}

// Pearson's chi-square of `counts` against `expected` shares.
double chi_square(const std::vector<int64_t>& counts, const std::vector<double>& share) {
  double total = 0, chi = 0;
  for (int64_t c : counts) total += static_cast<double>(c);
  for (size_t i = 0; i < counts.size(); ++i) {
    const double want = total * share[i];
    chi += (static_cast<double>(counts[i]) - want) * (static_cast<double>(counts[i]) - want) / want;
  }
  return chi;
}

// The negatives of the 100 distinct pairs of 10 nodes x 200: their destinations' frequencies
// against the uniform and the in-degree^0.75 distribution (chi-square, 9 degrees of freedom: 27.9
// is p = 0.001).
TEST(LinkBatcher, NegativesFollowTheirDistribution) {
  const std::vector<int64_t> deg = {1, 2, 3, 5, 8, 13, 21, 34, 55, 89};
  std::vector<int64_t> edges, all;
  for (int64_t i = 0; i < 100; ++i) {
    edges.push_back(i / 10);
    edges.push_back(i % 10);
    all.push_back(i);
  }
  const PartitionData part = link_part(10, edges, deg);
  for (const std::string kind : {"uniform", "unigram"}) {
    LinkOptions o;
    o.neg_ratio = 200;
    o.negatives = parse_choice<NegativeKind>(kind);
    const LinkBatch b = LinkBatcher(part, o, 3, true).make(all, 0, 0);
    std::vector<int64_t> counts(10, 0);
    for (int64_t i = 0; i < b.pairs.size(); ++i) {
      if (b.pairs.label[i] == 0.0f) ++counts[b.seeds[b.pairs.dst[i]]];
    }
    std::vector<double> share(10);
    double sum = 0;
    for (int v = 0; v < 10; ++v) sum += share[v] = kind == "uniform" ? 1.0 : std::pow(deg[v], 0.75);
    for (double& s : share) s /= sum;
    EXPECT_LT(chi_square(counts, share), 27.9) << kind;
  }
}

// --negatives pairs: both ends of every negative uniform over the nodes (PyG's negative_sampling,
// DGL's GlobalUniform), independently of the positive and of each other: the sources', the
// destinations' and the (source, destination) cells' frequencies against uniform (chi-square,
// 9 and 99 degrees of freedom: 27.9 and 148.2 are p = 0.001).
TEST(LinkBatcher, PairNegativesAreUniformAtBothEnds) {
  std::vector<int64_t> edges, all;
  for (int64_t i = 0; i < 100; ++i) {
    edges.push_back(i / 10);
    edges.push_back(i % 10);
    all.push_back(i);
  }
  const PartitionData part = link_part(10, edges, std::vector<int64_t>(10, 10));
  LinkOptions o;
  o.neg_ratio = 200;
  o.negatives = NegativeKind::kPairs;
  const LinkBatch b = LinkBatcher(part, o, 3, true).make(all, 0, 0);
  std::vector<int64_t> src(10, 0), dst(10, 0), cell(100, 0);
  int64_t negatives = 0, source_kept = 0;
  for (int64_t i = 0; i < b.pairs.size(); ++i) {
    if (b.pairs.label[i] != 0.0f) continue;
    const int64_t u = b.seeds[b.pairs.src[i]], v = b.seeds[b.pairs.dst[i]];
    ++src[u];
    ++dst[v];
    ++cell[u * 10 + v];
    ++negatives;
    source_kept += u == b.seeds[b.pairs.src[i / (o.neg_ratio + 1) * (o.neg_ratio + 1)]];
  }
  EXPECT_EQ(negatives, 100 * 200);
  EXPECT_LT(chi_square(src, std::vector<double>(10, 0.1)), 27.9);
  EXPECT_LT(chi_square(dst, std::vector<double>(10, 0.1)), 27.9);
  EXPECT_LT(chi_square(cell, std::vector<double>(100, 0.01)), 148.2);
  // A source-kept scheme would keep every one; uniform sources keep about a tenth.
  EXPECT_LT(source_kept, negatives / 5);
  EXPECT_EQ(error_of<InvalidArgument>([] { parse_choice<NegativeKind>("global"); }),
            "unknown negative sampler 'global' (uniform, unigram, pairs)");
}

// A typed part: users 0-4 and items 0-8 over two parts (part 0: users [0, 3), items [3, 8);
// part 1: users [8, 10), items [10, 14)), user___rates___item and, when `reverse`, its reverse;
// the training edges (new ids) `edges`.
PartitionData typed_part(const std::vector<int64_t>& edges, bool reverse, bool link = true) {
  HeteroSchema s;
  s.node_types = {{"user", 5}, {"item", 9}};
  s.relations = {{"user", "rates", "item"}};
  if (reverse) s.relations.push_back({"item", "rev_rates", "user"});
  if (link) s.link_relation = "user___rates___item";
  s.resolve("test");
  PartitionData p;
  p.dir = "typed";
  p.meta.num_nodes = 14;
  p.meta.parts = 2;
  p.meta.offsets = {0, 8, 14};
  const nlohmann::json j = {{"schema", s.to_json()}, {"type_bounds", {0, 3, 8, 10, 14}}};
  p.meta.hetero = std::make_shared<HeteroLayout>(HeteroLayout::from_json(j, p.meta.offsets, "t"));
  p.link_train = Array::from_vector(edges, {static_cast<int64_t>(edges.size() / 2), 2});
  p.in_degree = Array::from_vector(std::vector<int64_t>(14, 1), {14});
  return p;
}

// On a typed graph the negatives come from the link relation's types (9 items: chi-square with
// 8 degrees of freedom, 26.1 is p = 0.001; pairs' sources over the 5 users, 4: 18.5), and the
// exclusions name the relation and, with reverse, the reverse relation.
TEST(LinkBatcher, TypedNegativesComeFromTheRelationsTypes) {
  const std::vector<int64_t> users = {0, 1, 2, 8, 9}, items = {3, 4, 5, 6, 7, 10, 11, 12, 13};
  std::vector<int64_t> edges, all;
  for (int64_t i = 0; i < 45; ++i) {
    edges.push_back(users[i % 5]);
    edges.push_back(items[i % 9]);
    all.push_back(i);
  }
  const PartitionData part = typed_part(edges, true);
  LinkOptions o;
  o.neg_ratio = 100;
  for (const std::string kind : {"uniform", "pairs"}) {
    o.negatives = parse_choice<NegativeKind>(kind);
    const LinkBatch b = LinkBatcher(part, o, 3, false).make(all, 0, 0);
    std::map<int64_t, int64_t> src, dst;
    for (int64_t i = 0; i < b.pairs.size(); ++i) {
      if (b.pairs.label[i] != 0.0f) continue;
      ++src[b.seeds[b.pairs.src[i]]];
      ++dst[b.seeds[b.pairs.dst[i]]];
    }
    std::vector<int64_t> dc, sc;
    for (int64_t v : items) dc.push_back(dst[v]);
    for (int64_t u : users) sc.push_back(src[u]);
    EXPECT_EQ(std::accumulate(dc.begin(), dc.end(), int64_t{0}), 45 * 100) << kind;  // items only
    EXPECT_LT(chi_square(dc, std::vector<double>(9, 1.0 / 9)), 26.1) << kind;
    EXPECT_EQ(std::accumulate(sc.begin(), sc.end(), int64_t{0}), 45 * 100) << kind;  // users only
    if (kind == "pairs") EXPECT_LT(chi_square(sc, std::vector<double>(5, 0.2)), 18.5);
  }
  // auto: reverse, the relations named (rates is 0, rev_rates 1).
  o.negatives = NegativeKind::kUniform;
  LinkBatcher lb(part, o, 3, false);
  EXPECT_EQ(lb.exclusion(), ExcludeKind::kReverse);
  const LinkBatch b = lb.make({1}, 0, 0);  // user 1 rates item 4
  EXPECT_EQ(b.exclude.dst, (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(b.exclude.src, (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(b.exclude.rel, (std::vector<int32_t>{0, 1}));
  const PartitionData one_way = typed_part(edges, false);
  EXPECT_EQ(LinkBatcher(one_way, o, 3, false).exclusion(), ExcludeKind::kSelf);
  EXPECT_EQ(LinkBatcher(one_way, o, 3, false).make({1}, 0, 0).exclude.rel,
            (std::vector<int32_t>{0}));
  o.exclude = ExcludeKind::kReverse;
  EXPECT_EQ(error_of<InvalidArgument>([&] { LinkBatcher(one_way, o, 3, false); }),
            "--exclude reverse: relation user___rates___item of typed has no reverse relation "
            "(item___rev_rates___user); use self or none, or add the reverses to the dataset");
  o.exclude = ExcludeKind::kAuto;
  // unigram counts the relation's training edges of every part from their files, which this
  // in-memory part lacks (HeteroLink.UnigramNegativesFollowTheRelationsInDegrees draws them).
  o.negatives = NegativeKind::kUnigram;
  EXPECT_EQ(error_of<IoError>([&] { LinkBatcher(part, o, 3, false); }),
            "typed/part0/link_train.npy: missing (link prediction's training edges of the part)");
  o.negatives = NegativeKind::kUniform;
  const PartitionData unsplit = typed_part(edges, true, /*link=*/false);
  EXPECT_EQ(error_of<FormatError>([&] { LinkBatcher(unsplit, o, 3, false); }),
            "typed: the heterogeneous partition names no link_relation: link prediction on a "
            "typed graph predicts one relation split for it (dsp generate hetero --link-split, "
            "--link-relation)");
}

}  // namespace
}  // namespace dsp
