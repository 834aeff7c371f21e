#pragma once
// A synthetic heterogeneous graph shaped like OGB-MAG (ogbn-mag): papers (the target type, with
// features and labels), authors, institutions and fields of study, joined by
//   author___affiliated_with___institution, author___writes___paper, paper___cites___paper,
//   paper___has_topic___field_of_study
// and, by default, their reverses (add_reverse_relations: rev_affiliated_with, rev_writes,
// rev_cites, rev_has_topic). Node types and relations are in OGB's (alphabetical) order, as
// `dsp convert --from ogb-hetero` writes ogbn-mag.
//
// Planted structure: every node of every type has a community in [0, classes), uniformly at
// random; a paper's class is its community (a share label_noise of papers gets a uniformly random
// label instead). Each edge drawn from a node of community c goes, with probability `intra`, to a
// node of community c of the other type, else to any node of that type (so a share
// intra + (1 - intra) / classes stays inside; extra["measured_intra_fraction"] has each
// relation's stored share). Targets are drawn with density proportional to 1/sqrt(rank) within
// the candidates, so a few papers, authors, institutions and fields are hubs, as in MAG.
// Paper features are the class centroid (entries N(0, 1)) plus feature_noise * N(0, I): features
// alone classify a paper far worse than its neighbourhood (extra["feature_only_accuracy"],
// measured on up to 50000 papers).
//
// A pure function of the options: every draw comes from a counter-based stream keyed by (seed,
// purpose) with the node id as subject, so the bytes are the same for any thread count.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "graph/generate.hpp"
#include "graph/hetero.hpp"
#include "graph/link.hpp"

namespace dsp {

struct HeteroGenOptions {
  int64_t papers = 20000, authors = 12000, institutions = 400, fields = 1500;
  int64_t classes = 8;
  int64_t feature_dim = 64;  // paper features (float32); 0: none
  // Edges drawn per paper (writes: its authors, cites: its references, topics: its fields) and
  // per author (affiliations: its institutions); repeats and self-citations are dropped.
  int64_t writes = 3, cites = 5, topics = 3, affiliations = 1;
  double intra = 0.8;  // chance that an edge is drawn inside the source's community
  // Features: centroid + feature_noise * N(0, I). The default makes the best feature-only
  // classifier reach about half of the papers (64 dimensions, 8 classes).
  double feature_noise = 5.0;
  // Share of papers given a uniformly random label: the best attainable accuracy is then
  // 1 - label_noise * (1 - 1 / classes), recorded in extra["accuracy_bound"].
  double label_noise = 0.1;
  double train_frac = SplitFractions{}.train, valid_frac = SplitFractions{}.valid;
  std::optional<double> test_frac;  // unset: the rest is test (SplitFractions); over papers
  bool reverse = true;              // add the reverse relations
  // Link prediction on one relation (split_hetero_links, after the reverses are added): its
  // edges split into link_train/valid/test with negatives of its destination type.
  std::optional<LinkSplitOptions> link_split;
  std::string link_relation = "author___writes___paper";
  uint64_t seed = 0;
  std::string name = "hetero";
};

// Throws InvalidArgument on bad options.
HeteroDataset generate_hetero(const HeteroGenOptions& opts);

struct HeteroGenerateResult {
  std::string name;
  HeteroSchema schema;
  nlohmann::json extra;
  int64_t num_train = 0, num_valid = 0, num_test = 0;
  int64_t num_link_train = 0, num_link_valid = 0, num_link_test = 0;  // on schema.link_relation
  double generate_s = 0, write_s = 0;
};

// Generates and writes the dataset to `dir` (write_hetero_dataset: staged, validated, renamed).
HeteroGenerateResult write_hetero(const HeteroGenOptions& opts, const std::string& dir,
                                  bool overwrite);

}  // namespace dsp
