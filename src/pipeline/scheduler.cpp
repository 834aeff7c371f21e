#include "pipeline/scheduler.hpp"

#include <algorithm>
#include <unordered_set>

#include "core/error.hpp"
#include "core/rng.hpp"

namespace dsp {

const Names<SeedOrder>& names_of(SeedOrder) {
  static const Names<SeedOrder> n("seed order",
                                  {{SeedOrder::kRandom, "random"}, {SeedOrder::kBfs, "bfs"}});
  return n;
}

void SeedOrderOptions::validate() const {
  DSP_CHECK_ARG(bfs_sequences >= 1, "--bfs-sequences must be >= 1, got {}", bfs_sequences);
}

void SeedOrderOptions::apply(EpochScheduler& sched, const Csr& rows, int64_t begin) const {
  if (order == SeedOrder::kBfs) sched.use_bfs_order(rows, begin, {bfs_sequences, 0});
}

const OptionTable<SeedOrderOptions>& seed_order_options_table() {
  using S = SeedOrderOptions;
  static const OptionTable<S> table = {
      options::value<S>(
          "--order", "order",
          "seed order per epoch: random (default, a shuffle) or bfs (BGL's "
          "proximity-aware order: BFS sequences from random roots, interleaved)",
          [](S & o) -> auto& { return o.order; }),
      options::value<S>(
          "--bfs-sequences", "bfs_sequences",
          "order bfs: sequences interleaved per epoch (default 4; fewer: more "
          "locality)",
          [](S & o) -> auto& { return o.bfs_sequences; }),
  };
  return table;
}

namespace {
constexpr uint32_t kPurposeShuffle = 0x5eed5u;
}

EpochScheduler::EpochScheduler(std::vector<int64_t> local_seeds, int64_t batch_size, uint64_t seed)
    : seeds_(std::move(local_seeds)), batch_size_(batch_size), seed_(seed) {
  DSP_CHECK_ARG(batch_size >= 1, "batch size must be >= 1, got {}", batch_size);
  std::sort(seeds_.begin(), seeds_.end());
}

int64_t EpochScheduler::local_steps() const {
  return (num_local_seeds() + batch_size_ - 1) / batch_size_;
}

int64_t EpochScheduler::agree_steps(Communicator& comm) {
  int64_t s = local_steps();
  OpOptions o;
  o.label = "epoch steps";
  comm.all_reduce(&s, 1, DType::kInt64, ReduceOp::kMax, o);
  set_steps(s);
  return steps_;  // capped
}

void EpochScheduler::set_steps(int64_t steps) {
  DSP_CHECK_ARG(steps >= local_steps(), "{} steps per epoch cannot cover {} seeds in batches of {}",
                steps, num_local_seeds(), batch_size_);
  full_steps_ = steps;
  steps_ = max_steps_ > 0 ? std::min(steps, max_steps_) : steps;
}

int64_t EpochScheduler::steps() const {
  DSP_CHECK(steps_ >= 0, "epoch scheduler: steps not agreed yet (call agree_steps)");
  return steps_;
}

int64_t EpochScheduler::full_steps() const {
  DSP_CHECK(full_steps_ >= 0, "epoch scheduler: steps not agreed yet (call agree_steps)");
  return full_steps_;
}

void EpochScheduler::set_max_steps(int64_t max_steps) {
  DSP_CHECK_ARG(max_steps >= 0, "max steps per epoch must be >= 0 (0: no limit), got {}",
                max_steps);
  max_steps_ = max_steps;
  if (full_steps_ >= 0) set_steps(full_steps_);
}

std::vector<int64_t> EpochScheduler::shuffled(const std::vector<int64_t>& sorted, uint64_t seed,
                                              int64_t epoch, int64_t pass) {
  std::vector<int64_t> v = sorted;
  const uint64_t key = rng_key(seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(pass));
  // One stream per position (subject = i): no 2^32-draw limit, and any swap is computable alone.
  for (size_t i = v.size(); i > 1; --i) {
    RngStream rng(key, i - 1, kPurposeShuffle);
    size_t j = static_cast<size_t>(rng.uniform_int(i));
    std::swap(v[i - 1], v[j]);
  }
  return v;
}

void EpochScheduler::use_bfs_order(const Csr& rows, int64_t begin, const BfsOrderOptions& opts) {
  bfs_ = std::make_shared<const BfsSeedOrder>(rows, begin, seeds_, seed_, opts);
}

std::vector<int64_t> EpochScheduler::pass_order(int64_t epoch, int64_t pass) const {
  return bfs_ ? bfs_->order(epoch, pass) : shuffled(seeds_, seed_, epoch, pass);
}

std::vector<int64_t> EpochScheduler::epoch_order(int64_t epoch) const {
  const int64_t steps = this->steps();
  const int64_t n = num_local_seeds();
  if (n == 0) return {};
  // A capped epoch (steps < local_steps()) is a prefix of the uncapped one's order.
  const int64_t len = local_steps() == steps ? n : steps * batch_size_;
  std::vector<int64_t> order;
  order.reserve(static_cast<size_t>(len));
  for (int64_t pass = 0; static_cast<int64_t>(order.size()) < len; ++pass) {
    std::vector<int64_t> p = pass_order(epoch, pass);
    const int64_t take = std::min<int64_t>(n, len - static_cast<int64_t>(order.size()));
    order.insert(order.end(), p.begin(), p.begin() + take);
  }
  return order;
}

std::vector<int64_t> EpochScheduler::batch_seeds(const std::vector<int64_t>& order,
                                                 int64_t step) const {
  DSP_CHECK_ARG(step >= 0 && step < steps(), "step {} not in [0, {})", step, steps());
  const int64_t size = static_cast<int64_t>(order.size());
  const int64_t b = std::min(size, step * batch_size_);
  const int64_t e = std::min(size, b + batch_size_);
  // A batch that straddles two passes (or a rank with fewer seeds than a batch) can hold a seed
  // twice; the sampler wants distinct seeds, and a repeat adds nothing, so keep the first copy.
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(e - b));
  std::unordered_set<int64_t> seen;
  for (int64_t i = b; i < e; ++i) {
    if (seen.insert(order[i]).second) out.push_back(order[i]);
  }
  return out;
}

}  // namespace dsp
