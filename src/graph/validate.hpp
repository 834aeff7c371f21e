#pragma once
// Content checks that every loader runs on the arrays it maps (load_dataset, hence `dsp info`,
// `dsp partition` and the Python module; load_partition, hence `dsp train` and dsp.Loader). Each
// is one streaming pass over its array, split over the OpenMP threads (rows in pieces of about
// equal entries, so a skewed degree distribution does not leave one thread with most of the
// work): validating a dataset costs about one read of it. Each drops the pages of a mapped array
// as it finishes a piece of it (Array::release_pages), so validating a dataset larger than memory
// leaves little of it resident; a later read maps the pages again. Each throws FormatError naming
// the file and the first fault.
#include <cstdint>
#include <string>

#include "graph/array.hpp"
#include "graph/csr.hpp"

namespace dsp {

// Row pointers: int64 [rows + 1] from 0, never decreasing, ending at `entries`.
void check_indptr(const Array& indptr, int64_t entries, const std::string& indptr_file);

// Labels int64 [N]: each in [-1, num_classes) (-1: unlabeled).
void check_labels(const Array& labels, int64_t num_classes, const std::string& labels_file);
// The dtype and shape of labels.npy: int64 [num_nodes] (label_columns = 0), or int8
// [num_nodes, label_columns] for a multi-label dataset; a file of the other kind is refused
// naming what `meta_file` (dataset.json, or a partition's partition.json) says.
void check_label_layout(const Array& labels, int64_t num_nodes, int64_t label_columns,
                        const std::string& labels_file, const char* meta_file = "dataset.json");
// Multi-label rows int8 [N, L]: each 0/1, or the whole row -1 (unlabeled).
void check_label_rows(const Array& labels, const std::string& labels_file);

// The rows of a CSR: indptr int64 [rows + 1], already checked monotone from 0 to indices' length;
// indices int32 or int64. Every entry must be an id in [0, num_ids), and every row strictly
// increasing: sorted, no neighbour twice (the format's promise, which samplers rely on). Faults
// name the row as `first_row + r` (its node id).
void check_csr_rows(const Array& indptr, const Array& indices, int64_t num_ids, int64_t first_row,
                    const std::string& indices_file);

// Edge weights (float32, one per entry of the CSR whose indptr is given): finite and >= 0, as
// biased sampling draws neighbours in proportion to them.
void check_edge_weights(const Array& weights, const Array& indptr, int64_t first_row,
                        const std::string& weights_file);

// Edge times: int64 [entries], one per entry of the CSR (aligned with its indices as edge weights
// are). Any int64 is a time; FormatError naming the file for another dtype or shape.
void check_edge_times(const Array& times, int64_t entries, const std::string& times_file);

// Node times: int64 [num_nodes], a node's own time (the seed time of node classification).
void check_node_times(const Array& times, int64_t num_nodes, const std::string& times_file);

// Rows [begin, end) of a float32 or float16 feature matrix [N, F]: every value finite (no NaN,
// no infinity).
void check_finite_features(const Array& features, int64_t begin, int64_t end,
                           const std::string& features_file);

// Node pairs of a link-prediction file, int64 [M, 2] (src, dst), already checked for shape: every
// id in [0, num_ids), and by `rule` against the in-neighbour CSR `g` (ignored for kAny): kInGraph,
// each pair an entry of g (row dst lists src); kNotInGraph, no pair an entry of g, nor its reverse
// when `both_directions`. FormatError naming the file, the row and the pair.
enum class LinkRule { kAny, kInGraph, kNotInGraph };
void check_link_pairs(const Array& pairs, int64_t num_ids, const Csr* g, LinkRule rule,
                      bool both_directions, const std::string& pairs_file);

// Whether the in-neighbour row `dst` of g lists `src` (binary search of the sorted row).
bool csr_has_entry(const Csr& g, int64_t src, int64_t dst);

}  // namespace dsp
