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
    std::vector<int64_t> ids = draw_ids(perm, batch, key, static_cast<uint64_t>(it + 2));
    comm->barrier();
    Stopwatch sw;
    store.gather(ids.data(), batch, out.data());
    double g = sw.seconds();
    sw.reset();
    for (int64_t i = 0; i < batch; ++i) std::memcpy(ref.data() + i * rb, base + ids[i] * rb, rb);
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
  nlohmann::json j = {
      {"bench", "gather"},
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
    fmt::print("  contiguous memcpy        {:8.2f} GB/s   (gather / memcpy = {:.2f}; the ceiling)\n",
               j["contiguous_memcpy_GBps"].get<double>(), j["gather_vs_memcpy"].get<double>());
    fmt::print("  hit rate {:.3f}: remote hot {}, local hot {}, cold {} rows\n", st.hit_rate(),
               st.rows_remote_hot, st.rows_local_hot, st.rows_cold);
    if (!a.json.empty()) write_file_atomic(a.json, j.dump(2) + "\n");
  }
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
}

}  // namespace dsp::cli
