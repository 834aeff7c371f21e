#include "commands.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/logging.hpp"
#include "core/timer.hpp"
#include "csp/presample.hpp"
#include "layout/partition/partition_command.hpp"

namespace dsp::cli {

void add_partition(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "partition",
      "Co-partition a dataset into P parts (one per rank) by --method: METIS, BGL's BFS blocks, "
      "PaGraph's self-reliant parts or a random cut; renumbered so each part owns a contiguous "
      "id range, with each part's training seeds and feature cache list");
  struct Args {
    PartitionCommand cmd;
    std::unique_ptr<TableFlags<PartitionCommand>> flags;
  };
  auto a = std::make_shared<Args>();
  sub->add_option("DATASET", a->cmd.dataset, "dataset directory (dsp convert / dsp generate)")
      ->required();
  sub->add_option("OUT", a->cmd.out, "partition directory to write")->required();
  // Every option from its one declaration (layout/partition/partition_command.hpp).
  a->flags = std::make_unique<TableFlags<PartitionCommand>>(sub, partition_options());
  sub->callback([a] {
    PartitionCommand& cmd = a->cmd;
    a->flags->apply(cmd);
    Stopwatch sw;
    PartitionPlan plan;
    const PartitionMeta m = run_partition(cmd, presample_hook, &plan);
    if (cmd.dry_run) {
      fmt::print("{}\n", plan.describe(cmd));
      return;
    }
    partition_report(cmd.out, m, true);
    fmt::print("  total {:.2f} s, peak RSS {:.2f} GiB\n", sw.seconds(),
               peak_rss_bytes() / 1073741824.0);
  });
}

}  // namespace dsp::cli
