#pragma once
// `dsp convert` and `dsp generate rmat|community|hetero` as commands shared by the CLI (tools/) and
// Python (dsp.convert_ogb, dsp.convert_edge_list, dsp.generate_rmat, dsp.generate_community): each
// command's options declared once (a table of core/options.hpp: the flag, the key = the Python
// keyword, help, default), checked once and run once.
#include <cstdint>
#include <optional>
#include <string>

#include "core/options.hpp"
#include "graph/dataset.hpp"
#include "graph/generate.hpp"
#include "graph/generate_hetero.hpp"
#include "graph/import.hpp"

namespace dsp {

// --- dsp convert --------------------------------------------------------------------------------

// dsp convert --from: the input's format (kNone: not given, refused).
enum class ConvertFrom { kNone, kOgb, kEdgeList, kOgbLink, kOgbHetero };
const Names<ConvertFrom>& names_of(ConvertFrom);  // "", ogb, edgelist, ogb-link, ogb-hetero

struct ConvertCommand {
  ConvertFrom from = ConvertFrom::kNone;
  std::string input;   // ogb: the dataset folder (holding raw/) or raw/; edgelist: a text file
  std::string output;  // the dataset directory to write
  std::string name, split, memory_budget, sort_buffer;
  bool undirected = false, directed = false, overwrite = false, no_self_loops = false,
       no_split = false, out_of_core = false;
  int64_t num_nodes = -1;
  // edgelist: "train,valid,test" fractions of a link-prediction split (empty: none); negatives
  // per held-out split (0: the larger positive count); the seed of the split and negatives.
  std::string link_split;
  int64_t link_negatives = 0;
  int64_t link_negatives_per_positive = 0;
  uint64_t seed = 0;
  // edgelist: the 1-based column of each edge's integer time (3 or 4; 0: none) and a file of node
  // times (.npy or one integer per line; needs edge times). In memory only.
  int64_t time_column = 0;
  std::string node_time;
  // edgelist: node features, a .npy of float32|float16 [N, F] (N also gives the node count when
  // --num-nodes is not). In memory only.
  std::string features;
  bool add_reverse = false;  // ogb-hetero: add the reverse of every relation
  std::string link_relation;  // ogb-hetero with --link-split: the relation split (key or name)
};

const OptionTable<ConvertCommand>& convert_options();

// Converts in memory, or out of core when the in-memory estimate exceeds what the budget leaves
// or out_of_core is set; refuses with one line when neither fits, when an option does not apply
// to the format, or when the output is the input or contains it. Returns the meta written;
// `stats` and `write_s` (seconds writing, in memory) when given. For ogb-hetero (a heterogeneous
// dataset, graph/hetero.hpp; in memory) the meta sums it up: its name, the node and edge totals
// over all types and relations, classes and split sizes of the target type, and its schema as
// extra["hetero"] (HeteroSchema::to_json) beside the importer's provenance.
DatasetMeta run_convert(const ConvertCommand& cmd, ImportStats* stats = nullptr,
                        double* write_s = nullptr);

// --- dsp generate -------------------------------------------------------------------------------

// How a generated dataset is written (both generators).
struct GenerateRun {
  std::string out;
  bool overwrite = false;
  std::string memory_budget, sort_buffer;  // e.g. "12G"; empty: the defaults
  bool out_of_core = false;
};

// The splits a generator is asked for: a preset (--splits) or fractions (--train-frac,
// --valid-frac, --test-frac), not both. What is not given keeps the generator's value in `o`.
struct GenerateSplits {
  SplitPreset preset = SplitPreset::kNone;
  std::optional<double> train_frac, valid_frac, test_frac;  // unset: not given
};

struct RmatCommand {
  RmatCommand();  // the CLI's defaults: 100 features, 16 classes (trainable)
  GenerateRun run;
  RmatOptions o;
  GenerateSplits splits;
  // The one check of the split options (InvalidArgument with the CLI's message); sets o's
  // fractions from them. The other options are checked by the generator.
  void validate();
};

struct CommunityCommand {
  GenerateRun run;
  CommunityOptions o;
  GenerateSplits splits;
  std::string link_split;      // "train,valid,test" fractions (empty: none)
  int64_t link_negatives = 0;  // per held-out split (0: the larger positive count)
  int64_t link_negatives_per_positive = 0;  // > 0: per held-out positive instead
  void validate();             // as RmatCommand::validate, and sets o.link_split from the two above
};

// The OGB-MAG-shaped heterogeneous graph (generate_hetero.hpp), generated in memory.
struct HeteroCommand {
  GenerateRun run;  // out and overwrite only
  HeteroGenOptions o;
  GenerateSplits splits;  // over the papers
  bool no_reverse = false;
  std::string link_split;      // "train,valid,test" fractions of o.link_relation (empty: none)
  int64_t link_negatives = 0;  // per held-out split (0: the larger positive count)
  int64_t link_negatives_per_positive = 0;  // > 0: per held-out positive instead
  // as RmatCommand::validate, o.reverse from no_reverse and o.link_split from the link options
  void validate();
};

const OptionTable<RmatCommand>& rmat_options();
const OptionTable<CommunityCommand>& community_options();
const OptionTable<HeteroCommand>& hetero_options();

// Validates a copy of `cmd`, refuses an existing output before generating (unless overwrite),
// then generates and writes.
GenerateResult run_generate(const RmatCommand& cmd);
GenerateResult run_generate(const CommunityCommand& cmd);
HeteroGenerateResult run_generate(const HeteroCommand& cmd);

// A count such as "2400000", "2.4M", "62m", "100k" or "1e6". InvalidArgument naming `flag`.
int64_t parse_count(const std::string& flag, const std::string& text);

}  // namespace dsp
