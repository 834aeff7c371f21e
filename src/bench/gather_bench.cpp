#include "bench/gather_bench.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "core/timer.hpp"

namespace dsp {
namespace {

using GatherOpts = GatherBenchOptions;

// clang-format off
#define DSP_FIELD(member) [](GatherOpts& c) -> auto& { return c.member; }
// clang-format on

// Distinct ids drawn uniformly: a partial Fisher-Yates over a reused permutation.
std::vector<int64_t> draw_ids(std::vector<int64_t>& perm, int64_t k, uint64_t key, uint64_t round) {
  RngStream s(key, round);
  const int64_t n = static_cast<int64_t>(perm.size());
  for (int64_t i = 0; i < k; ++i) std::swap(perm[i], perm[i + s.uniform_int(n - i)]);
  return std::vector<int64_t>(perm.begin(), perm.begin() + k);
}

// What one measurement holds: the store's output, the loop's reference buffer and the sources.
struct GatherRun {
  FeatureStore& store;
  Communicator& comm;
  const unsigned char* base;  // the features' mapping
  int64_t batch;
  size_t rb;
  std::vector<int64_t> perm;
  uint64_t key;
  std::vector<unsigned char> ref, contig_src;
  std::shared_ptr<void> out;
  std::shared_ptr<void> ids_in_store;  // --resident: a gather's ids in the store's memory
  double t_gather = 0, t_loop = 0, t_memcpy = 0;

  GatherRun(FeatureStore& s, Communicator& c, const Array& features, const GatherOpts& o)
      : store(s),
        comm(c),
        base(static_cast<const unsigned char*>(features.raw())),
        batch(std::min(o.batch, s.format().num_nodes)),
        rb(s.format().row_bytes),
        perm(s.format().num_nodes),
        key(rng_key(o.seed, c.rank())),
        ref(batch * rb),
        contig_src(batch * rb, 1),
        out(s.allocate_rows(batch)) {  // in the store's memory
    if (o.resident) ids_in_store = s.backend().allocate(batch * sizeof(int64_t), nullptr);
    std::iota(perm.begin(), perm.end(), 0);
    // Touch every page of the mapping once so all three loops read from the page cache.
    volatile unsigned char sink = 0;
    for (size_t off = 0; off < features.nbytes(); off += 4096) sink = sink + base[off];
  }

  // One round: the gather and the row loop (alternating which runs first, so neither always meets
  // the caches the id drawing left behind), then the contiguous copy; counted when it >= 0.
  void round(int it) {
    // Separate id sets for the two loops, so neither reads rows the other just brought in.
    std::vector<int64_t> ids = draw_ids(perm, batch, key, static_cast<uint64_t>(2 * (it + 2)));
    std::vector<int64_t> ids2 = draw_ids(perm, batch, key, static_cast<uint64_t>(2 * (it + 2) + 1));
    if (ids_in_store) {
      store.backend().copy_from_host(ids_in_store.get(), ids.data(), batch * sizeof(int64_t));
      settle(ids_in_store.get());
    }
    comm.barrier();
    double g = 0, l = 0;
    for (int k = 0; k < 2; ++k) {
      Stopwatch sw;
      if ((k == 0) == (it % 2 == 0)) {
        if (ids_in_store) {
          store.gather_resident(static_cast<const int64_t*>(ids_in_store.get()), batch, out.get());
        } else {
          store.gather(ids.data(), batch, out.get());
        }
        settle(out.get());
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
    const double m = sw.seconds();
    if (it >= 0) {
      t_gather += g;
      t_loop += l;
      t_memcpy += m;
    }
  }

  // Waits for what was written to `p` (the store's memory): a device backend's copies are
  // stream-ordered, so a one-byte read of it returns when they are done.
  void settle(const void* p) {
    unsigned char b = 0;
    store.backend().copy_to_host(p, 1, &b);
  }
};

}  // namespace

const OptionTable<GatherBenchOptions>& gather_bench_options() {
  static const OptionTable<GatherOpts> table = {
      options::value<GatherOpts>("--batch", "batch", "distinct rows per gather (default 100000)",
                                 DSP_FIELD(batch)),
      options::value<GatherOpts>("--iters", "iters", "timed gathers (default 20)",
                                 DSP_FIELD(iters)),
      options::value<GatherOpts>("--threads", "threads",
                                 "OpenMP threads of the gather (default 1, as the loop)",
                                 DSP_FIELD(threads)),
      options::value<GatherOpts>("--seed", "seed", "random seed of the id sets", DSP_FIELD(seed)),
      options::toggle<GatherOpts>(
          "--resident", "resident",
          "the ids in the store's memory, as a device sampler leaves its blocks' sources and dsp "
          "train gathers them (FeatureStore::gather_resident); uploaded before each gather, "
          "untimed",
          DSP_FIELD(resident)),
      options::value<GatherOpts>("--json", "json", "write the figures to this file",
                                 DSP_FIELD(json)),
  };
  return table;
}
#undef DSP_FIELD

void GatherBenchOptions::validate() const {
  DSP_CHECK_ARG(batch > 0 && iters > 0 && threads > 0,
                "--batch, --iters and --threads must be positive");
}

nlohmann::json measure_gather(FeatureStore& store, Communicator& comm, const Array& features,
                              const GatherBenchOptions& o) {
  GatherRun r(store, comm, features, o);
  for (int it = -2; it < o.iters; ++it) r.round(it);  // two warm-up rounds
  const double bytes = static_cast<double>(r.batch) * r.rb * o.iters;
  const GatherStats& st = store.stats();
  // row_bytes: stored rows (what caches hold and ranks exchange); the gather decodes bfloat16
  // and int8 rows into out_row_bytes of float32.
  return {{"resident", o.resident},
          {"batch_rows", r.batch},
          {"row_bytes", r.rb},
          {"dtype", dtype_name(store.format().dtype)},
          {"out_row_bytes", store.format().out_row_bytes},
          {"bytes_per_gather", st.calls ? st.bytes() / st.calls : 0},
          {"remote_bytes_per_gather", st.calls ? st.bytes_remote_hot / st.calls : 0},
          {"iters", o.iters},
          {"gather_GBps", bytes / r.t_gather / 1e9},
          {"row_loop_GBps", bytes / r.t_loop / 1e9},
          {"contiguous_memcpy_GBps", bytes / r.t_memcpy / 1e9},
          {"gather_vs_row_loop", r.t_loop / r.t_gather},
          {"gather_vs_memcpy", r.t_memcpy / r.t_gather},
          {"hit_rate", st.hit_rate()},
          {"rows_remote_hot", st.rows_remote_hot},
          {"rows_local_hot", st.rows_local_hot},
          {"rows_cold", st.rows_cold}};
}

}  // namespace dsp
