#pragma once
// Stand-in sampler, loader and trainer for pipeline tests: small, but shaped like the real ones.
// Each does real collectives through its coordinated channel, and every value it produces is a
// pure function of (seed, epoch, batch, node id), so the trainer can check exactly what reaches
// it and a pipelined run can be compared with a sequential one batch by batch.
//
//  sampler: seeds go to their owners (id % P) by all_to_all_v; each owner "samples" `fanout`
//           neighbours per seed; the answers come back by a second all_to_all_v -> one Block.
//  loader:  input nodes go to their owners, which answer with feature rows; labels = id % 7.
//  trainer: checks blocks, features and labels against the closed forms, then two all_reduces
//           (like a gradient sync) that also prove every rank is at the same (epoch, batch).
// Random delays (0..max_delay_us) in every stage shake up the interleaving of the workers.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "ccc/coordinator.hpp"
#include "core/error.hpp"
#include "core/hash.hpp"
#include "core/rng.hpp"
#include "pipeline/pipeline.hpp"

namespace dsp::test {

struct StandInConfig {
  int64_t num_nodes = 100000;
  int64_t fanout = 4;
  int64_t feature_dim = 8;
  uint64_t seed = 7;
  int max_delay_us = 0;  // per stage call, uniform in [0, max]
};

inline int64_t standin_neighbor(const StandInConfig& c, int64_t epoch, int64_t batch, int64_t s,
                                int64_t j) {
  RngStream r(rng_key(c.seed, epoch, batch, 1), static_cast<uint64_t>(s));
  for (int64_t k = 0; k < j; ++k) r.next_u64();
  return static_cast<int64_t>(r.next_u64() % static_cast<uint64_t>(c.num_nodes));
}
inline float standin_feature(int64_t id, int64_t d) {
  return static_cast<float>((id * 31 + d) % 65536);  // exact in float32
}
inline int64_t standin_label(int64_t id) { return id % 7; }

inline uint64_t digest(const LoadedBatch& b) {
  Hasher h;
  auto add = [&h](const auto& v) {
    uint64_t n = v.size();
    h.update(&n, sizeof(n));
    if (!v.empty()) h.update(v.data(), v.size() * sizeof(v[0]));
  };
  h.update(&b.sample.epoch, 8);
  h.update(&b.sample.batch, 8);
  add(b.sample.seeds);
  for (const Block& bl : b.sample.blocks) {
    h.update(&bl.num_dst, 8);
    h.update(&bl.num_src, 8);
    add(bl.indptr);
    add(bl.indices);
    add(bl.src_ids);
  }
  add(b.features);
  add(b.labels);
  return h.digest();
}

class StandIn {
 public:
  StandIn(Coordinator& coord, StandInConfig cfg) : coord_(coord), cfg_(cfg) {}

  // What the trainer saw, in order: (epoch, batch, digest) and every seed trained.
  struct Seen {
    int64_t epoch, batch;
    uint64_t digest;
  };
  std::vector<Seen> seen;
  std::vector<int64_t> trained_seeds;
  std::atomic<int64_t> checked_rows{0};

  PipelineStages stages() {
    PipelineStages s;
    s.sample = [this](int64_t e, int64_t b, const std::vector<int64_t>& seeds) {
      return sample(e, b, seeds);
    };
    s.load = [this](SampledBatch&& sb) { return load(std::move(sb)); };
    s.train = [this](LoadedBatch&& lb) { train(std::move(lb)); };
    return s;
  }

  void delay(uint64_t salt) {
    if (cfg_.max_delay_us <= 0) return;
    thread_local std::mt19937_64 rng(std::random_device{}() ^ salt);
    std::uniform_int_distribution<int> d(0, cfg_.max_delay_us);
    std::this_thread::sleep_for(std::chrono::microseconds(d(rng)));
  }

  SampledBatch sample(int64_t epoch, int64_t batch, const std::vector<int64_t>& seeds) {
    Communicator& c = coord_.channel(WorkerKind::kSampler);
    const int P = c.size();
    delay(1);
    std::vector<std::vector<int64_t>> bucket(P);
    for (int64_t s : seeds) bucket[s % P].push_back(s);
    std::vector<int64_t> send, counts(P);
    for (int p = 0; p < P; ++p) {
      counts[p] = static_cast<int64_t>(bucket[p].size());
      send.insert(send.end(), bucket[p].begin(), bucket[p].end());
    }
    std::vector<int64_t> rc;
    std::vector<int64_t> asked = c.all_to_all_v(send, counts, &rc);
    std::vector<int64_t> answer;
    for (int64_t s : asked) {
      DSP_CHECK(s % P == c.rank(), "sampler: rank {} got seed {} it does not own", c.rank(), s);
      for (int64_t j = 0; j < cfg_.fanout; ++j) {
        answer.push_back(standin_neighbor(cfg_, epoch, batch, s, j));
      }
    }
    for (auto& x : rc) x *= cfg_.fanout;
    delay(2);
    std::vector<int64_t> back = c.all_to_all_v(answer, rc);
    // back holds the neighbours in bucket order; map them to the seeds' own order.
    std::vector<int64_t> offset(P + 1, 0);
    for (int p = 0; p < P; ++p) offset[p + 1] = offset[p] + counts[p] * cfg_.fanout;
    SampledBatch sb;
    sb.seeds = seeds;
    Block bl;
    const int64_t n = static_cast<int64_t>(seeds.size());
    bl.num_dst = n;
    bl.num_src = n + n * cfg_.fanout;
    bl.src_ids = seeds;
    bl.indptr.push_back(0);
    std::vector<int64_t> cursor(offset.begin(), offset.end() - 1);
    for (int64_t i = 0; i < n; ++i) {
      int p = static_cast<int>(seeds[i] % P);
      for (int64_t j = 0; j < cfg_.fanout; ++j) {
        bl.indices.push_back(static_cast<int64_t>(bl.src_ids.size()));
        bl.src_ids.push_back(back[cursor[p]++]);
      }
      bl.indptr.push_back(static_cast<int64_t>(bl.indices.size()));
    }
    sb.blocks.push_back(std::move(bl));
    return sb;
  }

  LoadedBatch load(SampledBatch&& sb) {
    Communicator& c = coord_.channel(WorkerKind::kLoader);
    const int P = c.size();
    const int64_t D = cfg_.feature_dim;
    delay(3);
    const std::vector<int64_t>& in = sb.input_nodes();
    std::vector<int64_t> counts(P, 0);
    for (int64_t v : in) ++counts[v % P];
    std::vector<int64_t> offset(P + 1, 0);
    for (int p = 0; p < P; ++p) offset[p + 1] = offset[p] + counts[p];
    std::vector<int64_t> send(in.size()), pos(in.size());
    std::vector<int64_t> cursor(offset.begin(), offset.end() - 1);
    for (size_t i = 0; i < in.size(); ++i) {
      pos[i] = cursor[in[i] % P]++;
      send[pos[i]] = in[i];
    }
    std::vector<int64_t> rc;
    std::vector<int64_t> asked = c.all_to_all_v(send, counts, &rc);
    std::vector<float> rows;
    rows.reserve(asked.size() * D);
    for (int64_t v : asked) {
      DSP_CHECK(v % P == c.rank(), "loader: rank {} asked for row {} it does not own", c.rank(), v);
      for (int64_t d = 0; d < D; ++d) rows.push_back(standin_feature(v, d));
    }
    for (auto& x : rc) x *= D;
    std::vector<int64_t> sc = counts;
    for (auto& x : sc) x *= D;
    std::vector<float> got(in.size() * D);
    c.all_to_all_v(rows.data(), rc, got.data(), sc, DType::kFloat32);
    delay(4);
    LoadedBatch lb;
    lb.feature_dim = D;
    lb.features.resize(in.size() * D);
    for (size_t i = 0; i < in.size(); ++i) {
      std::copy(got.begin() + pos[i] * D, got.begin() + (pos[i] + 1) * D,
                lb.features.begin() + i * D);
    }
    for (int64_t s : sb.seeds) lb.labels.push_back(standin_label(s));
    lb.sample = std::move(sb);
    return lb;
  }

  void train(LoadedBatch&& lb) {
    Communicator& c = coord_.channel(WorkerKind::kTrainer);
    const SampledBatch& sb = lb.sample;
    delay(5);
    // Content: exactly what a correct sampler and loader produce.
    DSP_CHECK(sb.blocks.size() == 1, "trainer: {} blocks", sb.blocks.size());
    const Block& bl = sb.blocks[0];
    const int64_t n = static_cast<int64_t>(sb.seeds.size());
    DSP_CHECK(bl.num_dst == n && static_cast<int64_t>(bl.src_ids.size()) == bl.num_src,
              "trainer: block shape");
    for (int64_t i = 0; i < n; ++i) {
      DSP_CHECK(bl.src_ids[i] == sb.seeds[i], "trainer: dst prefix");
      for (int64_t j = 0; j < cfg_.fanout; ++j) {
        int64_t got = bl.src_ids[bl.indices[bl.indptr[i] + j]];
        int64_t want = standin_neighbor(cfg_, sb.epoch, sb.batch, sb.seeds[i], j);
        DSP_CHECK(got == want, "trainer: batch {} seed {} neighbour {} is {}, expected {}",
                  sb.batch, sb.seeds[i], j, got, want);
      }
    }
    const int64_t D = lb.feature_dim;
    DSP_CHECK(static_cast<int64_t>(lb.features.size()) == bl.num_src * D, "trainer: features");
    for (int64_t i = 0; i < bl.num_src; ++i) {
      for (int64_t d = 0; d < D; ++d) {
        DSP_CHECK(lb.features[i * D + d] == standin_feature(bl.src_ids[i], d),
                  "trainer: batch {} row {} (node {}) col {} is {}, expected {}", sb.batch, i,
                  bl.src_ids[i], d, lb.features[i * D + d], standin_feature(bl.src_ids[i], d));
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      DSP_CHECK(lb.labels[i] == standin_label(sb.seeds[i]), "trainer: label");
    }
    checked_rows += bl.num_src;
    // "Gradient sync": every rank must be at the same step.
    int64_t step = sb.epoch * 1000000 + sb.batch;
    int64_t mx[2] = {step, -step};
    c.all_reduce(mx, 2, DType::kInt64, ReduceOp::kMax);
    DSP_CHECK(mx[0] == step && -mx[1] == step,
              "trainer: rank {} at step {} but ranks span [{}, {}]", c.rank(), step, -mx[1], mx[0]);
    std::vector<float> grad(64, 1.0f);
    c.all_reduce(grad.data(), 64, DType::kFloat32, ReduceOp::kSum);
    DSP_CHECK(grad[63] == static_cast<float>(c.size()), "trainer: gradient sum");
    delay(6);
    std::lock_guard<std::mutex> lock(mu_);
    seen.push_back({sb.epoch, sb.batch, digest(lb)});
    trained_seeds.insert(trained_seeds.end(), sb.seeds.begin(), sb.seeds.end());
  }

 private:
  Coordinator& coord_;
  StandInConfig cfg_;
  std::mutex mu_;
};

}  // namespace dsp::test
