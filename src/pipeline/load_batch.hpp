#pragma once
// The loader stage (DSP section 2.4): the features of a sampled batch's input nodes, gathered
// through the feature store (hot rows from their owners' caches, cold rows from the mapping), and
// the labels of its seeds. Collective through `store` (every rank calls it for the same batch).
#include "csp/block.hpp"
#include "graph/array.hpp"
#include "layout/partition/partition.hpp"
#include "layout/store/feature_store.hpp"

namespace dsp {

// float16 feature files are widened to float32. `store` may be null (no features: x is empty);
// `labels` may be undefined (no labels: y is empty).
LoadedBatch load_batch(SampledBatch&& sb, FeatureStore* store, const Array& labels);

// A heterogeneous partition's batch (blocks over union ids with src_types): per node type t the
// positions of its input nodes among blocks[0]'s sources (typed_rows[t]) and, when stores[t] is
// set (one store per type with features, over hetero_type_view), their rows gathered by type id
// (HeteroLayout::type_index) into typed_features[t] (float32, host), typed_dims[t] its width (0
// without a store). Collective: one gather round for all the stores (gather_stores: three
// collectives per batch whatever the number of featured types), stores in type order on every
// rank, an empty request too. `features` stays empty; labels as load_batch's.
LoadedBatch load_hetero_batch(SampledBatch&& sb, const HeteroLayout& layout,
                              const std::vector<FeatureStore*>& stores, const Array& labels);

}  // namespace dsp
