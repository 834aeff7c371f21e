#include "commands.hpp"
#include "core/error.hpp"
#include "train/predict.hpp"

namespace dsp::cli {
namespace {

void add_inference_command(CLI::App& app, bool embed) {
  auto* sub = app.add_subcommand(
      embed ? "embed" : "predict",
      embed ? "Export every node's embedding (or the nodes of --nodes) from a model dsp train "
              "wrote: full-neighbour layer-wise inference, each rank its part's nodes (run under "
              "mpirun -np P like dsp train); embeddings.npy in the dataset's own node ids"
            : "Predict every node's class (or the nodes of --nodes) with a model dsp train wrote: "
              "full-neighbour layer-wise inference, each rank its part's nodes (run under mpirun "
              "-np P like dsp train); predictions.npy (and probabilities or logits) in the "
              "dataset's own node ids");
  struct Args {
    PredictConfig cfg;
    OptionTable<PredictConfig> table;
    std::unique_ptr<TableFlags<PredictConfig>> flags;
  };
  auto a = std::make_shared<Args>();
  if (embed) a->cfg.output = PredictOutput::kEmbedding;
  a->table = predict_options_table(embed);
  sub->add_option("PATH", a->cfg.rank.path,
                  "dataset directory (partitioned on the fly, one part per rank) or partition "
                  "directory")
      ->required();
  a->flags = std::make_unique<TableFlags<PredictConfig>>(sub, a->table);
  sub->callback([a] {
    a->flags->apply(a->cfg);
    run_predict(a->cfg);
  });
}

}  // namespace

void add_predict(CLI::App& app) {
  add_inference_command(app, false);
  add_inference_command(app, true);
}

}  // namespace dsp::cli
