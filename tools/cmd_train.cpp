#include <cstdlib>

#include "commands.hpp"
#include "lists.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/memory.hpp"
#include "train/job.hpp"

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
    JobConfig c;
    std::string config_file, result_file, fanouts, eval_fanouts, pipeline = "auto", ccc = "on";
    std::string roles, topology_memory;
    bool no_progress = false;
  };
  auto a = std::make_shared<Args>();
  sub->add_option("PATH", a->c.path, "partition directory (dsp partition) or dataset directory");
  sub->add_option("--config", a->config_file,
                  "JSON file with any of the options below (keys as the long flags, '-' -> '_'); "
                  "flags given on the command line override it");
  sub->add_option("--model", a->c.train.model.model, "sage (default), gcn or gat");
  sub->add_option("--hidden", a->c.train.model.hidden, "hidden width (GAT: per head; default 128)");
  sub->add_option("--fanouts", a->fanouts,
                  "neighbours sampled per node, from the seeds out; one per layer (default "
                  "15,10,5)");
  sub->add_option("--layers", a->c.layers, "number of layers (default: one per fanout)");
  sub->add_option("--eval-fanouts", a->eval_fanouts, "fanouts for evaluation (default: --fanouts)");
  sub->add_option("--batch-size", a->c.batch_size, "training seeds per rank per step (default 1024)");
  sub->add_option("--epochs", a->c.epochs, "epochs (default 10)");
  sub->add_option("--max-steps", a->c.max_steps,
                  "train at most N steps per epoch: the first N batches of the epoch's shuffled "
                  "order, the same count on every rank (default 0: the whole epoch)");
  sub->add_option("--lr", a->c.train.lr, "learning rate (default 0.01)");
  sub->add_option("--weight-decay", a->c.train.weight_decay, "weight decay (default 5e-4)");
  sub->add_option("--optimizer", a->c.train.optimizer, "adam (default) or sgd");
  sub->add_option("--dropout", a->c.train.model.dropout, "dropout (default 0.5)");
  sub->add_option("--heads", a->c.train.model.heads, "GAT heads of hidden layers (default 1)");
  sub->add_option("--cache-policy", a->c.cache_policy,
                  "override the partition's cache: in-degree, random or none");
  sub->add_option("--cache-ratio", a->c.cache_ratio, "override the share of nodes cached, [0, 1]");
  sub->add_flag("--cache-auto", a->c.cache_auto,
                "PaGraph: size the cache after the first batch from the memory left (host: "
                "--cache-memory or the available memory; GPU: free device memory) minus the "
                "batches in flight; the policy must be in-degree, random or none");
  sub->add_option("--cache-memory", a->c.cache_memory,
                  "--cache-auto: host bytes the cache may take (default: available memory)");
  sub->add_option("--fifo-rows", a->c.fifo_rows,
                  "BGL's dynamic cache: keep this many of the rows other ranks serve per rank, "
                  "first in first out, so a repeat needs no request (default 0: off)");
  sub->add_option("--fifo-shared-rows", a->c.fifo_shared_rows,
                  "with --fifo-rows: a second FIFO level of this many rows in shared memory, "
                  "shared by the ranks of a machine (default 0: none)");
  sub->add_option("--pipeline", a->pipeline,
                  "auto (default: profile the first batches, then pipeline with per-stage core "
                  "shares only where it is faster), on (three workers) or off (stages one after "
                  "another)")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  sub->add_option("--roles", a->roles,
                  "GNNLab's factored layout: this many ranks (the last ones) only sample and load, "
                  "the others only train (default 0: every rank does every stage); auto: GNNLab's "
                  "allocation rule over a profile of a few batches (logged)");
  sub->add_option("--roles-switch", a->c.roles_switch,
                  "with --roles: on = a sampler rank trains a batch itself while its queue is "
                  "full (GNNLab's dynamic switching; the same batches and updates as a symmetric "
                  "job on all ranks), always, never, or off (default: the trainers train one "
                  "batch each per step)")
      ->check(CLI::IsMember({"off", "on", "always", "never"}));
  sub->add_option("--sample-kernel", a->c.sample_kernel,
                  "default, or turbo: tasks degree-sorted and dealt in snake order (TurboGNN): to "
                  "warps and blocks with shared-memory positions on a GPU, to threads on the CPU; "
                  "the same blocks either way");
  sub->add_option("--ccc", a->ccc, "on (default); off shows why the coordinator is needed")
      ->check(CLI::IsMember({"on", "off"}));
  sub->add_option("--eval-every", a->c.eval_every, "evaluate every k epochs (default 1; 0: at the end)");
  sub->add_option("--checkpoint-dir", a->c.checkpoint_dir, "write checkpoint.pt here");
  sub->add_option("--checkpoint-every", a->c.checkpoint_every, "every k epochs (0: at the end)");
  sub->add_flag("--resume", a->c.resume, "continue from --checkpoint-dir/checkpoint.pt");
  sub->add_option("--seed", a->c.seed, "random seed (sampling, dropout, initialisation)")
      ->check(non_negative_integer());
  sub->add_option("--metrics", a->c.metrics_file, "write one JSON record per epoch to this file");
  sub->add_option("--threads", a->c.train.num_threads,
                  "threads per rank (default: the rank's share of its cores)");
  sub->add_option("--device", a->c.train.device,
                  "cpu (default), cuda or cuda:N: each rank takes the GPU of its node rank (+N)");
  sub->add_option("--transport", a->c.transport,
                  "GPU ranks' device buffers (gradients, feature rows): auto (default: nccl with a "
                  "GPU per rank), nccl, or mpi (staged through pinned host memory; ranks may "
                  "share a GPU)")
      ->check(CLI::IsMember({"auto", "nccl", "mpi"}));
  sub->add_option("--topology-memory", a->topology_memory,
                  "GPU ranks: device memory the neighbour array may take, e.g. 8G (default: half "
                  "the free device memory); the rest is read from pinned host memory through UVA, "
                  "hottest rows on the device; 0: all through UVA");
  sub->add_flag("--no-progress", a->no_progress, "no progress bar");
  sub->add_option("--order", a->c.order,
                  "seed order per epoch: random (default, a shuffle) or bfs (BGL's "
                  "proximity-aware order: BFS sequences from random roots, interleaved)")
      ->check(CLI::IsMember({"random", "bfs"}));
  sub->add_option("--bfs-sequences", a->c.bfs_sequences,
                  "order bfs: sequences interleaved per epoch (default 4; fewer: more locality)");
  sub->add_flag("--preaggregate", a->c.preaggregate,
                "sage, gcn: PaGraph's pre-aggregated first layer, from a partition written with "
                "dsp partition --preaggregate (a dataset directory is partitioned so): the input "
                "layer's fanout (the last) is not sampled, its aggregation covers every "
                "in-neighbour");
  sub->add_option("--result", a->result_file,
                  "write the job's result (best_val_acc, test_acc_at_best, final_loss, ...) as "
                  "JSON to this file (rank 0)");
  sub->callback([a, sub] {
    JobConfig c;
    if (!a->config_file.empty()) {
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(read_file(a->config_file));
      } catch (const nlohmann::json::exception& e) {
        DSP_THROW_T(FormatError, "{}: not valid JSON ({})", a->config_file, e.what());
      }
      c = JobConfig::from_json(j, a->config_file);
    }
    // Flags given explicitly override the config file.
    auto given = [&](const char* name) { return sub->count(name) > 0; };
    if (given("PATH")) c.path = a->c.path;
    if (given("--model")) c.train.model.model = a->c.train.model.model;
    if (given("--hidden")) c.train.model.hidden = a->c.train.model.hidden;
    if (given("--fanouts")) c.fanouts = parse_int_list(a->fanouts, "--fanouts");
    if (given("--layers")) c.layers = a->c.layers;
    if (given("--eval-fanouts")) c.eval_fanouts = parse_int_list(a->eval_fanouts, "--eval-fanouts");
    if (given("--batch-size")) c.batch_size = a->c.batch_size;
    if (given("--epochs")) c.epochs = a->c.epochs;
    if (given("--max-steps")) c.max_steps = a->c.max_steps;
    if (given("--lr")) c.train.lr = a->c.train.lr;
    if (given("--weight-decay")) c.train.weight_decay = a->c.train.weight_decay;
    if (given("--optimizer")) c.train.optimizer = a->c.train.optimizer;
    if (given("--dropout")) c.train.model.dropout = a->c.train.model.dropout;
    if (given("--heads")) c.train.model.heads = a->c.train.model.heads;
    if (given("--cache-policy")) c.cache_policy = a->c.cache_policy;
    if (given("--cache-ratio")) c.cache_ratio = a->c.cache_ratio;
    if (given("--cache-auto")) c.cache_auto = a->c.cache_auto;
    if (given("--cache-memory")) c.cache_memory = a->c.cache_memory;
    if (given("--fifo-rows")) c.fifo_rows = a->c.fifo_rows;
    if (given("--fifo-shared-rows")) c.fifo_shared_rows = a->c.fifo_shared_rows;
    if (given("--pipeline")) c.pipeline = a->pipeline;
    if (given("--ccc")) c.ccc = a->ccc == "on";
    if (given("--roles")) {
      if (a->roles == "auto") {
        c.roles = JobConfig::kRolesAuto;
      } else {
        char* end = nullptr;
        const long n = std::strtol(a->roles.c_str(), &end, 10);
        DSP_CHECK_ARG(!a->roles.empty() && *end == '\0' && n >= 0 && n < (1 << 20),
                      "--roles must be auto or a number of sampler-only ranks, got '{}'", a->roles);
        c.roles = static_cast<int>(n);
      }
    }
    if (given("--roles-switch")) c.roles_switch = a->c.roles_switch;
    if (given("--eval-every")) c.eval_every = a->c.eval_every;
    if (given("--checkpoint-dir")) c.checkpoint_dir = a->c.checkpoint_dir;
    if (given("--checkpoint-every")) c.checkpoint_every = a->c.checkpoint_every;
    if (given("--resume")) c.resume = true;
    if (given("--seed")) c.seed = a->c.seed;
    if (given("--metrics")) c.metrics_file = a->c.metrics_file;
    if (given("--threads")) c.train.num_threads = a->c.train.num_threads;
    if (given("--order")) c.order = a->c.order;
    if (given("--sample-kernel")) c.sample_kernel = a->c.sample_kernel;
    if (given("--bfs-sequences")) c.bfs_sequences = a->c.bfs_sequences;
    if (given("--preaggregate")) c.preaggregate = true;
    if (given("--device")) c.train.device = a->c.train.device;
    if (given("--transport")) c.transport = a->c.transport;
    if (given("--topology-memory")) {
      c.topology_memory =
          static_cast<int64_t>(parse_bytes("--topology-memory", a->topology_memory));
    }
    if (a->no_progress) c.progress = false;
    DSP_CHECK_ARG(!c.path.empty(), "give a partition or dataset directory (PATH or 'path' in --config)");
    JobResult r = run_training(c);
    if (!a->result_file.empty() && launcher_rank() == 0) {
      write_file_atomic(a->result_file, r.to_json().dump(2) + "\n");
    }
  });
}
}  // namespace dsp::cli
