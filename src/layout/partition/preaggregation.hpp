#pragma once
// PaGraph's first-layer pre-aggregation (dsp partition --preaggregate, dsp train --preaggregate):
// which aggregate of a node's whole in-neighbourhood preaggregated_<kind>.npy holds. mean: the
// neighbour mean of SAGEConv; gcn: the GCN layer's normalised sum (partition.hpp states both).
#include "core/choice.hpp"

namespace dsp {

enum class Preaggregation { kMean, kGcn };
const Names<Preaggregation>& names_of(Preaggregation);  // mean, gcn

}  // namespace dsp
