// The flat optimizer (train/flat_optimizer.hpp) against LibTorch's own Adam, AdamW, Adagrad and
// SGD: the same
// parameters after every step, its state through a checkpoint and back.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "core/error.hpp"
#include "train/flat_optimizer.hpp"

namespace dsp {
namespace {

std::vector<torch::Tensor> make_params(uint64_t seed) {
  torch::manual_seed(seed);
  // Shapes as a small model's: a weight matrix, a bias, an odd-sized one (vector tails).
  return {torch::randn({7, 5}).requires_grad_(), torch::randn({5}).requires_grad_(),
          torch::randn({3, 11}).requires_grad_()};
}

std::vector<torch::Tensor> make_grads(int step) {
  torch::manual_seed(1000 + step);
  return {torch::randn({7, 5}), torch::randn({5}), torch::randn({3, 11})};
}

torch::Tensor flat_of(const std::vector<torch::Tensor>& ts) {
  std::vector<torch::Tensor> parts;
  for (const auto& t : ts) parts.push_back(t.detach().reshape(-1));
  return torch::cat(parts);
}

std::unique_ptr<torch::optim::Optimizer> torch_optimizer(std::vector<torch::Tensor>& p,
                                                         const FlatOptimizerOptions& o) {
  TrainConfig c;
  c.optimizer = o.kind;
  c.lr = o.lr;
  c.weight_decay = o.weight_decay;
  c.momentum = o.momentum;
  return checkpoint_optimizer(p, c);
}

struct Case {
  OptimizerKind kind;
  double weight_decay, momentum;
};

class FlatOptimizerSteps : public ::testing::TestWithParam<Case> {};

// Eight steps of both, the same gradients: bit-identical parameters after each.
TEST_P(FlatOptimizerSteps, EqualLibTorchsOptimizerBitForBit) {
  const Case c = GetParam();
  FlatOptimizerOptions o;
  o.kind = c.kind;
  o.lr = 0.01;
  o.weight_decay = c.weight_decay;
  o.momentum = c.momentum;
  auto ref = make_params(3), mine = make_params(3);
  auto opt = torch_optimizer(ref, o);
  FlatOptimizer flat(mine, o);
  for (int s = 0; s < 8; ++s) {
    auto g = make_grads(s);
    for (size_t i = 0; i < ref.size(); ++i) ref[i].mutable_grad() = g[i].clone();
    opt->step();
    flat.step(flat_of(g));
    ASSERT_TRUE(torch::equal(flat_of(ref), flat.flat())) << name_of(c.kind) << " step " << s;
    ASSERT_TRUE(torch::equal(flat_of(ref), flat_of(mine))) << "the parameters view the flat tensor";
  }
}

// Four steps, the state saved through LibTorch's optimizer, a fresh flat optimizer loaded from
// it, four more: the parameters of an uninterrupted run.
TEST_P(FlatOptimizerSteps, StateTravelsThroughLibTorchsOptimizer) {
  const Case c = GetParam();
  FlatOptimizerOptions o;
  o.kind = c.kind;
  o.weight_decay = c.weight_decay;
  o.momentum = c.momentum;
  auto a = make_params(5), b = make_params(5);
  FlatOptimizer straight(a, o), first(b, o);
  for (int s = 0; s < 4; ++s) {
    straight.step(flat_of(make_grads(s)));
    first.step(flat_of(make_grads(s)));
  }
  auto holder = torch_optimizer(b, o);
  first.save_into(*holder);
  torch::serialize::OutputArchive out;
  holder->save(out);
  std::string bytes;
  out.save_to([&bytes](const void* d, size_t n) {
    bytes.append(static_cast<const char*>(d), n);
    return n;
  });
  auto resumed = make_params(99);
  {
    torch::NoGradGuard ng;
    for (size_t i = 0; i < resumed.size(); ++i) resumed[i].copy_(b[i]);
  }
  auto holder2 = torch_optimizer(resumed, o);
  torch::serialize::InputArchive in;
  in.load_from(bytes.data(), bytes.size());
  holder2->load(in);
  FlatOptimizer second(resumed, o);
  second.load_from(*holder2);
  for (int s = 4; s < 8; ++s) {
    straight.step(flat_of(make_grads(s)));
    second.step(flat_of(make_grads(s)));
  }
  EXPECT_TRUE(torch::equal(straight.flat(), second.flat()));
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, FlatOptimizerSteps,
    ::testing::Values(Case{OptimizerKind::kAdam, 0, 0}, Case{OptimizerKind::kAdam, 5e-4, 0},
                      Case{OptimizerKind::kSgd, 0, 0}, Case{OptimizerKind::kSgd, 5e-4, 0.9},
                      Case{OptimizerKind::kAdamW, 0, 0}, Case{OptimizerKind::kAdamW, 5e-2, 0},
                      Case{OptimizerKind::kAdagrad, 0, 0}, Case{OptimizerKind::kAdagrad, 5e-4, 0}),
    [](const auto& info) {
      return name_of(info.param.kind) + std::string(info.param.weight_decay > 0 ? "_wd" : "") +
             (info.param.momentum > 0 ? "_momentum" : "");
    });

// The kind is typed: its one parser (the names table) refuses an unknown name.
TEST(FlatOptimizer, UnknownKindIsRefused) {
  try {
    parse_choice<OptimizerKind>("lamb");
    FAIL() << "accepted";
  } catch (const std::exception& e) {
    EXPECT_STREQ(e.what(), "unknown optimizer 'lamb' (adam, sgd, adamw, adagrad)");
  }
}

// Momentum is SGD's: given with another optimizer it is refused, not ignored.
TEST(FlatOptimizer, MomentumIsRefusedWhereItDoesNotApply) {
  TrainConfig c;
  c.model.in_dim = 8;
  c.model.out_dim = 3;
  c.momentum = 0.9;
  for (OptimizerKind k : {OptimizerKind::kAdam, OptimizerKind::kAdamW, OptimizerKind::kAdagrad}) {
    c.optimizer = k;
    try {
      c.validate();
      FAIL() << name_of(k) << " accepted momentum";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(std::string(e.what()),
                std::string("momentum is sgd's (--optimizer sgd); --optimizer ") + name_of(k) +
                    " takes none");
    }
  }
  c.optimizer = OptimizerKind::kSgd;
  EXPECT_NO_THROW(c.validate());
}

}  // namespace
}  // namespace dsp
