#pragma once
// A small valid dataset and a catalogue of ways to break its directory, shared by the library
// tests (load_dataset must throw the message) and the CLI tests (`dsp info` must exit non-zero).
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/fs.hpp"
#include "graph/dataset.hpp"
#include "graph/io_test_util.hpp"
#include "graph/npy.hpp"

namespace dsp::iotest {

inline Dataset small_dataset() {
  std::vector<int64_t> src = {0, 1, 2, 3, 4, 5, 0, 5};
  std::vector<int64_t> dst = {1, 2, 0, 4, 5, 3, 3, 5};
  std::vector<float> w = {1, 2, 3, 4, 5, 6, 7, 8};
  Dataset ds;
  ds.graph = build_in_csr<int64_t>(6, src.data(), dst.data(), 8, w.data());
  std::vector<float> feat(6 * 4);
  for (size_t i = 0; i < feat.size(); ++i) feat[i] = 0.25f * static_cast<float>(i) - 1;
  ds.features = Array::from_vector(std::move(feat), {6, 4});
  ds.labels = Array::from_vector(std::vector<int64_t>{0, 1, 2, -1, 1, 0});
  ds.train_idx = Array::from_vector(std::vector<int64_t>{0, 1});
  ds.valid_idx = Array::from_vector(std::vector<int64_t>{2});
  ds.test_idx = Array::from_vector(std::vector<int64_t>{4, 3});
  ds.meta.name = "small";
  ds.meta.extra = {{"note", "test"}};
  ds.sync_meta();
  return ds;
}

inline void edit_json(const std::string& dir, const std::function<void(nlohmann::json&)>& f) {
  std::string p = dir + "/dataset.json";
  nlohmann::json j = nlohmann::json::parse(read_file(p));
  f(j);
  write_text(p, j.dump());
}

template <class T>
std::vector<T> read_vec(const std::string& path) {
  Array a = load_npy(path, false);
  const T* p = a.data<T>();
  return std::vector<T>(p, p + a.numel());
}

struct BreakCase {
  const char* name;
  std::function<void(const std::string& dir)> do_break;
  std::string expect;  // substring of the message, after "<dir>/"
};

inline std::vector<BreakCase> break_cases() {
  return {
      {"truncated_npy",
       [](const std::string& d) {
         std::filesystem::resize_file(d + "/indices.npy",
                                      std::filesystem::file_size(d + "/indices.npy") - 3);
       },
       "indices.npy: truncated: header says int32[8]"},
      {"wrong_dtype",
       [](const std::string& d) { save_npy(d + "/labels.npy", Array(DType::kFloat32, {6})); },
       "labels.npy: wrong dtype: expected int64, got float32"},
      {"index_out_of_range",
       [](const std::string& d) {
         auto v = read_vec<int32_t>(d + "/indices.npy");
         v[5] = 99;
         save_npy(d + "/indices.npy", Array::from_vector(v));
       },
       "indices.npy: indices[5] = 99 is out of range [0, 6)"},
      {"non_monotone_indptr",
       [](const std::string& d) {
         auto v = read_vec<int64_t>(d + "/indptr.npy");
         v[2] = v[3] + 1;
         save_npy(d + "/indptr.npy", Array::from_vector(v));
       },
       "indptr.npy: indptr is not monotone at row 2"},
      {"missing_file", [](const std::string& d) { std::filesystem::remove(d + "/features.npy"); },
       "features.npy: missing file"},
      {"split_out_of_range",
       [](const std::string& d) {
         save_npy(d + "/train_idx.npy", Array::from_vector(std::vector<int64_t>{0, 6}));
       },
       "train_idx.npy: split id out of range: element 1 is 6, not in [0, 6)"},
      {"split_repeat",
       [](const std::string& d) {
         save_npy(d + "/test_idx.npy", Array::from_vector(std::vector<int64_t>{4, 4}));
       },
       "test_idx.npy: node 4 appears more than once"},
      {"label_out_of_range",
       [](const std::string& d) {
         save_npy(d + "/labels.npy", Array::from_vector(std::vector<int64_t>{0, 1, 2, 3, 0, 0}));
       },
       "labels.npy: label of node 3 is 3, not in [-1, 3)"},
      {"features_wrong_shape",
       [](const std::string& d) {
         save_npy(d + "/features.npy", Array(DType::kFloat32, {6, 3}));
       },
       "features.npy: wrong shape: expected float32[6, 4], got float32[6, 3]"},
      {"garbage_json",
       [](const std::string& d) { write_text(d + "/dataset.json", "{\"num_nodes\": 6,, oops"); },
       "dataset.json: not valid JSON"},
      {"json_wrong_type",
       [](const std::string& d) {
         edit_json(d, [](nlohmann::json& j) { j["num_nodes"] = "six"; });
       },
       "dataset.json: 'num_nodes' must be an integer, got string"},
      {"json_unknown_dtype",
       [](const std::string& d) {
         edit_json(d, [](nlohmann::json& j) { j["index_dtype"] = "int128"; });
       },
       "dataset.json: 'index_dtype' = 'int128' is not one of: int32, int64"},
      {"empty_graph",
       [](const std::string& d) {
         edit_json(d, [](nlohmann::json& j) {
           j["num_nodes"] = 0;
           j["num_train"] = j["num_valid"] = j["num_test"] = 0;
         });
       },
       "dataset.json: empty graph"},
      // Row 3 lists in-neighbours {0, 5} (entries 3 and 4 of indices.npy).
      {"unsorted_row",
       [](const std::string& d) {
         auto v = read_vec<int32_t>(d + "/indices.npy");
         std::swap(v[3], v[4]);
         save_npy(d + "/indices.npy", Array::from_vector(v));
       },
       "indices.npy: row 3 is not sorted: neighbour 0 (indices[4]) follows 5; each row must "
       "list its neighbours in ascending order"},
      {"repeated_neighbour",
       [](const std::string& d) {
         auto v = read_vec<int32_t>(d + "/indices.npy");
         v[4] = v[3];
         save_npy(d + "/indices.npy", Array::from_vector(v));
       },
       "indices.npy: row 3 lists neighbour 0 twice (indices[3] and [4])"},
      {"nan_feature",
       [](const std::string& d) {
         auto v = read_vec<float>(d + "/features.npy");
         v[4 * 2 + 1] = std::nanf("");
         save_npy(d + "/features.npy", Array::from_vector(v, {6, 4}));
       },
       "features.npy: feature 1 of node 2 is NaN; features must be finite"},
      {"infinite_feature",
       [](const std::string& d) {
         auto v = read_vec<float>(d + "/features.npy");
         v[4 * 5 + 3] = -INFINITY;
         save_npy(d + "/features.npy", Array::from_vector(v, {6, 4}));
       },
       "features.npy: feature 3 of node 5 is infinite"},
      {"nan_weight",
       [](const std::string& d) {
         auto v = read_vec<float>(d + "/edge_weight.npy");
         v[2] = std::nanf("");
         save_npy(d + "/edge_weight.npy", Array::from_vector(v));
       },
       "edge_weight.npy: weight nan of edge entry 2 (row 2) is NaN; edge weights must be finite "
       "and >= 0"},
      {"infinite_weight",
       [](const std::string& d) {
         auto v = read_vec<float>(d + "/edge_weight.npy");
         v[7] = INFINITY;
         save_npy(d + "/edge_weight.npy", Array::from_vector(v));
       },
       "edge_weight.npy: weight inf of edge entry 7 (row 5) is infinite"},
      {"negative_weight",
       [](const std::string& d) {
         auto v = read_vec<float>(d + "/edge_weight.npy");
         v[0] = -0.5f;
         save_npy(d + "/edge_weight.npy", Array::from_vector(v));
       },
       "edge_weight.npy: weight -0.5 of edge entry 0 (row 0) is negative"},
      {"edge_count_mismatch",
       [](const std::string& d) { edit_json(d, [](nlohmann::json& j) { j["num_edges"] = 9; }); },
       "indices.npy: wrong shape: expected int32[9], got int32[8]"},
  };
}

}  // namespace dsp::iotest
