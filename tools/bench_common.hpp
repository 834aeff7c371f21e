#pragma once
// What the subcommands of `dsp bench` share: each is its options' table (declared with the module
// it measures) as flags, one positional path, validate(), then the run (tools/bench_*.cpp).
#include <algorithm>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/bench_memory.hpp"
#include "commands.hpp"
#include "core/fs.hpp"
#include "core/memory.hpp"
#include "pipeline/rank/runtime.hpp"

namespace dsp {
struct TrainConfig;  // train/config.hpp
}  // namespace dsp

namespace dsp::cli {

// A bench's own options (declared with the module it measures) and the rank options it takes
// (--device, --topology-memory: declared once, by the rank room, pipeline/rank/options.hpp).
template <class C>
struct BenchCommand {
  C cmd;
  RankOptions rank;
};

// The bench's table and the rank room's entries of `rank_keys`, as one table.
template <class C>
OptionTable<BenchCommand<C>> bench_table(const OptionTable<C>& own,
                                         const std::vector<std::string>& rank_keys) {
  using B = BenchCommand<C>;
  OptionTable<B> t = options::embed_all<B>(own, [](B& b) -> C& { return b.cmd; });
  for (const std::string& k : rank_keys) {
    t.push_back(options::embed<B>(options::find(rank_options_table(), k),
                                  [](B& b) -> RankOptions& { return b.rank; }));
  }
  return t;
}

// A bench subcommand of `bench`: POSITIONAL (required) into `C::*path`, every option of `table`
// and the rank options of `rank_keys` as flags; its callback applies the flags, validates the
// bench's options and runs (the rank's are validated by the rank it builds).
template <class C>
void add_bench_command(CLI::App* bench, const std::string& name, const std::string& help,
                       const std::string& positional, const std::string& positional_help,
                       std::string C::*path, const OptionTable<C>& table,
                       const std::vector<std::string>& rank_keys,
                       std::function<void(const C&, const RankOptions&)> run) {
  using B = BenchCommand<C>;
  struct Args {
    B cmd;
    OptionTable<B> table;
    std::unique_ptr<TableFlags<B>> flags;
  };
  auto a = std::make_shared<Args>();
  a->table = bench_table(table, rank_keys);
  auto* sub = bench->add_subcommand(name, help);
  sub->add_option(positional, a->cmd.cmd.*path, positional_help)->required();
  a->flags = std::make_unique<TableFlags<B>>(sub, a->table);
  sub->callback([a, run] {
    a->flags->apply(a->cmd);
    a->cmd.cmd.validate();
    run(a->cmd.cmd, a->cmd.rank);
  });
}

// The rank a bench runs as: its rank options on `path` with `threads`.
inline RankOptions bench_rank(const std::string& path, int threads, const RankOptions& rank) {
  RankOptions ro = rank;
  ro.path = path;
  ro.threads = threads;
  ro.log_name = "bench";
  return ro;
}

// The budget a bench's rank plans against: --memory-budget, or 3/4 of the memory available
// shared by the node's ranks.
inline uint64_t bench_budget(const RankRuntime& rt) {
  return rt.options().budget_or(default_memory_budget() /
                                static_cast<uint64_t>(std::max(rt.cores().node_size, 1)));
}

// --json: the figures, written atomically (when a file was given).
inline void write_figures(const std::string& file, const nlohmann::json& j) {
  if (!file.empty()) write_file_atomic(file, j.dump(2) + "\n");
}

void add_bench_gather(CLI::App* bench);
void add_bench_sample(CLI::App* bench);
void add_bench_cache(CLI::App* bench);
#ifdef DSP_HAVE_TRAIN
void add_bench_pipeline(CLI::App* bench);
#endif
// The trainer's configuration of the benches that train (bench_pipeline.cpp, bench_project.cpp):
// `model` of width `hidden` over the partition's features and classes, one layer per fanout, on
// the rank's device and threads.
TrainConfig bench_train_config(const std::string& model, int hidden, uint64_t seed, RankRuntime& rt,
                               const std::vector<int>& fanouts);

}  // namespace dsp::cli
