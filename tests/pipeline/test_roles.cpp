// GNNLab's factored roles, the parts that need no peers: the allocation rule, the layout, the
// global queue's wire format. Whole-job equality with the symmetric run and failures of a
// sampler-only rank are checked under mpiexec (tests/train/probe/roles_equal.sh).
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "pipeline/roles.hpp"

namespace dsp {
namespace {

TEST(Roles, GnnlabAllocationRule) {
  // K = T_t / T_s; N_s = ceil(N / (K + 1)), rounded up (GNNLab section 5.2).
  EXPECT_EQ(gnnlab_samplers(8, 1.0, 3.0), 2);  // K = 3: 8 / 4
  EXPECT_EQ(gnnlab_samplers(8, 1.0, 2.0), 3);  // K = 2: ceil(2.67)
  EXPECT_EQ(gnnlab_samplers(4, 1.0, 1.0), 2);  // balanced: half
  EXPECT_EQ(gnnlab_samplers(4, 1.0, 9.0), 1);  // training dominates: at least one sampler
  EXPECT_EQ(gnnlab_samplers(4, 9.0, 1.0), 3);  // sampling dominates: at least one trainer
  EXPECT_EQ(gnnlab_samplers(2, 0.01, 0.04), 1);
  EXPECT_THROW(gnnlab_samplers(1, 1.0, 1.0), InvalidArgument);
  EXPECT_THROW(gnnlab_samplers(4, 0.0, 1.0), InvalidArgument);
}

TEST(Roles, AllocationReportsTimesFormulaAndChoice) {
  const RoleAllocation a = gnnlab_allocation(4, 0.25, 4.75);  // K = 19: ceil(0.2) = 1
  EXPECT_DOUBLE_EQ(a.k, 19.0);
  EXPECT_DOUBLE_EQ(a.formula, 0.2);
  EXPECT_EQ(a.samplers, 1);
  EXPECT_EQ(a.why,
            "GNNLab: sample+load 0.2500 s, train 4.7500 s per batch, K = 19.000, ceil(4 / (K + 1)) "
            "= ceil(0.200) = 1 -> 1 sampler(s), 3 trainer(s)");
  // Exactly on an integer: no rounding up past it.
  EXPECT_EQ(gnnlab_allocation(6, 1.0, 2.0).samplers, 2);  // 6 / 3 = 2
}

TEST(Roles, AllocationEdgeCases) {
  // Sampling far costlier than training: the formula asks for every rank; one must train.
  const RoleAllocation all = gnnlab_allocation(4, 9.0, 1.0);  // 4 / 1.11 = 3.6 -> 4
  EXPECT_EQ(all.samplers, 3);
  EXPECT_NE(all.why.find("the formula asks for all 4 ranks: one must train"), std::string::npos)
      << all.why;
  EXPECT_EQ(gnnlab_allocation(2, 100.0, 1.0).samplers, 1);
  // Training far costlier: still one sampler.
  EXPECT_EQ(gnnlab_allocation(16, 0.001, 10.0).samplers, 1);
  // One rank: no roles.
  const RoleAllocation one = gnnlab_allocation(1, 0.1, 1.0);
  EXPECT_EQ(one.samplers, 0);
  EXPECT_NE(one.why.find("one rank cannot split roles, symmetric"), std::string::npos) << one.why;
  EXPECT_THROW(gnnlab_allocation(0, 1.0, 1.0), InvalidArgument);
  EXPECT_THROW(gnnlab_allocation(4, 1.0, -1.0), InvalidArgument);
  EXPECT_EQ(gnnlab_allocation(4, 1.0, 3.0).to_json()["samplers"], 1);
}

TEST(Roles, SwitchingLayoutHasOneSlotPerRank) {
  RoleLayout l{4, 1};  // trainers 0..2, sampler 3
  l.switching = RoleSwitch::kQueueFull;
  EXPECT_EQ(l.slots(), 4);
  EXPECT_EQ(l.slots_of(3), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(l.owner(3), 0);  // without switching trainer 0 trains slots 0 and 3
  EXPECT_EQ(l.extra_slot(3), 3);
  EXPECT_EQ(l.extra_slot(0), -1);
  RoleLayout two{5, 2};  // trainers 0..2, samplers 3 and 4; slots 3 and 4 are the extra ones
  two.switching = RoleSwitch::kAlways;
  EXPECT_EQ(two.slots_of(3), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(two.slots_of(4), (std::vector<int>{1, 3}));
  EXPECT_EQ(two.extra_slot(3), 4);
  EXPECT_EQ(two.extra_slot(4), 3);
  EXPECT_EQ(two.to_json()["switching"], "always");
  EXPECT_EQ(parse_choice<RoleSwitch>("on"), RoleSwitch::kQueueFull);
  try {
    parse_choice<RoleSwitch>("sometimes");
    FAIL() << "accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "unknown role switch 'sometimes' (off, on, always, never)");
  }
}

TEST(Roles, LayoutSpreadsTrainersOverSamplers) {
  RoleLayout l{5, 2};  // trainers 0..2, samplers 3, 4
  EXPECT_EQ(l.trainers(), 3);
  EXPECT_FALSE(l.is_sampler(2));
  EXPECT_TRUE(l.is_sampler(3));
  EXPECT_EQ(l.sampler_for(0), 3);
  EXPECT_EQ(l.sampler_for(1), 4);
  EXPECT_EQ(l.sampler_for(2), 3);
  EXPECT_EQ(l.slots_of(3), (std::vector<int>{0, 2}));
  EXPECT_EQ(l.slots_of(4), (std::vector<int>{1}));
  EXPECT_TRUE(l.slots_of(1).empty());
  EXPECT_EQ(l.slots(), 3);
  EXPECT_EQ(l.extra_slot(3), -1);  // no switching: no slot of its own
  try {
    RoleLayout{3, 3}.validate();
    FAIL() << "no trainer left";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "roles: need 1 <= samplers < ranks, got 3 sampler(s) of 3 rank(s)");
  }
}

TEST(Roles, QueuedBatchRoundTripsAndRejectsTruncation) {
  LoadedBatch b;
  b.sample.epoch = 3;
  b.sample.batch = 17;
  b.sample.seeds = {5, 9};
  Block k;
  k.num_dst = 2;
  k.num_src = 3;
  k.indptr = {0, 1, 3};
  k.indices = {2, 0, 2};
  k.weights = {0.5f, 1.0f, 2.0f};
  k.src_ids = {5, 9, 11};
  b.sample.blocks = {k, k};
  b.features = {1, 2, 3, 4, 5, 6};
  b.feature_dim = 2;
  b.labels = {1, 0};
  const std::vector<uint8_t> bytes = pack_batch(b);
  LoadedBatch r = unpack_batch(bytes.data(), bytes.size());
  EXPECT_EQ(r.sample.epoch, 3);
  EXPECT_EQ(r.sample.batch, 17);
  EXPECT_EQ(r.sample.seeds, b.sample.seeds);
  ASSERT_EQ(r.sample.blocks.size(), 2u);
  EXPECT_EQ(r.sample.blocks[1].indptr, k.indptr);
  EXPECT_EQ(r.sample.blocks[1].indices, k.indices);
  EXPECT_EQ(r.sample.blocks[1].weights, k.weights);
  EXPECT_EQ(r.sample.blocks[1].src_ids, k.src_ids);
  EXPECT_EQ(r.sample.blocks[0].num_src, 3);
  EXPECT_EQ(r.features, b.features);
  EXPECT_EQ(r.feature_dim, 2);
  EXPECT_EQ(r.labels, b.labels);
  EXPECT_THROW(unpack_batch(bytes.data(), bytes.size() - 1), FormatError);
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  EXPECT_THROW(unpack_batch(longer.data(), longer.size()), FormatError);
}

}  // namespace
}  // namespace dsp
