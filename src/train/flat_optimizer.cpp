#include "train/flat_optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <type_traits>
#include <utility>

#include "core/error.hpp"

namespace dsp {

namespace {

// torch::optim's key of a parameter's state: the address of its TensorImpl, as text in LibTorch
// 1.x, the pointer itself in 2.x.
using StateKey = std::decay_t<decltype(std::declval<torch::optim::Optimizer&>().state())>::key_type;

template <class K>
K key_of(void* impl) {
  if constexpr (std::is_same_v<K, std::string>) {
    std::ostringstream os;  // c10::guts::to_string's text
    os << impl;
    return os.str();
  } else {
    return impl;
  }
}

StateKey state_key(const torch::Tensor& p) { return key_of<StateKey>(p.unsafeGetTensorImpl()); }

// Adam's and AdamW's per-parameter state: the same fields in two types, S.
template <class S>
std::unique_ptr<S> moments_state(int64_t steps, torch::Tensor m, torch::Tensor v) {
  auto s = std::make_unique<S>();
  s->step(steps);
  s->exp_avg(std::move(m));
  s->exp_avg_sq(std::move(v));
  return s;
}

// An Adam or AdamW state of type S into this parameter's slices of the moments: its step count,
// or -1 when `st` is not an S.
template <class S>
int64_t read_moments(const torch::optim::OptimizerParamState* st, torch::Tensor m,
                     torch::Tensor v) {
  const auto* s = dynamic_cast<const S*>(st);
  if (s == nullptr) return -1;
  m.copy_(s->exp_avg().reshape(-1));
  v.copy_(s->exp_avg_sq().reshape(-1));
  return s->step();
}

}  // namespace

std::unique_ptr<torch::optim::Optimizer> checkpoint_optimizer(std::vector<torch::Tensor>& params,
                                                              const TrainConfig& c) {
  namespace o = torch::optim;
  switch (c.optimizer) {
    case OptimizerKind::kAdam:
      return std::make_unique<o::Adam>(params, o::AdamOptions(c.lr).weight_decay(c.weight_decay));
    case OptimizerKind::kAdamW:
      return std::make_unique<o::AdamW>(params, o::AdamWOptions(c.lr).weight_decay(c.weight_decay));
    case OptimizerKind::kAdagrad:
      return std::make_unique<o::Adagrad>(params,
                                          o::AdagradOptions(c.lr).weight_decay(c.weight_decay));
    case OptimizerKind::kSgd:
      break;
  }
  return std::make_unique<o::SGD>(
      params, o::SGDOptions(c.lr).momentum(c.momentum).weight_decay(c.weight_decay));
}

FlatOptimizer::FlatOptimizer(std::vector<torch::Tensor>& params, FlatOptimizerOptions o)
    : params_(params), o_(std::move(o)) {
  DSP_CHECK_ARG(!params_.empty(), "an optimizer needs parameters");
  int64_t numel = 0;
  for (const auto& p : params_) numel += p.numel();
  const auto opts = params_.front().options().requires_grad(false);
  flat_ = torch::empty({numel}, opts);
  torch::NoGradGuard ng;
  int64_t off = 0;
  for (auto& p : params_) {
    DSP_CHECK_ARG(p.device() == flat_.device() && p.scalar_type() == torch::kFloat32,
                  "the parameters must be float32 on one device");
    auto view = flat_.narrow(0, off, p.numel());
    view.copy_(p.detach().reshape(-1));
    p.set_data(view.view(p.sizes()));
    off += p.numel();
  }
  m_ = torch::zeros_like(flat_);  // Adagrad's initial_accumulator_value 0
  if (o_.kind == OptimizerKind::kAdam || o_.kind == OptimizerKind::kAdamW) {
    v_ = torch::zeros_like(flat_);
  }
}

void FlatOptimizer::step(const torch::Tensor& grad) {
  torch::NoGradGuard ng;
  DSP_CHECK_ARG(grad.numel() == flat_.numel(), "a gradient of {} values for {} parameters",
                grad.numel(), flat_.numel());
  switch (o_.kind) {
    case OptimizerKind::kSgd:
      return sgd_step(grad);
    case OptimizerKind::kAdagrad:
      return adagrad_step(grad);
    case OptimizerKind::kAdam:
    case OptimizerKind::kAdamW:
      return adam_step(grad);
  }
}

// torch::optim::SGD::step, dampening 0, not Nesterov.
void FlatOptimizer::sgd_step(const torch::Tensor& grad) {
  torch::Tensor d = o_.weight_decay != 0 ? grad.add(flat_, o_.weight_decay) : grad;
  if (o_.momentum != 0) {
    if (steps_ == 0) {
      m_.copy_(d);  // the buffer starts as the first step's gradient (SGD's clone)
    } else {
      m_.mul_(o_.momentum).add_(d, 1.0);  // dampening 0
    }
    d = m_;
  }
  flat_.add_(d, -1 * o_.lr);
  ++steps_;
}

// torch::optim::Adam::step and AdamW::step (not amsgrad), every parameter at once: the same ops
// in the same order on every element, with the step count all parameters share. Adam adds the
// decay to the gradient (L2), AdamW shrinks the parameters before the update (decoupled).
void FlatOptimizer::adam_step(const torch::Tensor& grad) {
  const bool decoupled = o_.kind == OptimizerKind::kAdamW;
  if (decoupled && o_.weight_decay != 0) flat_.mul_(1 - o_.lr * o_.weight_decay);
  ++steps_;
  const double bc1 = 1 - std::pow(o_.beta1, static_cast<double>(steps_));
  const double bc2 = 1 - std::pow(o_.beta2, static_cast<double>(steps_));
  const torch::Tensor g =
      !decoupled && o_.weight_decay != 0 ? grad.add(flat_, o_.weight_decay) : grad;
  m_.mul_(o_.beta1).add_(g, 1 - o_.beta1);
  v_.mul_(o_.beta2).addcmul_(g, g, 1 - o_.beta2);
  const torch::Tensor denom = (v_.sqrt() / std::sqrt(bc2)).add_(o_.eps);
  flat_.addcdiv_(m_, denom, -(o_.lr / bc1));
}

// torch::optim::Adagrad::step (lr_decay 0, initial accumulator 0), dense.
void FlatOptimizer::adagrad_step(const torch::Tensor& grad) {
  ++steps_;
  const torch::Tensor g = o_.weight_decay != 0 ? grad.add(flat_, o_.weight_decay) : grad;
  m_.addcmul_(g, g, 1.0);
  const torch::Tensor std = m_.sqrt().add_(o_.adagrad_eps);
  flat_.addcdiv_(g, std, -o_.lr);  // lr / (1 + (step - 1) lr_decay) with lr_decay 0
}

void FlatOptimizer::save_into(torch::optim::Optimizer& opt) const {
  auto& state = opt.state();
  state.clear();
  const bool stateless = o_.kind == OptimizerKind::kSgd && o_.momentum == 0;
  if (steps_ == 0 || stateless) return;  // torch keeps none then
  int64_t off = 0;
  for (const auto& p : params_) {
    auto part = [&](const torch::Tensor& t) {
      return t.narrow(0, off, p.numel()).view(p.sizes()).clone();
    };
    if (o_.kind == OptimizerKind::kAdam) {
      state[state_key(p)] = moments_state<torch::optim::AdamParamState>(steps_, part(m_), part(v_));
    } else if (o_.kind == OptimizerKind::kAdamW) {
      state[state_key(p)] =
          moments_state<torch::optim::AdamWParamState>(steps_, part(m_), part(v_));
    } else if (o_.kind == OptimizerKind::kAdagrad) {
      auto s = std::make_unique<torch::optim::AdagradParamState>();
      s->step(steps_);
      s->sum(part(m_));
      state[state_key(p)] = std::move(s);
    } else {
      auto s = std::make_unique<torch::optim::SGDParamState>();
      s->momentum_buffer(part(m_));
      state[state_key(p)] = std::move(s);
    }
    off += p.numel();
  }
}

void FlatOptimizer::load_from(torch::optim::Optimizer& opt) {
  torch::NoGradGuard ng;
  const auto& state = opt.state();
  m_.zero_();
  if (v_.defined()) v_.zero_();
  steps_ = 0;
  int64_t off = 0;
  bool first = true;
  for (const auto& p : params_) {
    const auto it = state.find(state_key(p));
    const int64_t n = p.numel();
    int64_t steps = 0;
    if (it != state.end() && v_.defined()) {  // Adam, AdamW
      const auto* st = it->second.get();
      const torch::Tensor m = m_.narrow(0, off, n), v = v_.narrow(0, off, n);
      steps = read_moments<torch::optim::AdamParamState>(st, m, v);
      if (steps < 0) steps = read_moments<torch::optim::AdamWParamState>(st, m, v);
      steps = std::max<int64_t>(steps, 0);
    } else if (it != state.end()) {
      if (const auto* g = dynamic_cast<const torch::optim::AdagradParamState*>(it->second.get())) {
        steps = g->step();
        m_.narrow(0, off, n).copy_(g->sum().reshape(-1));
      } else if (const auto* s =
                     dynamic_cast<const torch::optim::SGDParamState*>(it->second.get())) {
        steps = 1;
        m_.narrow(0, off, n).copy_(s->momentum_buffer().reshape(-1));
      }
    }
    DSP_CHECK_ARG(first || steps == steps_,
                  "the optimizer state has parameters at different step counts ({} and {})", steps_,
                  steps);
    steps_ = steps;
    first = false;
    off += n;
  }
}

}  // namespace dsp
