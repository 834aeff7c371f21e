#pragma once
// The loader stage (DSP section 2.4): the features of a sampled batch's input nodes, gathered
// through the feature store (hot rows from their owners' caches, cold rows from the mapping), and
// the labels of its seeds. Collective through `store` (every rank calls it for the same batch).
#include "csp/block.hpp"
#include "graph/array.hpp"
#include "layout/store/feature_store.hpp"

namespace dsp {

// float16 feature files are widened to float32. `store` may be null (no features: x is empty);
// `labels` may be undefined (no labels: y is empty).
LoadedBatch load_batch(SampledBatch&& sb, FeatureStore* store, const Array& labels);

}  // namespace dsp
