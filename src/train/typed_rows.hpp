#pragma once
// The learnable rows of a heterogeneous partition's featureless node types, shared by the
// training job and dsp predict/embed: one row per node of a type without features, in new id
// order, so that part p's rows are one range (the table's offsets) and a node's row is its
// (part, type) slot's first row plus its place in the slot. The featured types' nodes have none.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "layout/partition/partition.hpp"
#include "layout/store/embedding_table.hpp"

namespace dsp {

class CollectiveSampler;
class RankRuntime;
class Trainer;

struct FeaturelessRows {
  std::vector<int64_t> offsets;   // [P + 1]
  std::vector<int64_t> slot_row;  // [P T]: the row of the slot's first node (-1: featured type)

  FeaturelessRows(const HeteroLayout& h, const std::vector<int64_t>& type_dims);
  int64_t row(const HeteroLayout& h, int64_t v) const {
    const int64_t s = h.slot(v);
    return slot_row[s] + (v - h.bounds[s]);
  }
};

// This rank's table of those rows (each initialised from its node's dataset id, as `eo` says) on
// the trainer channel, attached to `trainer` with the row map; `type_dims` the model's (0: a type
// without features).
std::unique_ptr<EmbeddingTable> attach_typed_rows(RankRuntime& rt, Trainer& trainer,
                                                  const std::vector<int64_t>& type_dims,
                                                  const EmbeddingOptions& eo);

// The outputs of a typed model's first `layers` layers for `seeds` (new ids this rank owns), in
// their order, batch_size seeds a step through `sampler` (every neighbour of every relation: the
// exact full-neighbour outputs, as typed models have no layer-wise pass). Collective: the step
// count is agreed by one all_reduce on the main channel at the step its caller set, then every
// rank runs each step s as (epoch, first_step + s) on the sampler, loader and trainer channels.
// `progress(done, steps)` after each step when given.
std::vector<float> typed_outputs_of(RankRuntime& rt, Trainer& trainer, CollectiveSampler& sampler,
                                    const std::vector<int64_t>& seeds, int layers,
                                    int64_t batch_size, int64_t epoch, int64_t first_step,
                                    const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace dsp
