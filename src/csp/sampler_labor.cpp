// LABOR (LaborSampling) as a LayerScheme (layer_scheme.hpp): the variates of a layer,
// and LABOR-i's importance sampling at the requester over the rows it fetches.
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
#include "csp/layer_scheme.hpp"
#include "csp/sample_kernels.hpp"
#include "csp/sampler.hpp"

namespace dsp {

// LABOR. LABOR-0 is CSP's layer with the backend's per-task labor_positions; with importance
// sampling the requester fetches its frontier's rows and computes DGL's probabilities and the
// picks itself (labor_importance_picks), since they depend on the whole frontier.

namespace {
constexpr uint64_t kLaborSalt = 0x6c61626f'72766172ULL;  // "laborvar"
constexpr double kLaborEps = 1e-4;                       // DGL's convergence tolerance
constexpr int kLaborMaxRounds = 1000;                    // LABOR-*'s and each c_s solve's cap

// The c_s of row [b, e) (unique-neighbour index u[j], their q) that makes the variance of its
// Horvitz-Thompson estimate d^2 / min(k, d) (DGL's fixed point, Eq. 22 of arXiv:2210.13339),
// from the guess c.
double solve_row_c(const int64_t* u, int64_t b, int64_t e, int k, const std::vector<double>& q,
                   double c) {
  const double d = static_cast<double>(e - b);
  const double target = d * d / std::min(static_cast<double>(k), d);
  for (int it = 0; it < kLaborMaxRounds; ++it) {
    double v = 0;
    for (int64_t j = b; j < e; ++j) v += 1.0 / std::min(1.0, c * q[u[j]]);
    c *= v / target;
    if (std::min(v, target) / std::max(v, target) >= 1 - kLaborEps) break;
  }
  return c;
}

// The per-row c and per-neighbour q of LABOR-i (DGL's compute_importance_sampling_probabilities,
// unweighted): each round q_t *= max over the rows holding t of c_s, then every c_s solved.
void labor_probabilities(int64_t n, const int64_t* off, const int64_t* u, int64_t U, int k,
                         int rounds, std::vector<double>& c, std::vector<double>& q) {
  c.assign(n, 0.0);
  int64_t max_deg = 1;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t d = off[i + 1] - off[i];
    max_deg = std::max(max_deg, d);
    if (d > 0) c[i] = static_cast<double>(k) / static_cast<double>(d);
  }
  q.assign(U, 0.0);
  std::vector<double> h(U);
  double prev = static_cast<double>(max_deg) * static_cast<double>(n);
  const int max_rounds = rounds < 0 ? kLaborMaxRounds : rounds;
  for (int r = 0; r < max_rounds; ++r) {
    std::fill(h.begin(), h.end(), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = off[i]; j < off[i + 1]; ++j) h[u[j]] = std::max(h[u[j]], c[i]);
    }
    for (int64_t t = 0; t < U; ++t) q[t] = r == 0 ? h[t] : q[t] * h[t];
    for (int64_t i = 0; i < n; ++i) {
      if (off[i + 1] > off[i]) c[i] = solve_row_c(u, off[i], off[i + 1], k, q, c[i]);
    }
    double cur = 0;
    for (int64_t t = 0; t < U; ++t) cur += std::min(1.0, q[t]);
    if (cur / prev >= 1 - kLaborEps) break;
    prev = cur;
  }
}
}  // namespace

void labor_importance_picks(int64_t n, const int64_t* off, const int64_t* ids, int k, int rounds,
                            const csp::LaborVariates& lv, std::vector<int64_t>& out_off,
                            std::vector<int64_t>& out_ids, std::vector<float>& out_w) {
  // the distinct neighbours, in first-seen order (a deterministic order for every sum over them)
  const int64_t E = off[n];
  std::unordered_map<int64_t, int64_t> index;
  index.reserve(static_cast<size_t>(E));
  std::vector<int64_t> u(E);
  for (int64_t j = 0; j < E; ++j) {
    u[j] = index.emplace(ids[j], static_cast<int64_t>(index.size())).first->second;
  }
  std::vector<double> c, q;
  labor_probabilities(n, off, u.data(), static_cast<int64_t>(index.size()), k, rounds, c, q);
  out_off.assign(n + 1, 0);
  out_ids.clear();
  out_w.clear();
  for (int64_t i = 0; i < n; ++i) {
    // Poisson sampling (DGL's sample_labors): t is picked iff r_t <= pi_t, independently, so the
    // Horvitz-Thompson weights 1 / pi are exact (a fixed count would bias them unless the pi
    // summed to it, as only LABOR-0's do).
    const int64_t first = static_cast<int64_t>(out_ids.size());
    for (int64_t j = off[i]; j < off[i + 1]; ++j) {
      const double pi = std::min(1.0, c[i] * q[u[j]]);
      const double r = (csp::labor_variate(lv, ids[j]) + 0.5) * (1.0 / 4294967296.0);
      if (r > pi) continue;
      out_ids.push_back(ids[j]);
      out_w.push_back(static_cast<float>(1.0 / pi));
    }
    // w = (1 / pi) m / d: a mean over the m picks weighted by w is sum(h / pi) / d, the
    // Horvitz-Thompson estimate of the mean over all d neighbours, exactly unbiased (DGL divides
    // by sum(1 / pi) over the picks instead of d: self-normalised, biased by O(1 / m)).
    const int64_t m = static_cast<int64_t>(out_ids.size()) - first;
    const double d = static_cast<double>(off[i + 1] - off[i]);
    for (int64_t j = first; j < first + m; ++j) {
      out_w[j] = static_cast<float>(out_w[j] * static_cast<double>(m) / d);
    }
    out_off[i + 1] = static_cast<int64_t>(out_ids.size());
  }
}

namespace {

// LABOR (LaborSampling): node-wise tasks whose draws share one variate r_t per
// neighbour across the layer's seeds. rounds 0: LABOR-0, the owners' backends draw with the
// variates; otherwise LABOR-i (rounds > 0, or -1: LABOR-*), the requester's importance rounds over
// its fetched rows.
class LaborScheme final : public LayerScheme {
 public:
  LaborScheme(const LaborSampling& o, uint64_t seed)
      : seed_(seed),
        rounds_(o.importance),
        layer_dependency_(o.layer_dependency),
        batch_dependency_(o.batch_dependency) {}
  bool draws_on_host() const override { return rounds_ != 0; }
  bool tasks_every_node() const override { return rounds_ == 0; }

  LayerPicks pick(LayerProtocol& p, const Layer& in) override {
    const csp::LaborVariates lv = variates(in.epoch, in.batch, in.l);
    if (rounds_ != 0) return importance_picks(p, in, lv);
    p.backend().set_labor(lv);
    const LayerPicks lo =
        p.run_layer(in.frontier, in.nf, nullptr, drawn_fanout(in.fanout), in.key, in.known, -1);
    p.backend().set_labor(csp::LaborVariates{});
    return lo;
  }

 private:
  // LABOR's variates for layer l of (epoch, batch).
  csp::LaborVariates variates(int64_t epoch, int64_t batch, int l) const;
  // LABOR-i: the layer's picks and weights computed here over the fetched rows, frontier order.
  LayerPicks importance_picks(LayerProtocol& p, const Layer& in, const csp::LaborVariates& lv) {
    Stopwatch sw;
    std::vector<int64_t> off, ids, po, pn;
    std::vector<float> pw;
    p.fetch_rows(in.host_frontier, in.nf, off, ids);
    p.stats().t_shuffle += sw.seconds();
    sw.reset();
    labor_importance_picks(in.nf, off.data(), ids.data(), drawn_fanout(in.fanout), rounds_, lv, po,
                           pn, pw);
    p.stats().t_sample += sw.seconds();
    return p.own_picks(po, pn, pw);
  }

  uint64_t seed_;
  int rounds_;
  bool layer_dependency_;
  int64_t batch_dependency_;
};

csp::LaborVariates LaborScheme::variates(int64_t epoch, int64_t batch, int l) const {
  csp::LaborVariates lv;
  lv.on = true;
  const uint64_t layer = layer_dependency_ ? 0 : static_cast<uint64_t>(l);
  const uint64_t seed = seed_ ^ kLaborSalt;
  const int64_t K = batch_dependency_;
  if (K <= 1) {
    lv.key0 = lv.key1 = rng_key(seed, epoch, batch, layer);
    return lv;
  }
  // DGL's continuous seed: batches g K .. g K + K - 1 move from key g's variates to key g + 1's.
  const int64_t g = batch / K;
  const double x = static_cast<double>(batch % K) / static_cast<double>(K);
  lv.key0 = rng_key(seed, epoch, g, layer);
  lv.key1 = rng_key(seed, epoch, g + 1, layer);
  lv.c0 = std::cos(1.5707963267948966 * x);
  lv.c1 = std::sin(1.5707963267948966 * x);
  return lv;
}

}  // namespace

std::unique_ptr<LayerScheme> make_labor_scheme(const LaborSampling& o, uint64_t seed) {
  return std::make_unique<LaborScheme>(o, seed);
}

}  // namespace dsp
