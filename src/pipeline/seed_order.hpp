#pragma once
// BGL's proximity-aware ordering (NSDI'23 section 3.2.2): training seeds in the order a BFS over
// the graph visits them, so consecutive batches sample overlapping neighbourhoods (what a dynamic
// cache turns into hits). To stay close enough to i.i.d. for SGD, as the paper does:
//   - a pool of BFS sequences, each from its own random root (the BFS goes on from new random
//     roots when one runs dry, so every sequence is a permutation of the seeds);
//   - every pass draws `sequences` of them, rotates each by a random offset (components that the
//     BFS reaches last do not always come last), and takes seeds from them round-robin, skipping
//     seeds already taken, so a pass holds every seed once.
// Everything is drawn from counter-based streams keyed by (seed, sequence) and (seed, epoch,
// pass): the order is a pure function of those, the rows and the seed set.
#include <cstdint>
#include <vector>

#include "graph/csr.hpp"

namespace dsp {

struct BfsOrderOptions {
  int sequences = 4;  // s: sequences one pass interleaves (1: most locality, least randomness)
  int pool = 0;       // sequences generated once; 0: max(8, 2 s)
};

class BfsSeedOrder {
 public:
  // `rows`: in-neighbour rows of the global ids [begin, begin + rows.num_nodes) (a rank's patch,
  // or a whole graph with begin 0); the BFS does not follow entries outside that range.
  // `sorted_seeds` ascending (repeats allowed); seeds outside the range come last in every
  // sequence, ascending. InvalidArgument on bad options.
  BfsSeedOrder(const Csr& rows, int64_t begin, std::vector<int64_t> sorted_seeds, uint64_t seed,
               const BfsOrderOptions& opts = {});

  // A permutation of the seeds for pass `pass` of epoch `epoch`.
  std::vector<int64_t> order(int64_t epoch, int64_t pass) const;

  int pool_size() const { return static_cast<int>(pool_.size()); }
  int sequences() const { return s_; }
  // Sequence i of the pool, as seeds (for tests and the cache bench).
  std::vector<int64_t> sequence(int i) const;

 private:
  std::vector<int64_t> seeds_;               // ascending
  std::vector<std::vector<uint32_t>> pool_;  // per sequence: positions in seeds_, BFS order
  uint64_t seed_;
  int s_;
};

}  // namespace dsp
