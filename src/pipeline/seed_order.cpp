#include "pipeline/seed_order.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "core/rng.hpp"
#include "layout/partition/graph_scan.hpp"

namespace dsp {
namespace {

constexpr uint32_t kPurposeSequence = 0x6266'7371u;  // "bfsq"
constexpr uint32_t kPurposePass = 0x6266'7370u;      // "bfsp"

// One BFS sequence: positions of the seeds (in seeds) in the order a BFS from random roots (a
// ScanOrder of the rows) discovers their nodes; the BFS stops once every seed in range is out.
// `first[r]`: first position of row r's node in seeds, or -1.
std::vector<uint32_t> bfs_sequence(const Csr& rows, int64_t begin,
                                   const std::vector<int64_t>& seeds,
                                   const std::vector<int64_t>& first,
                                   const std::vector<uint32_t>& outside, uint64_t key) {
  const int64_t n = rows.num_nodes;
  const int64_t in_range = static_cast<int64_t>(seeds.size() - outside.size());
  std::vector<uint32_t> out;
  out.reserve(seeds.size());
  std::vector<uint8_t> visited(n, 0);
  std::vector<int64_t> queue(n);
  int64_t head = 0, tail = 0;
  auto visit = [&](int64_t r) {
    visited[r] = 1;
    queue[tail++] = r;
    for (int64_t pos = first[r];
         pos >= 0 && pos < static_cast<int64_t>(seeds.size()) && seeds[pos] == begin + r; ++pos) {
      out.push_back(static_cast<uint32_t>(pos));
    }
  };
  const int64_t* p = rows.rowptr();
  ScanOrder scan(n, key);
  with_indices(rows, [&](const auto* idx) {
    for (int64_t i = 0; i < n && static_cast<int64_t>(out.size()) < in_range; ++i) {
      if (visited[scan[i]]) continue;
      visit(scan[i]);
      while (head < tail && static_cast<int64_t>(out.size()) < in_range) {
        const int64_t x = queue[head++];
        for (int64_t e = p[x]; e < p[x + 1]; ++e) {
          const int64_t u = static_cast<int64_t>(idx[e]) - begin;
          if (u >= 0 && u < n && !visited[u]) visit(u);
        }
      }
    }
  });
  out.insert(out.end(), outside.begin(), outside.end());
  return out;
}

}  // namespace

BfsSeedOrder::BfsSeedOrder(const Csr& rows, int64_t begin, std::vector<int64_t> sorted_seeds,
                           uint64_t seed, const BfsOrderOptions& opts)
    : seeds_(std::move(sorted_seeds)), seed_(seed), s_(opts.sequences) {
  DSP_CHECK_ARG(opts.sequences >= 1, "--bfs-sequences must be >= 1, got {}", opts.sequences);
  DSP_CHECK_ARG(opts.pool >= 0, "bfs order: pool must be >= 0, got {}", opts.pool);
  DSP_CHECK_ARG(std::is_sorted(seeds_.begin(), seeds_.end()), "bfs order: seeds must be sorted");
  DSP_CHECK_ARG(seeds_.size() < (uint64_t{1} << 32), "bfs order: {} seeds exceed 2^32",
                seeds_.size());
  const int pool = std::max(opts.pool > 0 ? opts.pool : std::max(8, 2 * s_), s_);
  const int64_t n = rows.num_nodes;
  std::vector<int64_t> first(n, -1);
  std::vector<uint32_t> outside;
  for (size_t i = 0; i < seeds_.size(); ++i) {
    const int64_t r = seeds_[i] - begin;
    if (r < 0 || r >= n) {
      outside.push_back(static_cast<uint32_t>(i));
    } else if (first[r] < 0) {
      first[r] = static_cast<int64_t>(i);
    }
  }
  pool_.resize(pool);
  parallel_for(0, pool, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t k = lo; k < hi; ++k) {
      pool_[k] = bfs_sequence(rows, begin, seeds_, first, outside,
                              rng_key(seed, static_cast<uint64_t>(k), kPurposeSequence));
    }
  });
}

std::vector<int64_t> BfsSeedOrder::sequence(int i) const {
  DSP_CHECK_ARG(i >= 0 && i < pool_size(), "bfs order: no sequence {}", i);
  std::vector<int64_t> out;
  out.reserve(pool_[i].size());
  for (uint32_t pos : pool_[i]) out.push_back(seeds_[pos]);
  return out;
}

std::vector<int64_t> BfsSeedOrder::order(int64_t epoch, int64_t pass) const {
  const int64_t n = static_cast<int64_t>(seeds_.size());
  if (n == 0) return {};
  RngStream rng(rng_key(seed_, static_cast<uint64_t>(epoch), static_cast<uint64_t>(pass)), 0,
                kPurposePass);
  // s distinct sequences of the pool (a partial Fisher-Yates), each with a random rotation.
  std::vector<int> pick(pool_.size());
  for (size_t i = 0; i < pick.size(); ++i) pick[i] = static_cast<int>(i);
  std::vector<int64_t> rot(s_);
  for (int k = 0; k < s_; ++k) {
    std::swap(pick[k], pick[k + rng.uniform_int(pick.size() - k)]);
    rot[k] = static_cast<int64_t>(rng.uniform_int(static_cast<uint64_t>(n)));
  }
  std::vector<int64_t> out;
  out.reserve(n);
  std::vector<uint8_t> taken(n, 0);
  std::vector<int64_t> cursor(s_, 0);
  while (static_cast<int64_t>(out.size()) < n) {
    for (int k = 0; k < s_ && static_cast<int64_t>(out.size()) < n; ++k) {
      const std::vector<uint32_t>& seq = pool_[pick[k]];
      int64_t& c = cursor[k];
      while (c < n && taken[seq[(rot[k] + c) % n]]) ++c;
      if (c == n) continue;
      const uint32_t pos = seq[(rot[k] + c++) % n];
      taken[pos] = 1;
      out.push_back(seeds_[pos]);
    }
  }
  return out;
}

}  // namespace dsp
