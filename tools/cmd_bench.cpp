// `dsp bench`: measurements, never timed tests. Each prints a table and can write JSON. One file
// per bench (tools/bench_*.cpp: the CLI); what they measure is in the module measured.
#include "bench_common.hpp"
#include "commands.hpp"

namespace dsp::cli {

void add_bench_project(CLI::App* bench);  // tools/bench_project.cpp

void add_bench(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Measure dsp's components (JSON with --json)");
  bench->require_subcommand(1);
  add_bench_gather(bench);
  add_bench_sample(bench);
  add_bench_cache(bench);
  add_bench_project(bench);
#ifdef DSP_HAVE_TRAIN
  add_bench_pipeline(bench);
#endif
}

}  // namespace dsp::cli
