#include <cstdlib>
#include <map>

#include "commands.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/lists.hpp"
#include "core/memory.hpp"
#include "train/job.hpp"
#include "train/job_options.hpp"

namespace dsp::cli {
namespace {
// This process's rank as its MPI launcher numbers it (0 without one), known before MPI starts.
int launcher_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}) {
    if (const char* r = std::getenv(v)) return std::atoi(r);
  }
  return 0;
}

}  // namespace

void add_train(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "train",
      "Train a GNN (GraphSAGE, GCN, GAT) with collective sampling and the three-worker pipeline. "
      "Run under mpirun -np P with a P-part partition directory, or on a dataset directory "
      "(partitioned on the fly into one part per rank)");
  struct Args {
    std::string path, config_file, result_file;
    std::unique_ptr<TableFlags<JobConfig>> flags;
  };
  auto a = std::make_shared<Args>();
  sub->add_option("PATH", a->path, "partition directory (dsp partition) or dataset directory");
  sub->add_option("--config", a->config_file,
                  "JSON file with any of the options below (keys as the long flags, '-' -> '_'; "
                  "--metrics: metrics_file); flags given on the command line override it");
  // Every job option from its one declaration (train/job_options.hpp).
  a->flags = std::make_unique<TableFlags<JobConfig>>(sub, job_options());
  sub->add_option("--result", a->result_file,
                  "write the job's result (best_val_acc, test_acc_at_best, final_loss, ...) as "
                  "JSON to this file (rank 0)");
  sub->callback([a, sub] {
    JobConfig c;
    std::set<std::string> given;  // keys the user set: --resume checks them against the run
    if (!a->config_file.empty()) {
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(read_file(a->config_file));
      } catch (const nlohmann::json::exception& e) {
        DSP_THROW_T(FormatError, "{}: not valid JSON ({})", a->config_file, e.what());
      }
      c = JobConfig::from_json(j, a->config_file);
      for (auto it = j.begin(); it != j.end(); ++it) given.insert(it.key());
    }
    // Flags given explicitly override the config file.
    if (sub->count("PATH")) c.rank.path = a->path;
    a->flags->apply(c);
    for (const std::string& k : a->flags->given_keys()) given.insert(k);
    if (sub->count("PATH")) given.insert("path");
    // --resume continues the recorded run: its options, the given ones checked against them.
    if (c.resume && !c.checkpoint_dir.empty()) c = resume_config(c, given);
    DSP_CHECK_ARG(!c.rank.path.empty(),
                  "give a partition or dataset directory (PATH or 'path' in --config)");
    JobResult r = run_training(c);
    if (!a->result_file.empty() && launcher_rank() == 0) {
      write_file_atomic(a->result_file, r.to_json().dump(2) + "\n");
    }
  });
}
}  // namespace dsp::cli
