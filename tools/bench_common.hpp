#pragma once
// What the subcommands of `dsp bench` share: each is its options' table (declared with the module
// it measures) as flags, one positional path, validate(), then the run (tools/bench_*.cpp).
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.hpp"
#include "core/fs.hpp"
#include "core/memory.hpp"
#include "pipeline/rank/runtime.hpp"

namespace dsp::cli {

// A bench subcommand of `bench`: POSITIONAL (required) into `C::*path`, every option of `table`
// as a flag; its callback applies the flags, validates and runs.
template <class C>
void add_bench_command(CLI::App* bench, const std::string& name, const std::string& help,
                       const std::string& positional, const std::string& positional_help,
                       std::string C::*path, const OptionTable<C>& table,
                       std::function<void(const C&)> run) {
  struct Args {
    C cmd;
    std::unique_ptr<TableFlags<C>> flags;
  };
  auto a = std::make_shared<Args>();
  auto* sub = bench->add_subcommand(name, help);
  sub->add_option(positional, a->cmd.*path, positional_help)->required();
  a->flags = std::make_unique<TableFlags<C>>(sub, table);
  sub->callback([a, run] {
    a->flags->apply(a->cmd);
    a->cmd.validate();
    run(a->cmd);
  });
}

// The rank a bench runs as. topology_memory: --topology-memory's text, or empty for the default.
inline RankOptions bench_rank(const std::string& path, int threads, const std::string& device,
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

}  // namespace dsp::cli
