// `dsp bench`: measurements, never timed tests. Each prints a table and can write JSON.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "ccc/communicator.hpp"
#include "commands.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/logging.hpp"
#include "core/rng.hpp"
#include "core/timer.hpp"
#include "csp/presample.hpp"
#include "csp/sampler.hpp"
#include "layout/feature_store.hpp"
#include "layout/partition.hpp"

namespace dsp::cli {
namespace {

struct GatherArgs {
  std::string part_dir, json;
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

void run_gather(const GatherArgs& a) {
  auto comm = make_communicator("auto");
  omp_set_num_threads(a.threads);
  PartitionData part = load_partition(a.part_dir, comm->rank(), comm->size());
  FeatureStore store(part, *comm);
  const int64_t n = store.num_nodes();
  const int64_t batch = std::min(a.batch, n);
  const size_t rb = store.row_bytes();
  const auto* base = static_cast<const unsigned char*>(part.features.raw());
  std::vector<int64_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  uint64_t key = rng_key(a.seed, comm->rank());
  std::vector<unsigned char> out(batch * rb), ref(batch * rb), contig_src(batch * rb, 1);
  // Touch every page of the mapping once so all three loops read from the page cache.
  volatile unsigned char sink = 0;
  for (size_t off = 0; off < part.features.nbytes(); off += 4096) sink = sink + base[off];

  double t_gather = 0, t_loop = 0, t_memcpy = 0;
  for (int it = -2; it < a.iters; ++it) {  // two warm-up rounds
    // Separate id sets for the two loops, so neither reads rows the other just brought in.
    std::vector<int64_t> ids = draw_ids(perm, batch, key, static_cast<uint64_t>(2 * (it + 2)));
    std::vector<int64_t> ids2 = draw_ids(perm, batch, key, static_cast<uint64_t>(2 * (it + 2) + 1));
    comm->barrier();
    Stopwatch sw;
    store.gather(ids.data(), batch, out.data());
    double g = sw.seconds();
    sw.reset();
    for (int64_t i = 0; i < batch; ++i) std::memcpy(ref.data() + i * rb, base + ids2[i] * rb, rb);
    double l = sw.seconds();
    sw.reset();
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
    if (!a.json.empty()) write_file_atomic(a.json, j.dump(2) + "\n");
  }
}

struct SampleArgs {
  std::string part_dir, json, fanouts = "15,10,5", mode = "csp", scheme = "node";
  int64_t batch_size = 1024;
  int batches = 20;
  int threads = 1;
  bool biased = false, replace = false;
  uint64_t seed = 0;
};

std::vector<int> parse_fanouts(const std::string& s) {
  std::vector<int> f;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t c = s.find(',', pos);
    std::string tok = s.substr(pos, c == std::string::npos ? std::string::npos : c - pos);
    try {
      size_t used = 0;
      f.push_back(std::stoi(tok, &used));
      DSP_CHECK_ARG(used == tok.size(), "bad fanout '{}' in '{}'", tok, s);
    } catch (const std::logic_error&) {
      DSP_THROW_T(InvalidArgument, "bad fanout '{}' in '{}' (expected e.g. 15,10,5)", tok, s);
    }
    if (c == std::string::npos) break;
    pos = c + 1;
  }
  return f;
}

// One mode: `batches` timed batches (after one warm-up) of this rank's seeds; figures summed or
// maxed over ranks.
nlohmann::json bench_sample_mode(const SampleArgs& a, const PartitionData& part, Communicator& comm,
                                 SampleMode mode) {
  SamplerOptions o;
  o.fanouts = parse_fanouts(a.fanouts);
  o.scheme = parse_sample_scheme(a.scheme);
  o.biased = a.biased;
  o.replace = a.replace;
  o.seed = a.seed;
  o.mode = mode;
  CollectiveSampler sampler(part, comm, o);
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
  auto comm = make_communicator("auto");
  omp_set_num_threads(a.threads);
  PartitionData part = load_partition(a.part_dir, comm->rank(), comm->size());
  nlohmann::json j = {{"bench", "sample"},
                      {"partition", a.part_dir},
                      {"ranks", comm->size()},
                      {"threads", a.threads},
                      {"fanouts", a.fanouts},
                      {"batch_size", a.batch_size},
                      {"batches", a.batches},
                      {"scheme", a.scheme},
                      {"biased", a.biased},
                      {"replace", a.replace},
                      {"num_nodes", part.meta.num_nodes},
                      {"num_edges", part.meta.num_edges},
                      {"modes", nlohmann::json::array()}};
  std::vector<SampleMode> modes;
  if (a.mode == "both") {
    modes = {SampleMode::kCsp, SampleMode::kPull};
  } else {
    modes = {parse_sample_mode(a.mode)};
  }
  for (SampleMode m : modes) j["modes"].push_back(bench_sample_mode(a, part, *comm, m));
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
  }
  if (modes.size() == 2) {
    double c = j["modes"][0]["bytes_per_epoch_extrapolated"].get<double>();
    double p = j["modes"][1]["bytes_per_epoch_extrapolated"].get<double>();
    j["csp_bytes_over_pull"] = p > 0 ? c / p : 0.0;
    fmt::print("  CSP moves {:.3f} of pull's bytes\n", p > 0 ? c / p : 0.0);
  }
  if (!a.json.empty()) write_file_atomic(a.json, j.dump(2) + "\n");
}

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
  g->add_option("--seed", a->seed, "random seed of the id sets");
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
  sp->add_option("--threads", sa->threads, "OpenMP threads per rank (default 1)");
  sp->add_option("--seed", sa->seed, "sampling seed");
  sp->add_option("--json", sa->json, "write the figures to this file");
  sp->callback([sa] {
    DSP_CHECK_ARG(sa->batch_size > 0 && sa->batches > 0 && sa->threads > 0,
                  "--batch-size, --batches and --threads must be positive");
    run_sample(*sa);
  });
}

}  // namespace dsp::cli
