#pragma once
// Which seeds each step of an epoch trains on, on this rank.
//
// Ranks own different numbers of training seeds (METIS balances them only roughly, and a user may
// partition as they like), but every step is a set of collectives all ranks must join. So the
// number of steps per epoch is agreed collectively: the largest ceil(local seeds / batch size) of
// any rank. A rank with fewer seeds keeps going past the end of its shuffled seeds into a freshly
// shuffled second pass (and a third, ...), so it runs the same steps with full batches and every
// seed is still used at least once per epoch. A rank with no seeds runs the steps with empty
// batches (it still serves its peers' sampling and feature requests).
//
// The order is a pure function of (seed, epoch, the set of seed ids): seeds are sorted first and
// each pass is a Fisher-Yates shuffle drawn from a counter-based stream keyed by (seed, epoch,
// pass), so it is the same whatever order the ids came in, on whatever rank or thread computes it.
//
// With set_max_steps(N), an epoch stops after N steps: the agreed count is capped (on every rank
// alike, so ranks with uneven seeds still stop together), and the epoch's batches are the first N
// of the uncapped epoch's, a prefix of the same per-epoch order, so each epoch sees other seeds.
//
// With use_bfs_order(), every pass is BGL's proximity-aware order (seed_order.hpp) instead of a
// shuffle: still a permutation of the seeds and a pure function of (seed, epoch, pass).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ccc/communicator.hpp"
#include "core/options.hpp"
#include "pipeline/seed_order.hpp"

namespace dsp {

class EpochScheduler;

// The seed order of every epoch (dsp train --order/--bfs-sequences, the Loader's order and
// bfs_sequences): a shuffle, or BGL's proximity-aware order (seed_order.hpp).
enum class SeedOrder { kRandom, kBfs };
const Names<SeedOrder>& names_of(SeedOrder);  // random, bfs

struct SeedOrderOptions {
  SeedOrder order = SeedOrder::kRandom;
  int bfs_sequences = 4;  // bfs: BFS sequences interleaved per pass

  void validate() const;  // at least one BFS sequence
  // Sets the order on `sched`, whose seeds are in `rows` from global id `begin` on (a rank's
  // patch); nothing for random.
  void apply(EpochScheduler& sched, const Csr& rows, int64_t begin) const;
};

// Its options as a user sets them (core/options.hpp): order, bfs_sequences.
const OptionTable<SeedOrderOptions>& seed_order_options_table();

class EpochScheduler {
 public:
  // batch_size >= 1; local_seeds may be empty and may come in any order (duplicates are kept).
  EpochScheduler(std::vector<int64_t> local_seeds, int64_t batch_size, uint64_t seed);

  int64_t num_local_seeds() const { return static_cast<int64_t>(seeds_.size()); }
  int64_t batch_size() const { return batch_size_; }
  uint64_t seed() const { return seed_; }
  // ceil(local seeds / batch size): the steps this rank alone would need.
  int64_t local_steps() const;
  // The steps of every epoch: max of local_steps() over the ranks of comm (an all_reduce, so
  // every rank must call it at the same point), capped by max_steps(). Remembered for steps().
  int64_t agree_steps(Communicator& comm);
  // Sets the steps of a whole epoch without communicating (single rank, tests); must be >=
  // local_steps(). steps() is then the smaller of them and max_steps().
  void set_steps(int64_t steps);
  int64_t steps() const;       // after agree_steps or set_steps
  int64_t full_steps() const;  // the same before the max_steps() cap
  // At most this many steps per epoch; 0 (the default): no limit. Call before agree_steps.
  void set_max_steps(int64_t max_steps);
  int64_t max_steps() const { return max_steps_; }

  // The seeds of every step of `epoch`, concatenated; step t is [t*B, min((t+1)*B, size())).
  // A rank whose local_steps() equals steps() has a partial last batch; the others wrap around.
  std::vector<int64_t> epoch_order(int64_t epoch) const;
  // Step t's slice of an epoch_order() result, without repeats (a slice that straddles two passes
  // of a wrapping rank could otherwise hold a seed twice).
  std::vector<int64_t> batch_seeds(const std::vector<int64_t>& order, int64_t step) const;

  // Pass `pass` of `epoch`: a permutation of `sorted` (pure function of its arguments).
  static std::vector<int64_t> shuffled(const std::vector<int64_t>& sorted, uint64_t seed,
                                       int64_t epoch, int64_t pass);

  // Passes in BFS order over `rows` (the in-neighbour rows of global ids [begin, begin +
  // rows.num_nodes), e.g. the rank's patch) instead of shuffled. Builds the sequence pool now.
  void use_bfs_order(const Csr& rows, int64_t begin, const BfsOrderOptions& opts);
  bool bfs_order() const { return bfs_ != nullptr; }
  // The seeds of pass `pass` of `epoch` in the scheduler's order (shuffled or BFS).
  std::vector<int64_t> pass_order(int64_t epoch, int64_t pass) const;

 private:
  std::vector<int64_t> seeds_;  // sorted
  int64_t batch_size_;
  uint64_t seed_;
  int64_t steps_ = -1, full_steps_ = -1;
  int64_t max_steps_ = 0;
  std::shared_ptr<const BfsSeedOrder> bfs_;
};

}  // namespace dsp
