#pragma once
// Test-only mini-batches over Cora, built without the collective sampler (written concurrently):
// node-wise uniform sampling with the conventions of csp/block.hpp, every draw keyed like the real
// sampler on (seed, epoch, batch, layer, global node id), so a seed's neighbourhood is the same
// whichever rank samples it. Features are row-normalised (each bag-of-words row divided by its
// sum, as in Kipf & Welling's and Velickovic et al.'s Cora setups), labels come from the dataset.
//
// Torch-free, shared by test_train (one rank) and test_train_mpi.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <numeric>
#include <unordered_map>
#include <vector>

#include "core/rng.hpp"
#include "csp/block.hpp"
#include "graph/dataset.hpp"
#include "graph/import.hpp"
#include "train/trainer.hpp"

namespace dsp::test {

struct CoraData {
  Dataset ds;
  std::vector<float> features;  // row-normalised, [N x F]
  std::vector<int64_t> labels;
  std::vector<int64_t> train, valid, test;
  int64_t num_nodes = 0, dim = 0, classes = 0;
};

inline std::vector<int64_t> to_vec(const Array& a) {
  std::vector<int64_t> v(static_cast<size_t>(a.numel()));
  for (int64_t i = 0; i < a.numel(); ++i) v[i] = a.int_at(i);
  return v;
}

// Every test binary gets DSP_TEST_DATA_DIR (an absolute path) from tests/CMakeLists.txt.
inline std::string cora_dir() { return DSP_TEST_DATA_DIR "/cora"; }

inline const CoraData& cora() {
  static const CoraData data = [] {
    CoraData d;
    d.ds = import_ogb_raw(cora_dir(), {});
    d.num_nodes = d.ds.meta.num_nodes;
    d.dim = d.ds.meta.feature_dim;
    d.classes = d.ds.meta.num_classes;
    const float* f = d.ds.features.data<float>();
    d.features.assign(f, f + d.num_nodes * d.dim);
    for (int64_t v = 0; v < d.num_nodes; ++v) {
      float* row = d.features.data() + v * d.dim;
      double s = 0;
      for (int64_t j = 0; j < d.dim; ++j) s += row[j];
      if (s > 0) {
        for (int64_t j = 0; j < d.dim; ++j) row[j] = static_cast<float>(row[j] / s);
      }
    }
    d.labels = to_vec(d.ds.labels);
    d.train = to_vec(d.ds.train_idx);
    d.valid = to_vec(d.ds.valid_idx);
    d.test = to_vec(d.ds.test_idx);
    return d;
  }();
  return data;
}

// fanouts from the seeds out (fanouts[0] for the seeds); -1 takes every in-neighbour.
inline SampledBatch sample_batch(const Csr& g, const std::vector<int64_t>& seeds,
                                 const std::vector<int>& fanouts, uint64_t seed, int64_t epoch,
                                 int64_t batch) {
  SampledBatch sb;
  sb.epoch = epoch;
  sb.batch = batch;
  sb.seeds = seeds;
  const int L = static_cast<int>(fanouts.size());
  sb.blocks.resize(L);
  std::vector<int64_t> frontier = seeds;
  const int64_t* rp = g.rowptr();
  for (int l = 0; l < L; ++l) {
    Block& b = sb.blocks[L - 1 - l];
    b.num_dst = static_cast<int64_t>(frontier.size());
    b.src_ids = frontier;
    std::unordered_map<int64_t, int64_t> local;
    for (int64_t i = 0; i < b.num_dst; ++i) local.emplace(frontier[i], i);
    b.indptr.assign(1, 0);
    const uint64_t key = rng_key(seed, epoch, batch, l);
    std::vector<int64_t> nb;
    for (int64_t v : frontier) {
      nb.clear();
      for (int64_t e = rp[v]; e < rp[v + 1]; ++e) nb.push_back(g.indices.int_at(e));
      const int64_t k = fanouts[l];
      if (k >= 0 && static_cast<int64_t>(nb.size()) > k) {
        RngStream rs(key, static_cast<uint64_t>(v));
        for (int64_t i = 0; i < k; ++i) {  // partial Fisher-Yates: k distinct neighbours
          std::swap(nb[i], nb[i + rs.uniform_int(nb.size() - i)]);
        }
        nb.resize(k);
      }
      for (int64_t u : nb) {
        auto it = local.emplace(u, static_cast<int64_t>(b.src_ids.size()));
        if (it.second) b.src_ids.push_back(u);
        b.indices.push_back(it.first->second);
      }
      b.indptr.push_back(static_cast<int64_t>(b.indices.size()));
    }
    b.num_src = static_cast<int64_t>(b.src_ids.size());
    frontier = b.src_ids;
  }
  return sb;
}

inline LoadedBatch load_batch(const CoraData& d, SampledBatch sb) {
  LoadedBatch lb;
  lb.feature_dim = d.dim;
  const auto& in = sb.blocks.front().src_ids;
  lb.features.resize(in.size() * d.dim);
  for (size_t i = 0; i < in.size(); ++i) {
    std::copy_n(d.features.data() + in[i] * d.dim, d.dim, lb.features.data() + i * d.dim);
  }
  for (int64_t s : sb.seeds) lb.labels.push_back(d.labels[s]);
  lb.sample = std::move(sb);
  return lb;
}

// The batches of one epoch: `ids` shuffled by (seed, epoch) when `shuffle`, cut into batch_size.
inline std::vector<std::vector<int64_t>> epoch_batches(std::vector<int64_t> ids, int64_t batch_size,
                                                       uint64_t seed, int64_t epoch, bool shuffle) {
  if (shuffle) {
    RngStream rs(rng_key(seed, epoch, 0xffffffff), 0, 7);
    for (size_t i = ids.size(); i > 1; --i) std::swap(ids[i - 1], ids[rs.uniform_int(i)]);
  }
  std::vector<std::vector<int64_t>> out;
  for (size_t i = 0; i < ids.size(); i += batch_size) {
    out.emplace_back(ids.begin() + i, ids.begin() + std::min(ids.size(), i + batch_size));
  }
  return out;
}

// Rank r's contiguous share of a global batch.
inline std::vector<int64_t> rank_share(const std::vector<int64_t>& seeds, int rank, int size) {
  size_t n = seeds.size();
  return std::vector<int64_t>(seeds.begin() + n * rank / size,
                              seeds.begin() + n * (rank + 1) / size);
}

struct CoraRunOptions {
  int epochs = 20;
  int64_t batch_size = 16;
  std::vector<int> fanouts = {10, 10};
  std::vector<int> eval_fanouts = {-1, -1};
  int64_t eval_batch_size = 1024;
  int eval_every = 1;
  int64_t first_epoch = 0;
};

struct CoraRunResult {
  double best_val = -1, test_at_best = 0;
  int best_epoch = -1;
  std::vector<float> losses;  // mean train loss per epoch
};

inline EvalCounts cora_evaluate(Trainer& t, const CoraData& d, const std::vector<int64_t>& ids,
                                const CoraRunOptions& o, int64_t epoch) {
  const auto& c = t.comm();
  EvalCounts local;
  auto batches = epoch_batches(ids, o.eval_batch_size, 0, 0, false);
  for (size_t b = 0; b < batches.size(); ++b) {
    auto mine = rank_share(batches[b], c.rank(), c.size());
    local += t.eval().eval_batch(load_batch(
        d, sample_batch(d.ds.graph, mine, o.eval_fanouts, t.config().seed + 1, epoch, b)));
  }
  return all_reduce(t.comm(), local);
}

inline void cora_train_epoch(Trainer& t, const CoraData& d, const CoraRunOptions& o, int64_t epoch,
                             CoraRunResult& r) {
  const auto& c = t.comm();
  const uint64_t seed = t.config().seed;
  auto batches = epoch_batches(d.train, o.batch_size, seed, epoch, true);
  double loss = 0;
  for (size_t b = 0; b < batches.size(); ++b) {
    auto mine = rank_share(batches[b], c.rank(), c.size());
    loss += t.train_step(load_batch(d, sample_batch(d.ds.graph, mine, o.fanouts, seed, epoch, b)));
  }
  r.losses.push_back(static_cast<float>(loss / batches.size()));
}

// Trains for o.epochs from o.first_epoch; picks the epoch of best validation accuracy.
inline CoraRunResult train_cora(Trainer& t, const CoraData& d, const CoraRunOptions& o) {
  CoraRunResult r;
  for (int64_t epoch = o.first_epoch; epoch < o.first_epoch + o.epochs; ++epoch) {
    cora_train_epoch(t, d, o, epoch, r);
    if ((epoch + 1) % o.eval_every != 0) continue;
    double val = cora_evaluate(t, d, d.valid, o, epoch).accuracy();
    if (val > r.best_val) {
      r.best_val = val;
      r.best_epoch = static_cast<int>(epoch);
      r.test_at_best = cora_evaluate(t, d, d.test, o, epoch).accuracy();
    }
  }
  return r;
}

inline TrainConfig cora_config(const std::string& model, uint64_t seed) {
  const CoraData& d = cora();
  TrainConfig c;
  c.model.model = parse_choice<ModelKind>(model);
  c.model.in_dim = d.dim;
  c.model.out_dim = d.classes;
  c.model.layers = 2;
  c.model.hidden = model == "gat" ? 8 : 32;
  c.model.heads = model == "gat" ? 8 : 1;
  c.model.dropout = model == "gat" ? 0.6 : 0.5;
  c.lr = model == "gat" ? 0.005 : 0.01;
  c.weight_decay = 5e-4;
  c.seed = seed;
  return c;
}

}  // namespace dsp::test
