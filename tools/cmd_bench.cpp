// `dsp bench`: measurements, never timed tests. Each prints a table and can write JSON.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "cache_trace.hpp"
#include "ccc/communicator.hpp"
#include "commands.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/lists.hpp"
#include "core/logging.hpp"
#include "core/memory.hpp"
#ifdef DSP_HAVE_CUDA
#include "core/cuda/memory.hpp"
#endif
#include "core/rng.hpp"
#include "core/timer.hpp"
#include "csp/presample.hpp"
#include "csp/sampler.hpp"
#include "graph/dataset.hpp"
#include "layout/partition/partition.hpp"
#include "layout/store/feature_store.hpp"
#include "layout/store/fifo_cache.hpp"
#include "layout/store/hotness.hpp"
#include "pipeline/rank/runtime.hpp"
#include "pipeline/seed_order.hpp"
#ifdef DSP_HAVE_TRAIN
#include "ccc/coordinator.hpp"
#include "pipeline/bench.hpp"
#include "pipeline/roles.hpp"
#include "pipeline/scheduler.hpp"
#include "train/trainer.hpp"
#endif

namespace dsp::cli {
namespace {

struct GatherArgs {
  std::string part_dir, json, device = "cpu";
  int64_t batch = 100000;
  int iters = 20;
  int threads = 1;
  uint64_t seed = 0;
};

// Distinct ids drawn uniformly: a partial Fisher-Yates over a reused permutation.
std::vector<int64_t> draw_ids(std::vector<int64_t>& perm, int64_t k, uint64_t key, uint64_t round) {
  RngStream s(key, round);
  const int64_t n = static_cast<int64_t>(perm.size());
  for (int64_t i = 0; i < k; ++i) std::swap(perm[i], perm[i + s.uniform_int(n - i)]);
  return std::vector<int64_t>(perm.begin(), perm.begin() + k);
}

// topology_memory: --topology-memory's text, or empty for the default.
RankOptions bench_rank(const std::string& path, int threads, const std::string& device,
                       const std::string& topology_memory = "") {
  RankOptions ro;
  ro.path = path;
  ro.threads = threads;
  ro.device = Device::parse(device);
  if (!topology_memory.empty()) {
    ro.topology_memory = static_cast<int64_t>(parse_bytes("--topology-memory", topology_memory));
  }
  ro.log_name = "bench";
  return ro;
}

// On a GPU rank, the copy ceilings of a gather into device memory, measured in the same run: a
// device-to-device copy and a pinned host-to-device copy of the same bytes (hot rows are read at
// the first, cold rows through UVA at most at the second).
void add_device_ceilings(const Device& device, size_t bytes, int iters, nlohmann::json& j,
                         bool print) {
#ifdef DSP_HAVE_CUDA
  if (!device.is_cuda()) return;
  const cuda::CopyBandwidth bw = cuda::copy_bandwidth(device.index, bytes, iters);
  const double gather = j["gather_GBps"].get<double>();
  j["device_to_device_GBps"] = bw.device_to_device_gbps;
  j["host_to_device_GBps"] = bw.host_to_device_gbps;
  j["gather_vs_device_to_device"] = gather / bw.device_to_device_gbps;
  j["gather_vs_host_to_device"] = gather / bw.host_to_device_gbps;
  if (!print) return;
  fmt::print("  device-to-device copy    {:8.2f} GB/s   (gather / d2d = {:.2f})\n",
             bw.device_to_device_gbps, gather / bw.device_to_device_gbps);
  fmt::print("  pinned host-to-device    {:8.2f} GB/s   (gather / h2d = {:.2f})\n",
             bw.host_to_device_gbps, gather / bw.host_to_device_gbps);
#else
  (void)device, (void)bytes, (void)iters, (void)j, (void)print;
#endif
}

void run_gather(const GatherArgs& a) {
  RankRuntime rt(bench_rank(a.part_dir, a.threads, a.device));
  Communicator* comm = &rt.channel(WorkerKind::kLoader);  // the store's channel: ops in order
  const PartitionData& part = rt.part();
  FeatureStore& store = rt.store();
  const int64_t n = store.num_nodes();
  const int64_t batch = std::min(a.batch, n);
  const size_t rb = store.row_bytes();
  const auto* base = static_cast<const unsigned char*>(part.features.raw());
  std::vector<int64_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  uint64_t key = rng_key(a.seed, comm->rank());
  std::vector<unsigned char> ref(batch * rb), contig_src(batch * rb, 1);
  std::shared_ptr<void> out = store.backend().allocate_rows(batch);  // in the store's memory
  // Touch every page of the mapping once so all three loops read from the page cache.
  volatile unsigned char sink = 0;
  for (size_t off = 0; off < part.features.nbytes(); off += 4096) sink = sink + base[off];

  double t_gather = 0, t_loop = 0, t_memcpy = 0;
  for (int it = -2; it < a.iters; ++it) {  // two warm-up rounds
    // Separate id sets for the two loops, so neither reads rows the other just brought in.
    std::vector<int64_t> ids = draw_ids(perm, batch, key, static_cast<uint64_t>(2 * (it + 2)));
    std::vector<int64_t> ids2 = draw_ids(perm, batch, key, static_cast<uint64_t>(2 * (it + 2) + 1));
    comm->barrier();
    // Alternate which of the two runs first, so neither always meets the caches the id drawing
    // left behind.
    double g = 0, l = 0;
    for (int k = 0; k < 2; ++k) {
      Stopwatch sw;
      if ((k == 0) == (it % 2 == 0)) {
        store.gather(ids.data(), batch, out.get());
        g = sw.seconds();
      } else {
        for (int64_t i = 0; i < batch; ++i) {
          std::memcpy(ref.data() + i * rb, base + ids2[i] * rb, rb);
        }
        l = sw.seconds();
      }
    }
    Stopwatch sw;
    std::memcpy(ref.data(), contig_src.data(), batch * rb);
    double m = sw.seconds();
    if (it >= 0) {
      t_gather += g;
      t_loop += l;
      t_memcpy += m;
    }
  }
  const double bytes = static_cast<double>(batch) * rb * a.iters;
  const GatherStats& st = store.stats();
  nlohmann::json j = {{"bench", "gather"},
                      {"partition", a.part_dir},
                      {"device", rt.device().str()},
                      {"rank", comm->rank()},
                      {"ranks", comm->size()},
                      {"threads", a.threads},
                      {"batch_rows", batch},
                      {"row_bytes", rb},
                      {"iters", a.iters},
                      {"gather_GBps", bytes / t_gather / 1e9},
                      {"row_loop_GBps", bytes / t_loop / 1e9},
                      {"contiguous_memcpy_GBps", bytes / t_memcpy / 1e9},
                      {"gather_vs_row_loop", t_loop / t_gather},
                      {"gather_vs_memcpy", t_memcpy / t_gather},
                      {"hit_rate", st.hit_rate()},
                      {"rows_remote_hot", st.rows_remote_hot},
                      {"rows_local_hot", st.rows_local_hot},
                      {"rows_cold", st.rows_cold}};
  if (comm->rank() == 0) {
    fmt::print("gather bench: {} ranks, {} thread(s), {} rows x {} B per call, {} calls\n",
               comm->size(), a.threads, batch, rb, a.iters);
    fmt::print("  FeatureStore::gather     {:8.2f} GB/s\n", j["gather_GBps"].get<double>());
    fmt::print("  per-row memcpy loop      {:8.2f} GB/s   (gather / loop = {:.2f})\n",
               j["row_loop_GBps"].get<double>(), j["gather_vs_row_loop"].get<double>());
    fmt::print(
        "  contiguous memcpy        {:8.2f} GB/s   (gather / memcpy = {:.2f}; the ceiling)\n",
        j["contiguous_memcpy_GBps"].get<double>(), j["gather_vs_memcpy"].get<double>());
    fmt::print("  hit rate {:.3f}: remote hot {}, local hot {}, cold {} rows\n", st.hit_rate(),
               st.rows_remote_hot, st.rows_local_hot, st.rows_cold);
  }
  add_device_ceilings(rt.device(), batch * rb, a.iters, j, comm->rank() == 0);
  if (comm->rank() == 0 && !a.json.empty()) write_file_atomic(a.json, j.dump(2) + "\n");
}

struct SampleArgs {
  std::string part_dir, json, fanouts = "15,10,5", mode = "csp", scheme = "node", device = "cpu";
  std::string kernel = "default", topology_memory;
  int64_t batch_size = 1024;
  int batches = 20;
  int threads = 1;
  bool biased = false, replace = false, per_layer_bytes = false;
  uint64_t seed = 0;
};

// One mode: `batches` timed batches (after one warm-up) of this rank's seeds; figures summed or
// maxed over ranks.
nlohmann::json bench_sample_mode(const SampleArgs& a, RankRuntime& rt, SampleMode mode,
                                 int num_layers = -1) {
  const PartitionData& part = rt.part();
  Communicator& comm = rt.channel(WorkerKind::kSampler);
  SamplerOptions o;
  o.fanouts = parse_int_list(a.fanouts, "--fanouts");
  if (num_layers >= 0) o.fanouts.resize(num_layers);
  o.scheme = parse_sample_scheme(a.scheme);
  o.biased = a.biased;
  o.replace = a.replace;
  o.seed = a.seed;
  o.mode = mode;
  o.kernel = parse_sample_kernel(a.kernel);
  o.blocks_on_device = true;  // as dsp train samples: a device backend's blocks stay there
  std::unique_ptr<CollectiveSampler> sp = rt.make_sampler(o);
  CollectiveSampler& sampler = *sp;
  std::vector<int64_t> seeds;
  for (int64_t i = 0; i < part.seeds.dim(0); ++i) seeds.push_back(part.seeds.int_at(i));
  DSP_CHECK_ARG(!seeds.empty(), "part {} has no training seeds", part.part);
  seeds = shuffle_ids(seeds, a.seed, 0);
  const int64_t bs = std::min<int64_t>(a.batch_size, static_cast<int64_t>(seeds.size()));
  auto batch_seeds = [&](int64_t b) {
    std::vector<int64_t> s;
    int64_t n = static_cast<int64_t>(seeds.size());
    int64_t start = (b * bs) % n;
    for (int64_t i = 0; i < bs && i < n; ++i) s.push_back(seeds[(start + i) % n]);
    return s;
  };
  sampler.sample(batch_seeds(0), 0, 0);  // warm-up: page faults, table growth
  sampler.reset_stats();
  comm.barrier();
  Stopwatch sw;
  for (int b = 0; b < a.batches; ++b) sampler.sample(batch_seeds(b + 1), 0, b + 1);
  double wall = sw.seconds();
  const SamplerStats& st = sampler.stats();
  const int L = static_cast<int>(o.fanouts.size());
  // sums over ranks
  std::vector<double> sum = {static_cast<double>(st.sampled_edges), static_cast<double>(st.seeds),
                             static_cast<double>(st.bytes_sent),
                             static_cast<double>(st.tasks_local),
                             static_cast<double>(st.tasks_remote)};
  comm.all_reduce(sum.data(), static_cast<int64_t>(sum.size()), DType::kFloat64, ReduceOp::kSum);
  // maxima over ranks (the slowest rank sets the pace of a collective)
  std::vector<double> mx = {wall, st.t_shuffle, st.t_sample, st.t_reshuffle, st.t_relabel};
  for (int l = 0; l < L; ++l) mx.push_back(st.t_layer[l]);
  comm.all_reduce(mx.data(), static_cast<int64_t>(mx.size()), DType::kFloat64, ReduceOp::kMax);
  // batches per epoch: the rank with the most seeds decides (others sample empty batches)
  int64_t bpe = (part.seeds.dim(0) + a.batch_size - 1) / a.batch_size;
  comm.all_reduce(&bpe, 1, DType::kInt64, ReduceOp::kMax);
  const double nb = a.batches;
  nlohmann::json per_layer = nlohmann::json::array();
  for (int l = 0; l < L; ++l) per_layer.push_back(mx[5 + l] / nb * 1e3);
  return {{"mode", mode == SampleMode::kCsp ? "csp" : "pull"},
          {"sampled_edges_per_s", sum[0] / mx[0]},
          {"sampled_edges_per_s_per_rank", sum[0] / mx[0] / comm.size()},
          {"seeds_per_s", sum[1] / mx[0]},
          {"sampled_edges_per_batch", sum[0] / nb / comm.size()},
          {"ms_per_batch", mx[0] / nb * 1e3},
          {"ms_per_stage",
           {{"shuffle", mx[1] / nb * 1e3},
            {"sample", mx[2] / nb * 1e3},
            {"reshuffle", mx[3] / nb * 1e3},
            {"relabel", mx[4] / nb * 1e3}}},
          {"ms_per_layer_from_seeds", per_layer},
          {"tasks_local", sum[3]},
          {"tasks_remote", sum[4]},
          {"bytes_per_batch", sum[2] / nb},
          {"batches_per_epoch", bpe},
          // measured bytes per batch (all ranks) times batches per epoch
          {"bytes_per_epoch_extrapolated", sum[2] / nb * bpe}};
}

void run_sample(const SampleArgs& a) {
  RankRuntime rt(bench_rank(a.part_dir, a.threads, a.device, a.topology_memory));
  const PartitionData& part = rt.part();
  Communicator* comm = &rt.channel(WorkerKind::kSampler);
  nlohmann::json j = {{"bench", "sample"},
                      {"device", rt.device().str()},
                      {"partition", a.part_dir},
                      {"ranks", comm->size()},
                      {"threads", a.threads},
                      {"fanouts", a.fanouts},
                      {"batch_size", a.batch_size},
                      {"batches", a.batches},
                      {"scheme", a.scheme},
                      {"biased", a.biased},
                      {"replace", a.replace},
                      {"sample_kernel", a.kernel},
                      {"num_nodes", part.meta.num_nodes},
                      {"num_edges", part.meta.num_edges},
                      {"modes", nlohmann::json::array()}};
  std::vector<SampleMode> modes;
  if (a.mode == "both") {
    modes = {SampleMode::kCsp, SampleMode::kPull};
  } else {
    modes = {parse_sample_mode(a.mode)};
  }
  for (SampleMode m : modes) {
    nlohmann::json r = bench_sample_mode(a, rt, m);
    const int L = static_cast<int>(parse_int_list(a.fanouts, "--fanouts").size());
    if (a.per_layer_bytes && L > 1) {
      // The sampler counts bytes per batch, not per layer. Layer l's draws are keyed by (seed,
      // epoch, batch, l) only, so a run with the first l fanouts samples exactly the first l
      // layers of the full run: differences of prefix runs are the per-layer volumes.
      std::vector<double> prefix = {0.0};
      for (int l = 1; l < L; ++l) {
        prefix.push_back(
            bench_sample_mode(a, rt, m, l)["bytes_per_epoch_extrapolated"].get<double>());
      }
      prefix.push_back(r["bytes_per_epoch_extrapolated"].get<double>());
      nlohmann::json per = nlohmann::json::array();
      for (int l = 0; l < L; ++l) per.push_back(prefix[l + 1] - prefix[l]);
      r["bytes_per_epoch_per_layer"] = per;
    }
    j["modes"].push_back(r);
  }
  if (comm->rank() != 0) return;
  fmt::print("sample bench: {} rank(s) x {} thread(s), fanouts {}, batch {}, {} timed batches\n",
             comm->size(), a.threads, a.fanouts, a.batch_size, a.batches);
  for (const auto& m : j["modes"]) {
    fmt::print(
        "  {:<4} {:8.2f} M sampled edges/s ({:.2f} M per rank), {:9.0f} seeds/s, "
        "{:.2f} ms/batch\n",
        m["mode"].get<std::string>(), m["sampled_edges_per_s"].get<double>() / 1e6,
        m["sampled_edges_per_s_per_rank"].get<double>() / 1e6, m["seeds_per_s"].get<double>(),
        m["ms_per_batch"].get<double>());
    const auto& s = m["ms_per_stage"];
    fmt::print(
        "       stages ms/batch: shuffle {:.2f}, sample {:.2f}, reshuffle {:.2f}, "
        "relabel {:.2f}; layers {}\n",
        s["shuffle"].get<double>(), s["sample"].get<double>(), s["reshuffle"].get<double>(),
        s["relabel"].get<double>(), m["ms_per_layer_from_seeds"].dump());
    fmt::print("       bytes/epoch (extrapolated from {} batches x {} batches/epoch): {:.1f} MB\n",
               a.batches, m["batches_per_epoch"].get<int64_t>(),
               m["bytes_per_epoch_extrapolated"].get<double>() / 1e6);
    if (m.contains("bytes_per_epoch_per_layer")) {
      std::string per;
      for (const auto& b : m["bytes_per_epoch_per_layer"]) {
        per += fmt::format(" {:.1f}", b.get<double>() / 1e6);
      }
      fmt::print("       MB/epoch per layer (from the seeds out):{}\n", per);
    }
  }
  if (modes.size() == 2) {
    double c = j["modes"][0]["bytes_per_epoch_extrapolated"].get<double>();
    double p = j["modes"][1]["bytes_per_epoch_extrapolated"].get<double>();
    j["csp_bytes_over_pull"] = p > 0 ? c / p : 0.0;
    fmt::print("  CSP moves {:.3f} of pull's bytes\n", p > 0 ? c / p : 0.0);
  }
  if (!a.json.empty()) write_file_atomic(a.json, j.dump(2) + "\n");
}

struct CacheArgs {
  std::string path, json, ratios = "0.05,0.1,0.2", fanouts = "15,10,5",
                          policies = "in-degree,out-degree,presample,random",
                          presample_epochs = "1", orders = "random";
  int64_t batch_size = 1024;
  int batches = 50;
  int bfs_sequences = 4;
  int threads = 1;
  uint64_t seed = 0;
};

// Hotness of every policy (presample once per K of PreSC#K: "presample#K" when several K are
// asked for), computed once: static caches do not depend on the order of the seeds.
struct ScoredPolicy {
  std::string name;
  std::vector<int64_t> score;
  double seconds = 0;
};
std::vector<ScoredPolicy> score_policies(const CacheArgs& a, const Csr& graph,
                                         const std::vector<int64_t>& train,
                                         const SamplerOptions& so) {
  std::vector<int> ks;
  for (int k : parse_int_list(a.presample_epochs, "--presample-epochs")) {
    DSP_CHECK_ARG(k > 0, "--presample-epochs must be positive, got {}", k);
    ks.push_back(k);
  }
  std::vector<ScoredPolicy> out;
  for (const std::string& pname : split_list(a.policies)) {
    const bool presample = std::string(static_cache_policy(pname).name()) == "presample";
    for (int k : presample ? ks : std::vector<int>{1}) {
      PresampleOptions po;
      po.epochs = k;
      po.batch_size = a.batch_size;
      po.sampler = so;
      po.sampler.seed = a.seed + 0x9e3779b9ULL;  // not the trace's draws
      Stopwatch sw;
      ScoredPolicy sp;
      sp.name = presample && ks.size() > 1 ? fmt::format("presample#{}", k) : pname;
      sp.score = hotness_scores(pname, graph, train, a.seed + 1, make_presample_fn(po));
      sp.seconds = sw.seconds();
      out.push_back(std::move(sp));
    }
  }
  return out;
}

// Hit rates of the policies and the oracle on one trace, its reuse and label mix.
nlohmann::json score_trace(const CacheTrace& t, const std::vector<ScoredPolicy>& scored,
                           const std::vector<double>& ratios, int64_t n) {
  nlohmann::json opt = nlohmann::json::array(), pol = nlohmann::json::object();
  for (double r : ratios) opt.push_back(optimal_hit_rate(t.ids, n, static_cast<int64_t>(r * n)));
  for (const ScoredPolicy& sp : scored) {
    nlohmann::json hits = nlohmann::json::array(), of_opt = nlohmann::json::array();
    for (size_t i = 0; i < ratios.size(); ++i) {
      double h =
          hit_rate(t.ids, n, top_k_by_score(sp.score, 0, n, static_cast<int64_t>(ratios[i] * n)));
      hits.push_back(h);
      of_opt.push_back(opt[i].get<double>() > 0 ? h / opt[i].get<double>() : 0.0);
    }
    pol[sp.name] = {{"hit_rate", hits}, {"of_optimal", of_opt}, {"score_s", sp.seconds}};
  }
  {  // BGL's dynamic FIFO, replayed on the trace (cold at the start, like a real run)
    nlohmann::json hits = nlohmann::json::array(), of_opt = nlohmann::json::array();
    Stopwatch sw;
    for (size_t i = 0; i < ratios.size(); ++i) {
      const double h = fifo_hit_rate(t.ids, t.batch_end, n, static_cast<int64_t>(ratios[i] * n));
      hits.push_back(h);
      of_opt.push_back(opt[i].get<double>() > 0 ? h / opt[i].get<double>() : 0.0);
    }
    pol["fifo"] = {{"hit_rate", hits}, {"of_optimal", of_opt}, {"replay_s", sw.seconds()}};
  }
  // Each window against the best static policy and the oracle holding as many nodes.
  nlohmann::json reuse = nlohmann::json::array();
  for (const WindowReuse& w : window_reuse(t, n, {1, 4, 16})) {
    const int64_t k = static_cast<int64_t>(w.size_share * static_cast<double>(n));
    double best = 0;
    for (const ScoredPolicy& sp : scored) {
      best = std::max(best, hit_rate(t.ids, n, top_k_by_score(sp.score, 0, n, k)));
    }
    reuse.push_back({{"window_batches", w.window},
                     {"hit_rate", w.hit_rate},
                     {"size_share", w.size_share},
                     {"best_static_same_size", best},
                     {"optimal_same_size", optimal_hit_rate(t.ids, n, k)}});
  }
  return {{"policies", pol},       {"optimal", opt},         {"trace_accesses", t.ids.size()},
          {"window_reuse", reuse}, {"label_tv", t.label_tv}, {"sampling_s", t.seconds}};
}

void print_trace_scores(const std::string& order, const nlohmann::json& o,
                        const std::vector<double>& ratios) {
  fmt::print("  order {}: {} accesses, batch label TV distance {:.3f}\n", order,
             o["trace_accesses"].get<int64_t>(), o["label_tv"].get<double>());
  std::string head = fmt::format("    {:<12}", "policy");
  for (double r : ratios) head += fmt::format(" {:>8.0f}%", r * 100);
  fmt::print("{}\n", head);
  auto row = [](const std::string& name, const nlohmann::json& v) {
    std::string line = fmt::format("    {:<12}", name);
    for (const auto& h : v) line += fmt::format(" {:>9.3f}", h.get<double>());
    fmt::print("{}\n", line);
  };
  for (auto it = o["policies"].begin(); it != o["policies"].end(); ++it) {
    row(it.key(), it.value()["hit_rate"]);
  }
  row("optimal", o["optimal"]);
  for (const auto& w : o["window_reuse"]) {
    fmt::print(
        "    reuse from the last {:>2} batches: {:.3f} of accesses, holding {:.3f} of the nodes "
        "(best static cache that size {:.3f}, optimal {:.3f})\n",
        w["window_batches"].get<int>(), w["hit_rate"].get<double>(), w["size_share"].get<double>(),
        w["best_static_same_size"].get<double>(), w["optimal_same_size"].get<double>());
  }
}

// Hit rates of static caches on a recorded access trace, single process (GNNLab's evaluation):
// every policy ranks the whole graph, caches its top ratio * N nodes and is scored against the
// trace, as is the optimal oracle (the trace's own most frequent nodes). Presampling draws with a
// different seed than the trace, as a real run would: its counts come before training.
void run_cache(const CacheArgs& a) {
  omp_set_num_threads(a.threads);
  // A 1-part partition holds the whole graph (renumbered) in its only patch; a dataset directory
  // is used as is.
  Dataset ds;
  PartitionData pd;
  const Csr* graph = nullptr;
  std::vector<int64_t> train;
  std::string name;
  const Array* labels = nullptr;
  if (path_exists(a.path + "/partition.json")) {
    PartitionMeta m = load_partition_meta(a.path);
    DSP_CHECK_ARG(m.parts == 1,
                  "{}: bench cache needs the whole graph: a dataset directory or a 1-part "
                  "partition (this one has {} parts)",
                  a.path, m.parts);
    pd = load_partition(a.path, 0, 1);
    graph = &pd.patch;
    train.assign(pd.seeds.data<int64_t>(), pd.seeds.data<int64_t>() + pd.seeds.dim(0));
    name = pd.meta.dataset_name;
    labels = &pd.labels;
  } else {
    LoadOptions lo;
    lo.validate = false;  // O(E) checks would dominate the run; dsp info validates
    ds = load_dataset(a.path, lo);
    graph = &ds.graph;
    DSP_CHECK_ARG(ds.train_idx.defined(), "{}: the dataset has no train_idx", a.path);
    for (int64_t i = 0; i < ds.train_idx.dim(0); ++i) train.push_back(ds.train_idx.int_at(i));
    name = ds.meta.name;
    labels = &ds.labels;
  }
  DSP_CHECK_ARG(!train.empty(), "{}: no training seeds", a.path);
  const int64_t N = graph->num_nodes;

  // Traces: input nodes (the rows a loader would fetch) of `batches` batches of the reference
  // sampler (one part, self communicator), continuing into further epochs if needed, one per
  // seed order.
  SamplerOptions so;
  so.fanouts = parse_int_list(a.fanouts, "--fanouts");
  so.seed = a.seed;
  PartitionData single = single_part(*graph);
  auto self = make_communicator("self");
  CollectiveSampler sampler(single, *self, so);
  const int64_t bpe = (static_cast<int64_t>(train.size()) + a.batch_size - 1) / a.batch_size;
  const std::vector<double> ratios = parse_double_list(a.ratios, "--ratios", 0, 1);
  const std::vector<ScoredPolicy> scored = score_policies(a, *graph, train, so);
  nlohmann::json j = {{"bench", "cache"},
                      {"path", a.path},
                      {"dataset", name},
                      {"num_nodes", N},
                      {"num_edges", graph->num_edges()},
                      {"fanouts", a.fanouts},
                      {"batch_size", a.batch_size},
                      {"batches", a.batches},
                      {"batches_per_epoch", bpe},
                      {"presample_epochs", a.presample_epochs},
                      {"bfs_sequences", a.bfs_sequences},
                      {"threads", a.threads},
                      {"ratios", ratios},
                      {"orders", nlohmann::json::object()}};
  fmt::print("cache bench: {} ({} nodes), traces of {} batches x {} seeds, fanouts {}\n", name, N,
             a.batches, a.batch_size, a.fanouts);
  for (const std::string& order : split_list(a.orders)) {
    DSP_CHECK_ARG(order == "random" || order == "bfs", "--orders: unknown order '{}' (random, bfs)",
                  order);
    std::unique_ptr<BfsSeedOrder> bfs;
    Stopwatch sw;
    if (order == "bfs") {
      std::vector<int64_t> sorted = train;
      std::sort(sorted.begin(), sorted.end());
      bfs = std::make_unique<BfsSeedOrder>(*graph, 0, sorted, a.seed,
                                           BfsOrderOptions{a.bfs_sequences, 0});
    }
    const double t_order = sw.seconds();
    EpochOrderFn fn = [&](int64_t e) {
      return bfs ? bfs->order(e, 0) : shuffle_ids(train, a.seed, e);
    };
    sampler.reset_stats();
    CacheTrace t = record_trace(sampler, fn, static_cast<int64_t>(train.size()), a.batches,
                                a.batch_size, labels);
    nlohmann::json o = score_trace(t, scored, ratios, N);
    o["order_setup_s"] = t_order;
    if (j["orders"].empty()) {  // the first order's figures at the top level, as before
      const SamplerStats& st = sampler.stats();
      j["policies"] = o["policies"];
      j["optimal"] = o["optimal"];
      j["trace_accesses"] = o["trace_accesses"];
      // the single-process reference sampler's throughput, as a by-product
      j["reference_sampler"] = {{"sampled_edges", st.sampled_edges},
                                {"seconds", t.seconds},
                                {"sampled_edges_per_s", st.sampled_edges / t.seconds}};
      fmt::print("  reference sampler: {:.2f} M sampled edges/s ({} thread(s))\n",
                 st.sampled_edges / t.seconds / 1e6, a.threads);
    }
    print_trace_scores(order, o, ratios);
    j["orders"][order] = o;
  }
  if (!a.json.empty()) write_file_atomic(a.json, j.dump(2) + "\n");
}

#ifdef DSP_HAVE_TRAIN
struct PipeArgs {
  std::string part_dir, json, model = "sage", fanouts = "15,10,5", backend = "auto", device = "cpu";
  std::string modes = "on,off", topology_memory;
  int64_t batch_size = 1024, hidden = 256, max_steps = 0;
  int epochs = 2, warmup = 1, threads = 0, repeats = 1, samplers = 0;
  std::string roles_switch = "on";  // the policy of mode roles-switch
  uint64_t seed = 0;
};

// At most max_steps batches of seeds: a random subset, not the lowest ids (METIS parts are
// contiguous id ranges, so a prefix of the sorted seeds would sample one corner of the part).
std::vector<int64_t> bench_seeds(std::vector<int64_t> seeds, const PipeArgs& a) {
  if (a.max_steps > 0 && static_cast<int64_t>(seeds.size()) > a.max_steps * a.batch_size) {
    seeds = shuffle_ids(seeds, a.seed ^ 0x737562ULL, 0);
    seeds.resize(a.max_steps * a.batch_size);
  }
  return seeds;
}

// `--modes roles` and `roles-switch`: GNNLab's factored layout (pipeline/roles.hpp) over the same
// partition, model and trainer, without and with dynamic switching. Built on the mode's first
// epoch; with --samplers 0, GNNLab's allocation rule over profile_roles (a few symmetric batches,
// timed without training them) chooses the samplers first. That epoch is a warm-up one.
class RolesBenchMode {
 public:
  RolesBenchMode(const PipeArgs& a, RankRuntime& rt, EpochScheduler& sched,
                 const PipelineStages& symmetric, const PipelineOptions& base,
                 const SamplerOptions& so, Trainer& trainer, RoleSwitch switching)
      : a_(a),
        rt_(rt),
        sched_(sched),
        sym_(symmetric),
        base_(base),
        so_(so),
        trainer_(trainer),
        switching_(switching) {}

  BenchMode mode() {
    return {switching_ == RoleSwitch::kOff ? "roles" : "roles-switch",
            [this](int64_t e) { return run_epoch(e); }, [this] { return chose_; }};
  }

 private:
  EpochMetrics run_epoch(int64_t epoch) {
    if (pipe_) return count_switched(pipe_->run_epoch(epoch));
    Coordinator& coord = rt_.coord();
    int samplers = a_.samplers;
    chose_ = nlohmann::json::object();
    if (samplers == 0) {
      const RoleAllocation al = profile_roles(
          coord, sched_, sym_, [this](const LoadedBatch& lb) { return trainer_.time_backward(lb); },
          epoch);
      samplers = al.samplers;
      chose_["profile"] = al.to_json();
      chose_["why"] = al.why;
    } else {
      chose_["why"] = "--samplers";
    }
    DSP_CHECK_ARG(samplers >= 1, "bench pipeline --modes {}: needs at least 2 ranks", mode().name);
    build(samplers);
    chose_["layout"] = roles_->layout().to_json();
    chose_["mode"] = fmt::format("{} sampler(s), {} trainer(s), switching {}", samplers,
                                 coord.size() - samplers, role_switch_name(switching_));
    if (rt_.leader())
      DSP_INFO("bench", "{}: {} ({})", mode().name, chose_["mode"].get<std::string>(),
               chose_["why"].get<std::string>());
    return count_switched(pipe_->run_epoch(epoch));
  }

  // With switching: how many extra-slot batches the samplers trained themselves so far, of how
  // many (collective, on every rank after every epoch).
  EpochMetrics count_switched(EpochMetrics m) {
    if (switching_ == RoleSwitch::kOff) return m;
    const RoleLayout& l = roles_->layout();
    double n = static_cast<double>(roles_->switched());
    CoordinatedCommunicator& main = rt_.coord().channel(WorkerKind::kMain);
    main.set_step(m.epoch, -20);
    main.all_reduce(&n, 1, DType::kFloat64, ReduceOp::kSum);
    offered_ += m.steps * l.samplers;
    chose_["switched"] = {{"trained_by_samplers", static_cast<int64_t>(n)},
                          {"extra_slot_batches", offered_}};
    chose_["mode"] = fmt::format(
        "{} sampler(s), {} trainer(s), switching {}: samplers trained {} of their {} extra-slot "
        "batches",
        l.samplers, l.trainers(), role_switch_name(switching_), static_cast<int64_t>(n), offered_);
    return m;
  }

  void build(int samplers) {
    Coordinator& coord = rt_.coord();
    RoleLayout layout{coord.size(), samplers};
    layout.switching = switching_;
    SlotTrain train_slots = [this](SlotBatches&& mine, int slots) {
      std::vector<Trainer::SlotBatch> sb;
      for (const auto& [slot, lb] : mine) sb.push_back({slot, &lb});
      trainer_.train_slots(sb, slots);
    };
    rank_ = make_role_rank(
        coord, rt_.partition_dir(), layout, a_.batch_size, a_.seed, so_, sym_.train,
        [this](std::vector<int64_t> s) { return bench_seeds(std::move(s), a_); }, train_slots);
    roles_ = rank_.roles.get();
    PipelineOptions po = base_;
    po.mode = PipelineMode::kPipelined;
    PipelineStages st = roles_->stages();
    st.set_threads = sym_.set_threads;
    pipe_ = std::make_unique<Pipeline>(coord, roles_->scheduler(), st, po);
  }

  const PipeArgs& a_;
  RankRuntime& rt_;
  EpochScheduler& sched_;
  const PipelineStages& sym_;
  PipelineOptions base_;
  SamplerOptions so_;
  Trainer& trainer_;
  RoleSwitch switching_;
  int64_t offered_ = 0;
  nlohmann::json chose_;
  RoleRank rank_;
  RoleStages* roles_ = nullptr;
  std::unique_ptr<Pipeline> pipe_;
};

// One line per mode: epoch time, batches/s, and per-stage busy, comm and CPU seconds per epoch
// (means over the measured epochs of every repeat).
void print_pipeline_table(const nlohmann::json& j) {
  fmt::print(
      "  {:<12} {:>8} {:>7} | busy s: {:>6} {:>6} {:>6} | comm s: {:>6} {:>6} {:>6} | cpu s: "
      "{:>6} {:>6} {:>6} {:>6} {:>6}\n",
      "mode", "epoch s", "batch/s", "sample", "load", "train", "sample", "load", "train", "sample",
      "load", "train", "comm", "all");
  const char* names[3] = {"sampler", "loader", "trainer"};
  for (const auto& mode : j["modes"]) {
    const auto& r = j[mode.get<std::string>()];
    double busy[3] = {0, 0, 0}, comm[3] = {0, 0, 0}, cpu[5] = {0, 0, 0, 0, 0};
    const double ne = static_cast<double>(r["epochs"].size());
    for (const auto& e : r["epochs"]) {
      for (int k = 0; k < 3; ++k) {
        busy[k] += e["stages"][names[k]]["busy_s"].get<double>() / ne;
        comm[k] += e["stages"][names[k]]["comm_s"].get<double>() / ne;
        cpu[k] += e["stages"][names[k]]["cpu_s"].get<double>() / ne;
      }
      cpu[3] += e["cpu"]["comm_thread_s"].get<double>() / ne;
      cpu[4] += e["cpu"]["process_s"].get<double>() / ne;
    }
    fmt::print(
        "  {:<12} {:>8.3f} {:>7.2f} | {:>14.3f} {:>6.3f} {:>6.3f} | {:>14.3f} {:>6.3f} "
        "{:>6.3f} | {:>13.3f} {:>6.3f} {:>6.3f} {:>6.3f} {:>6.3f}\n",
        mode.get<std::string>(), r["epoch_s"].get<double>(), r["batches_per_s"].get<double>(),
        busy[0], busy[1], busy[2], comm[0], comm[1], comm[2], cpu[0], cpu[1], cpu[2], cpu[3],
        cpu[4]);
  }
  for (const auto& mode : j["modes"]) {
    const auto& r = j[mode.get<std::string>()];
    if (r.contains("chose") && r["chose"].is_object()) {
      fmt::print("  {} chose {}: {}\n", mode.get<std::string>(),
                 r["chose"]["mode"].get<std::string>(), r["chose"]["why"].get<std::string>());
    }
  }
  if (j.contains("vs_off")) {
    std::string line;
    for (auto it = j["vs_off"].begin(); it != j["vs_off"].end(); ++it) {
      if (it.key() != "off") line += fmt::format(" {} {:.2f}x", it.key(), it.value().get<double>());
    }
    if (!line.empty()) fmt::print("  speedup over off (off / mode epoch time):{}\n", line);
  }
}

// The stages of `dsp train` (src/train/job.cpp, without evaluation, checkpoints and metrics),
// timed by bench_pipeline with the pipeline on and off.
void run_pipeline_bench(const PipeArgs& a) {
  RankOptions ro = bench_rank(a.part_dir, a.threads, a.device, a.topology_memory);
  ro.backend = a.backend;
  RankRuntime rt(ro);
  auto coord = &rt.coord();
  const int rank = rt.rank(), size = rt.size(), threads = rt.cores().threads;
  const PartitionData& part = rt.part();
  const PartitionMeta& meta = part.meta;
  DSP_CHECK_FORMAT(meta.feature_dim > 0 && part.labels.defined() && meta.num_classes > 1,
                   "{}: bench pipeline needs features and labels", a.part_dir);
  SamplerOptions so;
  so.fanouts = parse_int_list(a.fanouts, "--fanouts");
  so.seed = a.seed;
  so.blocks_on_device = true;  // the trainer runs on the rank's device, as in dsp train
  std::unique_ptr<CollectiveSampler> sampler = rt.make_sampler(so);
  FeatureStore& store = rt.store();
  TrainConfig tc;
  tc.model.model = a.model;
  tc.model.hidden = a.hidden;
  tc.model.in_dim = meta.feature_dim;
  tc.model.out_dim = meta.num_classes;
  tc.model.layers = static_cast<int>(so.fanouts.size());
  tc.seed = a.seed;
  tc.num_threads = threads;
  tc.device = rt.device();
  tc.validate();
  check_fanout_count(so.fanouts, tc.model);
  Trainer trainer(tc, coord->channel(WorkerKind::kTrainer));

  std::vector<int64_t> seeds =
      bench_seeds(std::vector<int64_t>(part.seeds.data<int64_t>(),
                                       part.seeds.data<int64_t>() + part.seeds.dim(0)),
                  a);
  EpochScheduler sched(seeds, a.batch_size, a.seed);
  CoordinatedCommunicator& main_ch = coord->channel(WorkerKind::kMain);
  main_ch.set_step(-1, 0);
  const int64_t steps = sched.agree_steps(main_ch);

  PipelineStages stages;
  stages.sample = [&](int64_t epoch, int64_t batch, const std::vector<int64_t>& s) {
    return sampler->sample(s, epoch, batch);
  };
  stages.load = [&](SampledBatch&& sb) { return rt.load(std::move(sb)); };
  int64_t train_calls = 0;
  stages.train = [&](LoadedBatch&& lb) {
    // The breakdown leaves out the first warm-up epoch (allocator and cache warm-up).
    if (train_calls++ == steps * a.warmup) trainer.reset_step_times();
    trainer.train_step(lb);
  };
  stages.set_threads = [&](WorkerKind k, int n) {
    if (k == WorkerKind::kTrainer) trainer.set_threads(n);
  };
  PipelineBenchOptions bo;
  bo.epochs = a.epochs;
  bo.warmup_epochs = a.warmup;
  bo.repeats = a.repeats;
  bo.modes = split_list(a.modes);
  if (rank == 0) {
    fmt::print(stderr,
               "pipeline bench: {} on {}, {} rank(s) x {} thread(s), {} steps of {} seeds per "
               "rank, fanouts {}; modes {}, {} repeat(s) of {} warm-up + {} measured epoch(s) per "
               "mode\n",
               a.model, meta.dataset_name, size, threads, steps, a.batch_size, a.fanouts, a.modes,
               a.repeats, a.warmup, a.epochs);
  }
  const PipelineOptions base = rt.pipeline_options(PipelineMode::kAuto);
  sampler->reset_stats();
  store.reset_stats();
  RolesBenchMode roles(a, rt, sched, stages, base, so, trainer, RoleSwitch::kOff);
  RolesBenchMode roles_switch(a, rt, sched, stages, base, so, trainer,
                              parse_role_switch(a.roles_switch));
  nlohmann::json j =
      bench_pipeline(*coord, sched, stages, base, bo, {roles.mode(), roles_switch.mode()});
  j["device"] = rt.device().str();
  j["bench"] = "pipeline";
  j["partition"] = a.part_dir;
  j["dataset"] = meta.dataset_name;
  j["num_nodes"] = meta.num_nodes;
  j["num_edges"] = meta.num_edges;
  j["model"] = a.model;
  j["hidden"] = a.hidden;
  j["fanouts"] = a.fanouts;
  j["batch_size"] = a.batch_size;
  j["max_steps"] = a.max_steps;
  j["threads"] = threads;
  j["cache_hit_rate_rank0"] = store.stats().hit_rate();
  j["train_step_rank0"] = trainer.step_times().to_json();
  main_ch.set_step(1 << 20, 0);
  main_ch.barrier();
  if (rank != 0) return;
  print_pipeline_table(j);
  const StepTimes& st = trainer.step_times();
  const double n = static_cast<double>(std::max<int64_t>(1, st.steps));
  fmt::print(
      "  train step, ms (rank 0, mean of {} steps, every mode, after the first warm-up epoch): "
      "{:.1f} = "
      "forward "
      "{:.1f} "
      "(aggregation {:.1f}) + backward {:.1f} (aggregation {:.1f}) + all-reduce {:.1f} + "
      "optimizer {:.1f}; thread CPU {:.1f}\n",
      st.steps, 1e3 * st.total_s() / n, 1e3 * st.forward_s / n, 1e3 * st.aggregation_forward_s / n,
      1e3 * st.backward_s / n, 1e3 * st.aggregation_backward_s / n, 1e3 * st.all_reduce_s / n,
      1e3 * st.optimizer_s / n, 1e3 * st.thread_cpu_s / n);
  if (!a.json.empty()) write_file_atomic(a.json, j.dump(2) + "\n");
}
#endif

}  // namespace

void add_bench(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Measure dsp's components (JSON with --json)");
  bench->require_subcommand(1);
  auto a = std::make_shared<GatherArgs>();
  auto* g = bench->add_subcommand(
      "gather", "Feature gather bandwidth vs a per-row memcpy loop and a contiguous memcpy");
  g->add_option("PARTITION", a->part_dir, "partition directory (dsp partition)")->required();
  g->add_option("--batch", a->batch, "distinct rows per gather (default 100000)");
  g->add_option("--iters", a->iters, "timed gathers (default 20)");
  g->add_option("--threads", a->threads, "OpenMP threads of the gather (default 1, as the loop)");
  g->add_option("--seed", a->seed, "random seed of the id sets")->check(non_negative_integer());
  g->add_option("--device", a->device, "cpu (default), cuda or cuda:N: where the store gathers to");
  g->add_option("--json", a->json, "write the figures to this file");
  g->callback([a] {
    DSP_CHECK_ARG(a->batch > 0 && a->iters > 0 && a->threads > 0,
                  "--batch, --iters and --threads must be positive");
    run_gather(*a);
  });
  auto sa = std::make_shared<SampleArgs>();
  auto* sp = bench->add_subcommand(
      "sample",
      "Collective sampling throughput (per stage and layer) and bytes moved, CSP vs pull");
  sp->add_option("PARTITION", sa->part_dir, "partition directory (dsp partition)")->required();
  sp->add_option("--fanouts", sa->fanouts, "fanouts from the seeds out (default 15,10,5)");
  sp->add_option("--batch-size", sa->batch_size, "seeds per rank and batch (default 1024)");
  sp->add_option("--batches", sa->batches, "timed batches (default 20)");
  sp->add_option("--mode", sa->mode, "csp (default), pull or both")
      ->check(CLI::IsMember({"csp", "pull", "both"}));
  sp->add_option("--scheme", sa->scheme, "node (default) or layer");
  sp->add_flag("--biased", sa->biased, "weight by edge weight");
  sp->add_flag("--replace", sa->replace, "draw with replacement");
  sp->add_flag("--per-layer-bytes", sa->per_layer_bytes,
               "also measure the bytes of every layer (one extra run per layer prefix)");
  sp->add_option("--threads", sa->threads, "OpenMP threads per rank (default 1)");
  sp->add_option("--seed", sa->seed, "sampling seed")->check(non_negative_integer());
  sp->add_option("--device", sa->device, "cpu (default), cuda or cuda:N: the sampler's backend");
  sp->add_option("--topology-memory", sa->topology_memory,
                 "GPU: device memory the neighbour array may take (default: half the free device "
                 "memory); the rest through UVA, hottest rows on the device; 0: all through UVA");
  sp->add_option("--sample-kernel", sa->kernel,
                 "default, or turbo: degree-sorted snake scheduling of tasks (GPU: to warps and "
                 "blocks, shared-memory positions; CPU: to threads)");
  sp->add_option("--json", sa->json, "write the figures to this file");
  sp->callback([sa] {
    DSP_CHECK_ARG(sa->batch_size > 0 && sa->batches > 0 && sa->threads > 0,
                  "--batch-size, --batches and --threads must be positive");
    parse_sample_kernel(sa->kernel);
    run_sample(*sa);
  });
  auto ca = std::make_shared<CacheArgs>();
  auto* cs = bench->add_subcommand(
      "cache",
      "Hit rates of the cache policies vs the optimal oracle on a recorded sampling trace (single "
      "process)");
  cs->add_option("PATH", ca->path, "dataset directory or 1-part partition directory")->required();
  cs->add_option("--ratios", ca->ratios, "cached share of the nodes (default 0.05,0.1,0.2)");
  cs->add_option("--policies", ca->policies,
                 "static policies to score (default in-degree,out-degree,presample,random); BGL's "
                 "dynamic FIFO is always replayed too");
  cs->add_option("--batches", ca->batches, "batches in the trace (default 50)");
  cs->add_option("--fanouts", ca->fanouts, "fanouts from the seeds out (default 15,10,5)");
  cs->add_option("--batch-size", ca->batch_size, "seeds per batch (default 1024)");
  cs->add_option("--presample-epochs", ca->presample_epochs,
                 "K of PreSC#K, or a list (1,2,4: one presample#K policy each; default 1)");
  cs->add_option("--orders", ca->orders,
                 "seed orders to record a trace for: random (default), bfs, or random,bfs");
  cs->add_option("--bfs-sequences", ca->bfs_sequences,
                 "order bfs: BFS sequences interleaved per epoch (default 4)");
  cs->add_option("--threads", ca->threads, "OpenMP threads (default 1)");
  cs->add_option("--seed", ca->seed, "seed of the trace (presampling and random use others)")
      ->check(non_negative_integer());
  cs->add_option("--json", ca->json, "write the figures to this file");
  cs->callback([ca] {
    DSP_CHECK_ARG(ca->batch_size > 0 && ca->batches > 0 && ca->threads > 0,
                  "--batch-size, --batches and --threads must be positive");
    run_cache(*ca);
  });
#ifdef DSP_HAVE_TRAIN
  auto pa = std::make_shared<PipeArgs>();
  auto* pp = bench->add_subcommand(
      "pipeline",
      "Epoch time of training with the pipeline on vs off, and the per-stage breakdown (run under "
      "mpirun -np P with a P-part partition)");
  pp->add_option("PARTITION", pa->part_dir, "partition directory (dsp partition)")->required();
  pp->add_option("--model", pa->model, "sage (default), gcn or gat");
  pp->add_option("--hidden", pa->hidden, "hidden width (default 256)");
  pp->add_option("--fanouts", pa->fanouts, "fanouts from the seeds out (default 15,10,5)");
  pp->add_option("--batch-size", pa->batch_size, "seeds per rank and step (default 1024)");
  pp->add_option("--modes", pa->modes,
                 "modes to compare, in this order: off, on, auto, roles, roles-switch (GNNLab's "
                 "factored layout without and with dynamic switching; default on,off)");
  pp->add_option("--roles-switch", pa->roles_switch,
                 "roles-switch: on (a sampler trains while its queue is full; default), always or "
                 "never")
      ->check(CLI::IsMember({"on", "always", "never"}));
  pp->add_option("--samplers", pa->samplers,
                 "roles: sampler-only ranks (default 0: GNNLab's rule over a few profiled "
                 "batches)");
  pp->add_option("--repeats", pa->repeats,
                 "run the modes in turn this many times; epoch_s is the median (default 1)");
  pp->add_option("--epochs", pa->epochs, "measured epochs per mode (default 2)");
  pp->add_option("--warmup", pa->warmup, "discarded epochs per mode (default 1)");
  pp->add_option("--max-steps", pa->max_steps,
                 "steps per epoch at most (a random subset of the seeds; 0: all)");
  pp->add_option("--threads", pa->threads, "threads per rank (default cores / ranks)");
  pp->add_option("--backend", pa->backend, "auto (default), self or mpi");
  pp->add_option("--device", pa->device, "cpu (default), cuda or cuda:N");
  pp->add_option("--topology-memory", pa->topology_memory,
                 "GPU: device memory the neighbour array may take (see dsp bench sample)");
  pp->add_option("--seed", pa->seed, "seed of sampling, model and schedule")
      ->check(non_negative_integer());
  pp->add_option("--json", pa->json, "write the figures to this file");
  pp->callback([pa] {
    DSP_CHECK_ARG(pa->batch_size > 0 && pa->hidden > 0 && pa->epochs > 0 && pa->warmup >= 0 &&
                      pa->max_steps >= 0 && pa->threads >= 0 && pa->repeats > 0 &&
                      pa->samplers >= 0,
                  "--batch-size, --hidden, --epochs, --repeats must be positive; --warmup, "
                  "--max-steps, --threads, --samplers >= 0");
    run_pipeline_bench(*pa);
  });
#endif
}

}  // namespace dsp::cli
