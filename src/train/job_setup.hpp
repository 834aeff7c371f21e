#pragma once
// What a job builds from its options and its data before it trains: the data's fitness for the
// task, the model's configuration (input width with the learnt columns, output width, loss and
// metric as resolved, a typed graph's types and relations) and the learnable embeddings'
// rows. Torch-free.
#include <cstdint>
#include <memory>

#include "layout/store/embedding_table.hpp"
#include "pipeline/rank/runtime.hpp"
#include "train/config.hpp"
#include "train/job.hpp"
#include "train/metrics.hpp"
#include "train/trainer.hpp"

namespace dsp {

// FormatError naming the partition when it lacks what the task needs (features or learnt
// columns, labels and training ids; link prediction's training and held-out edges), and
// InvalidArgument for a model or --hits-k/--recall-k that the graph cannot take.
void check_job_data(const JobConfig& cfg, const RankRuntime& rt);

// --embedding-dim as resolved: the given width, else the hidden width where nodes have no
// features (a typed graph: where any type has none), else 0.
int64_t job_embedding_dim(const JobConfig& cfg, const RankRuntime& rt);

// The trainer's configuration: the options' model with the data's widths, the loss (--loss auto:
// ce for classes, bce for multi-label or link pairs) and --metric as resolved into `metric`
// (node tasks), the feature statistics of --normalize-features standard; the rank's learnt rows
// checked against its memory before anything is allocated.
TrainConfig job_train_config(const JobConfig& cfg, RankRuntime& rt, MetricKind* metric);

// The rank's rows of the learnable embeddings (tc.model.embedding_dim > 0), attached to the
// trainer: every node's (homogeneous) or the featureless types' nodes' (typed); said once.
std::unique_ptr<EmbeddingTable> make_job_embedding(const JobConfig& cfg, RankRuntime& rt,
                                                   Trainer& trainer, const TrainConfig& tc);

}  // namespace dsp
