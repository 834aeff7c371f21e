#pragma once
// Importers from text formats into a Dataset: a plain edge list and the "raw" CSV layout of OGB
// node-property datasets. Files are streamed in large chunks (gzip or plain, detected by zlib) and
// parsed with std::from_chars, so a 62M-line edge list imports in well under a minute.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "graph/dataset.hpp"
#include "graph/hetero.hpp"

namespace dsp {

struct EdgeListOptions {
  int64_t num_nodes = -1;     // -1: max id + 1
  bool undirected = false;    // store both directions (the graph becomes symmetric)
  bool weighted_auto = true;  // a third column becomes edge weights; false: it is ignored
  bool remove_self_loops = false;
  // The 1-based column holding each edge's integer time: 3 ('src dst time [weight]') or 4
  // ('src dst weight time'); 0: no times. A repeated edge keeps its earliest time (graph/csr.hpp).
  int64_t time_column = 0;
};

// InvalidArgument unless `time_column` is 0, 3 or 4 (EdgeListOptions::time_column).
void check_time_column(int64_t time_column);

struct EdgeListData {
  std::vector<int64_t> src, dst;
  std::vector<float> weight;  // empty, or one per edge
  std::vector<int64_t> time;  // empty, or one per edge (a time column)
  int64_t max_id = -1;
};

// Parses `src dst [weight]` lines separated by whitespace and/or commas, with '#' comments (whole
// line or trailing), blank lines and CRLF. Appends to `out`; every line must have the same number
// of columns as the first edge line already in `out`. FormatError "what:line: ..." on a bad token,
// a negative id or a column-count change. `first_line` numbers the first line of `text`.
void parse_edge_list_text(std::string_view text, EdgeListData& out, const std::string& what,
                          int64_t first_line = 1);

// Parses comma-separated rows of exactly `expected_cols` numbers, appending them row-major to
// `out` (T = int64_t or float). For float an empty field reads as NaN (how pandas writes missing
// values). FormatError "what:line: ..." naming the fault.
template <class T>
void parse_csv_numbers(std::string_view text, int64_t expected_cols, std::vector<T>& out,
                       const std::string& what, int64_t first_line = 1);
extern template void parse_csv_numbers<int64_t>(std::string_view, int64_t, std::vector<int64_t>&,
                                                const std::string&, int64_t);
extern template void parse_csv_numbers<float>(std::string_view, int64_t, std::vector<float>&,
                                              const std::string&, int64_t);

// Streams a text file, gzip-compressed or plain, calling fn(text, first_line) with consecutive
// pieces that each end at a line boundary (a line split across reads is carried over). Returns
// the number of lines. IoError if the file is missing, unreadable or a corrupt gzip stream.
int64_t for_each_text_chunk(const std::string& path,
                            const std::function<void(std::string_view, int64_t)>& fn,
                            size_t chunk_bytes = size_t{16} << 20);

// Wall-clock split of an import, for `dsp convert`.
struct ImportStats {
  double parse_s = 0;  // reading and parsing the text files
  double build_s = 0;  // building the CSR
  int64_t input_edges = 0;
  int sort_runs = -1;  // out of core: the sorted runs spilled to disk (-1: in memory)
};

// Imports an edge list (src -> dst per line). Ids >= opts.num_nodes (when given) are an error
// naming the line. Repeated edges are merged (with a time column: keeping the earliest time).
Dataset import_edge_list(const std::string& path, const EdgeListOptions& opts,
                         const std::string& name, ImportStats* stats = nullptr);

struct OgbImportOptions {
  std::string split;          // "" = the only (or alphabetically first) folder under raw/split
  bool require_split = true;  // false: a directory without raw/split imports with no splits
  bool undirected = true;     // OGB node datasets list each undirected edge once
  std::string name;           // "" = the dataset folder's name
};

// Imports an OGB node-property dataset in its raw CSV layout; `dir` is the dataset root holding
// raw/, or raw/ itself. Uses edge.csv.gz, num-node-list.csv.gz, num-edge-list.csv.gz and, when
// present, node-feat.csv.gz (float32), node-label.csv.gz (NaN -> -1), and split/<name>/ with
// train, valid and test (all three required; no split folder is an error unless
// !require_split).
Dataset import_ogb_raw(const std::string& dir, const OgbImportOptions& opts,
                       ImportStats* stats = nullptr);

// Imports an OGB link-property dataset: the graph, features (and labels if any) from raw/ as
// import_ogb_raw reads them (opts.require_split is about the link split here), and the link
// split from <root>/split/<name>/ (`name`: opts.split, else the only or alphabetically first
// folder): train_edge, valid_edge, test_edge int64 [E, 2] and valid_edge_neg, test_edge_neg
// [M, 2], each as .npy (int64 or int32) or .csv(.gz) "src,dst" lines, every one optional but a
// held-out file needs its negatives. Without train_edge the graph's distinct edges are the
// training edges. The graph is edge.csv (the training graph, as OGB ships it), symmetrized when
// opts.undirected. Faults name the split file, its row and the pair (an id out of range, a
// training edge not in the graph, a held-out edge in it).
Dataset import_ogb_link(const std::string& dir, const OgbImportOptions& opts,
                        ImportStats* stats = nullptr);

struct OgbHeteroImportOptions {
  std::string split;          // "" = the only (or alphabetically first) scheme under split/
  bool require_split = true;  // false: no split/ imports with no train, valid or test ids
  bool add_reverse = false;   // add_reverse_relations after reading
  std::string name;           // "" = the dataset folder's name
};

// Imports an OGB heterogeneous node-property dataset (ogbn-mag) in its raw CSV layout; `dir` is
// the dataset root holding raw/ (and split/), or raw/ itself:
//   raw/num-node-dict.csv.gz       a header row of node type names, one row of their counts
//   raw/triplet-type-list.csv.gz   optional: "src,name,dst" per line, the relations; without it,
//                                  every folder under raw/relations is one
//   raw/relations/<src>___<name>___<dst>/edge.csv.gz   "src,dst" per line, type-local ids
//                                  (num-edge-list.csv.gz beside it, when present, must agree)
//   raw/node-feat/<type>/node-feat.csv.gz             optional per type, float32 rows
//   raw/node-label/<type>/node-label.csv.gz           the target type (one): a label per line
//   split/<scheme>/<type>/{train,valid,test}.csv.gz   ids of the target type (or raw/split/...)
// Node types come in name order and relations in key order, as OGB reads them. Relations are
// directed as listed. Faults name the file and line: an id outside its type's count, a relation
// whose type num-node-dict does not list, a wrong column count.
HeteroDataset import_ogb_hetero(const std::string& dir, const OgbHeteroImportOptions& opts,
                                ImportStats* stats = nullptr);

// Node times (node_time.npy) read from `path`: a .npy of int64 or int32 [num_nodes], or a text file
// (optionally gzip) of one integer per line, num_nodes lines. FormatError naming the file (and
// line) for a value that is not an integer or a count that is not num_nodes.
Array read_node_times(const std::string& path, int64_t num_nodes);
// Node features for an edge list (dsp convert --features): a .npy of float32 or float16 [N, F],
// read into memory. FormatError naming the file for another dtype or shape; with num_nodes >= 0,
// for N != num_nodes.
Array read_node_features(const std::string& path, int64_t num_nodes);

// ---------------------------------------------------------------- memory planning, streaming

// What the start of an edge list says about the whole: an estimate of its edge count (from the
// file's size, or gzip's recorded size, over the first MiB's mean line length), the largest id
// in that sample, and whether lines carry a weight.
struct EdgeListSample {
  int64_t edges = 0;
  int64_t max_id = -1;
  bool weighted = false;
};
EdgeListSample sample_edge_list(const std::string& path, int64_t time_column = 0);
// Peak memory of import_edge_list + write_dataset for such a file.
uint64_t estimate_edge_list_memory(const EdgeListSample& sample, const EdgeListOptions& opts);
// Peak memory of import_ogb_raw (from the node and edge counts and the feature width); 0 when
// the count files are missing (the importer then names them).
uint64_t estimate_ogb_memory(const std::string& dir);
// The least memory import_ogb_to_dir needs: edge_list_out_of_core_bytes() and the per-node data
// it holds (labels, split ids).
uint64_t ogb_out_of_core_bytes(const std::string& dir);

// Parses an edge list a chunk at a time, with import_edge_list's checks (ids below
// opts.num_nodes, one column count throughout), calling fn with each chunk's edges.
void stream_edge_list(const std::string& path, const EdgeListOptions& opts,
                      const std::function<void(const EdgeListData&)>& fn);

struct OutOfCoreImportOptions {
  uint64_t memory_budget = 0;      // the sort buffer is what this leaves
  uint64_t sort_buffer_bytes = 0;  // cap on the sort buffer (0: none)
  bool overwrite = false;
};
// The least memory import_edge_list_to_dir needs (parse buffers, smallest sort buffer).
uint64_t edge_list_out_of_core_bytes();

// import_edge_list + write_dataset out of core: edges go through an external sort whose runs
// live in the output's staging directory; the files are identical to the in-memory path's.
// Node ids must be below 2^32 - 1. Returns the metadata written.
DatasetMeta import_edge_list_to_dir(const std::string& path, const EdgeListOptions& opts,
                                    const std::string& name, const std::string& dir,
                                    const OutOfCoreImportOptions& w, ImportStats* stats = nullptr);

// import_ogb_raw + write_dataset out of core: edge.csv streams through the external sort (as
// above), node-feat straight into features.npy a piece at a time; labels and splits (O(N)) are
// held. The same checks and errors as import_ogb_raw, the same files byte for byte, and nothing
// at `out_dir` on failure. At most 2^32 - 1 nodes. Returns the metadata written.
DatasetMeta import_ogb_to_dir(const std::string& dir, const OgbImportOptions& opts,
                              const std::string& out_dir, const OutOfCoreImportOptions& w,
                              ImportStats* stats = nullptr);

}  // namespace dsp
