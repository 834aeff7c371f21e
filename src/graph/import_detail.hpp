#pragma once
// Internal to the OGB importers (src/graph/import*.cpp): the pieces the in-memory path
// (import_ogb_raw) and the out-of-core one (import_ogb_to_dir) share, so that both read and check
// the input with the same errors and describe it with the same metadata.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "graph/dataset.hpp"
#include "graph/import.hpp"

namespace dsp::detail {

// An OGB raw directory whose edge file was found and whose counts were read.
struct OgbRaw {
  std::filesystem::path root;  // the dataset folder (raw/'s parent when given raw/)
  std::filesystem::path raw;   // the folder holding the CSV files
  std::string edge_file, nodes_file, edges_file;
  int64_t num_nodes = 0, num_edges = 0;  // num-node-list, num-edge-list
};

// Locates the files of `dir` (the dataset root or raw/ itself) and reads the counts. IoError for a
// missing directory, edge or count file; FormatError for a bad count or 0 nodes.
OgbRaw open_ogb_raw(const std::string& dir);

// raw/<stem>.csv.gz, or raw/<stem>.csv; "" when neither exists.
std::string find_ogb_csv(const OgbRaw& in, const std::string& stem);

// The edge file's checks once it is parsed: two columns, and as many edges as num-edge-list says.
void check_ogb_edges(const OgbRaw& in, bool weighted, int64_t edges);

// Streams node-feat (float32 rows): fn(values, dim) with the whole rows of each piece of the file.
// The width is the first line's field count and every later line must match it; FormatError
// unless the file has exactly `num_nodes` rows (checked at the end). Returns the width.
int64_t stream_ogb_features(const std::string& file, int64_t num_nodes,
                            const std::function<void(const std::vector<float>&, int64_t)>& fn);

// The O(N) node data: labels (when node-label exists; NaN -> -1) and the split's train, valid and
// test ids into `ds`. Returns the split's name ("" when there is none and !opts.require_split).
std::string read_ogb_labels_and_split(const OgbRaw& in, const OgbImportOptions& opts, Dataset& ds);

// The metadata that does not depend on the arrays: name, directedness and provenance (importer,
// source, split, input_edges).
DatasetMeta ogb_meta(const OgbRaw& in, const OgbImportOptions& opts, const std::string& split);

}  // namespace dsp::detail
