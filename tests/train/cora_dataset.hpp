#pragma once
// Cora (tests/data, OGB's raw layout) converted once per test process into a dataset directory
// under the temporary directory, for the job tests that train on it.
#include <unistd.h>

#include <filesystem>
#include <string>

#include <fmt/format.h>
#include "graph/dataset.hpp"
#include "graph/import.hpp"

namespace dsp {

inline const std::string& cora_dir() {
  static const std::string dir = [] {
    const auto d =
        std::filesystem::temp_directory_path() / fmt::format("dsp_train_tests_cora_{}", ::getpid());
    std::filesystem::remove_all(d);
    OgbImportOptions o;
    o.name = "cora";
    write_dataset(import_ogb_raw(std::string(DSP_TEST_DATA_DIR) + "/cora", o), d.string());
    return d.string();
  }();
  return dir;
}

}  // namespace dsp
