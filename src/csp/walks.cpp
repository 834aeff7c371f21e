#include "csp/walks.hpp"
#include "csp/rank_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "core/rng.hpp"
#include "core/timer.hpp"
#include "csp/sample_kernels.hpp"
#include "csp/sampler_detail.hpp"

namespace dsp {

namespace {
using csp_detail::a2a;
// Random walks use their own key domain, so a walk step never reuses a sampling layer's draws.
constexpr uint64_t kWalkSalt = 0x77616c6b'73746570ULL;  // "walkstep"
}  // namespace

// Random walks: each step is a CSP layer of fanout 1. A walk's restart draw and its neighbour draw
// come from the same stream (draws 0-1 and 2-3), so the requester decides restarts and the owner
// the move, and the result does not depend on who computes what.

namespace {

// The stream of the j-th walk from `start` at the step with key `key`.
RngStream walk_stream(uint64_t key, int64_t start, uint32_t j) {
  return RngStream(key, static_cast<uint64_t>(start), csp::kPurposeWalk + 4 * j);
}

// What is wrong with random_walks' arguments on this rank (empty: nothing): the length, the
// restart probability, and each start (a node id; owned by the rank [begin, end) when
// require_owned).
std::string walk_argument_error(const std::vector<int64_t>& starts, int length, double restart_prob,
                                int64_t num_nodes, bool require_owned, int rank, int64_t begin,
                                int64_t end) {
  std::string err;
  if (length < 0) err = fmt::format("random_walks: length must be >= 0, got {}", length);
  if (!(restart_prob >= 0 && restart_prob <= 1)) {
    err = fmt::format("random_walks: restart probability must be in [0, 1], got {}", restart_prob);
  }
  for (size_t i = 0; i < starts.size() && err.empty(); ++i) {
    int64_t s = starts[i];
    if (s < 0 || s >= num_nodes) {
      err = fmt::format("random_walks: start {} is not a node id", s);
    } else if (require_owned && (s < begin || s >= end)) {
      err = fmt::format("random_walks: start {} is not owned by rank {} (owns [{}, {}))", s, rank,
                        begin, end);
    }
  }
  return err;
}

// Per walk, how many earlier walks have the same start (walks from one start use distinct
// streams).
std::vector<uint32_t> walk_occurrences(const std::vector<int64_t>& starts) {
  std::vector<uint32_t> occ(starts.size());
  std::unordered_map<int64_t, uint32_t> seen;
  for (size_t i = 0; i < starts.size(); ++i) occ[i] = seen[starts[i]]++;
  return occ;
}

// The walks that move along an edge in one step, per owner of their current node: records
// (node, start, occurrence) and the walk of each record.
struct WalkMoves {
  std::vector<std::vector<int64_t>> by_owner;
  std::vector<std::vector<int64_t>> which;
};

// One step's requester side: each live walk (cur[i] >= 0) restarts (cur[i] = its start) with
// probability restart_prob, or else is routed to the owner of its node under offsets.
WalkMoves route_walks(const std::vector<int64_t>& starts, const std::vector<uint32_t>& occ,
                      double restart_prob, uint64_t key, const std::vector<int64_t>& offsets, int P,
                      std::vector<int64_t>& cur) {
  WalkMoves mv{std::vector<std::vector<int64_t>>(P), std::vector<std::vector<int64_t>>(P)};
  for (size_t i = 0; i < cur.size(); ++i) {
    if (cur[i] < 0) continue;
    RngStream s = walk_stream(key, starts[i], occ[i]);
    if (s.uniform01() < restart_prob) {
      cur[i] = starts[i];
      continue;
    }
    int o = P == 1 ? 0
                   : static_cast<int>(std::upper_bound(offsets.begin() + 1, offsets.end(), cur[i]) -
                                      (offsets.begin() + 1));
    mv.by_owner[o].insert(mv.by_owner[o].end(), {cur[i], starts[i], static_cast<int64_t>(occ[i])});
    mv.which[o].push_back(static_cast<int64_t>(i));
  }
  return mv;
}

// The owner's side of a move: the node of record rec (node, start, occurrence) steps to a
// uniform in-neighbour in the patch (rows from global id begin), or ends (-1) if it has none.
int64_t walk_move(const Csr& patch, int64_t begin, uint64_t key, const int64_t* rec) {
  const int64_t* ip = patch.rowptr();
  int64_t lv = rec[0] - begin;
  int64_t deg = ip[lv + 1] - ip[lv];
  if (deg == 0) return int64_t{-1};
  RngStream s = walk_stream(key, rec[1], static_cast<uint32_t>(rec[2]));
  (void)s.uniform01();  // draws 0-1: the restart decision
  return patch.indices.int_at(ip[lv] + csp::draw_index(s, deg));
}

// One step's moves: records owned elsewhere go to their owners ("walk.shuffle"), which answer
// them ("walk.reshuffle"); this rank's own are answered in place. Sets cur of every moved walk.
void move_walks(Communicator& comm, int rank, const Csr& patch, int64_t begin, uint64_t key,
                const WalkMoves& mv, std::vector<int64_t>& cur) {
  const int P = comm.size();
  std::vector<int64_t> sc(P), send;
  for (int p = 0; p < P; ++p) {
    sc[p] = p == rank ? 0 : static_cast<int64_t>(mv.by_owner[p].size());
    if (p != rank) send.insert(send.end(), mv.by_owner[p].begin(), mv.by_owner[p].end());
  }
  std::vector<int64_t> rc(P, 0);
  std::vector<int64_t> recv;
  if (P > 1) {
    rc = comm.exchange_counts(sc);
    recv = a2a(comm, send, sc, rc, "walk.shuffle");
  }
  std::vector<int64_t> ans(recv.size() / 3);
  for (size_t i = 0; i < ans.size(); ++i)
    ans[i] = walk_move(patch, begin, key, recv.data() + 3 * i);
  for (size_t i = 0; i < mv.which[rank].size(); ++i) {
    cur[mv.which[rank][i]] = walk_move(patch, begin, key, mv.by_owner[rank].data() + 3 * i);
  }
  if (P > 1) {
    std::vector<int64_t> sc2(P), rc2(P);
    for (int p = 0; p < P; ++p) {
      sc2[p] = rc[p] / 3;
      rc2[p] = sc[p] / 3;
    }
    std::vector<int64_t> back = a2a(comm, ans, sc2, rc2, "walk.reshuffle");
    int64_t k = 0;
    for (int p = 0; p < P; ++p) {
      if (p == rank) continue;
      for (int64_t i : mv.which[p]) cur[i] = back[k++];
    }
  }
}

}  // namespace

WalkSampler::WalkSampler(const PartitionData& part, Communicator& comm, uint64_t seed,
                         bool require_owned_starts)
    : part_(part),
      comm_(comm),
      seed_(seed),
      require_owned_(require_owned_starts),
      rank_(comm.rank()),
      size_(comm.size()),
      begin_(part.meta.offsets[comm.rank()]),
      end_(part.meta.offsets[comm.rank() + 1]) {}

// One all_reduce (max) of the error flag: bad anywhere makes every rank throw.
WalkResult WalkSampler::random_walks(const std::vector<int64_t>& starts, int length,
                                     double restart_prob, int64_t epoch, int64_t batch) {
  const std::string err =
      part_.meta.hetero ? "sampler: random walks over a heterogeneous graph are not supported"
                        : walk_argument_error(starts, length, restart_prob, part_.meta.num_nodes,
                                              require_owned_, rank_, begin_, end_);
  check_on_every_rank(comm_, err);

  const int64_t W = static_cast<int64_t>(starts.size());
  const int64_t stride = length + 1;
  WalkResult r;
  r.num_walks = W;
  r.length = length;
  r.paths.assign(W * stride, -1);
  const std::vector<uint32_t> occ = walk_occurrences(starts);
  std::vector<int64_t> cur(starts);
  for (int64_t i = 0; i < W; ++i) r.paths[i * stride] = starts[i];
  for (int t = 0; t < length; ++t) {
    const uint64_t key = rng_key(seed_ ^ kWalkSalt, epoch, batch, t);
    const WalkMoves mv =
        route_walks(starts, occ, restart_prob, key, part_.meta.offsets, size_, cur);
    move_walks(comm_, rank_, part_.patch, begin_, key, mv, cur);
    for (int64_t i = 0; i < W; ++i) r.paths[i * stride + t + 1] = cur[i];
  }
  return r;
}

PinSageResult WalkSampler::pinsage_neighbors(const std::vector<int64_t>& seeds, int num_walks,
                                             int walk_length, double restart_prob, int top_k,
                                             int64_t epoch, int64_t batch) {
  check_on_every_rank(
      comm_, num_walks > 0 && walk_length > 0 && top_k > 0
                 ? ""
                 : fmt::format("pinsage_neighbors: num_walks, walk_length and top_k must be "
                               "positive (got {}, {}, {})",
                               num_walks, walk_length, top_k));
  std::vector<int64_t> starts;
  starts.reserve(seeds.size() * num_walks);
  for (int64_t s : seeds) starts.insert(starts.end(), num_walks, s);
  WalkResult w = random_walks(starts, walk_length, restart_prob, epoch, batch);
  PinSageResult r;
  r.indptr.push_back(0);
  const int64_t stride = walk_length + 1;
  std::unordered_map<int64_t, int64_t> visits;
  std::vector<std::pair<int64_t, int64_t>> items;
  for (size_t i = 0; i < seeds.size(); ++i) {
    visits.clear();
    for (int j = 0; j < num_walks; ++j) {
      const int64_t* p = w.paths.data() + (i * num_walks + j) * stride;
      for (int64_t t = 1; t < stride; ++t) {
        if (p[t] >= 0 && p[t] != seeds[i]) ++visits[p[t]];
      }
    }
    items.assign(visits.begin(), visits.end());
    auto better = [](const std::pair<int64_t, int64_t>& a, const std::pair<int64_t, int64_t>& b) {
      return a.second != b.second ? a.second > b.second : a.first < b.first;
    };
    size_t k = std::min<size_t>(top_k, items.size());
    std::partial_sort(items.begin(), items.begin() + k, items.end(), better);
    for (size_t j = 0; j < k; ++j) {
      r.ids.push_back(items[j].first);
      r.counts.push_back(static_cast<float>(items[j].second));
    }
    r.indptr.push_back(static_cast<int64_t>(r.ids.size()));
  }
  return r;
}

}  // namespace dsp
