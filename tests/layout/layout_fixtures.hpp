#pragma once
// Shared by the layout tests: scratch directories and the Cora dataset.
#include <unistd.h>

#include <filesystem>
#include <string>

#include "graph/dataset.hpp"
#include "graph/import.hpp"

namespace dsp::testing {

// A fresh (removed) path in the temp directory, unique per process.
inline std::string temp_dir(const std::string& name) {
  auto p =
      std::filesystem::temp_directory_path() / fmt::format("dsp_layout_{}_{}", name, ::getpid());
  std::filesystem::remove_all(p);
  return p.string();
}

inline const Dataset& cora() {
  static Dataset ds = [] {
    OgbImportOptions o;
    o.name = "cora";
    return import_ogb_raw(std::string(DSP_TEST_DATA_DIR) + "/cora", o);
  }();
  return ds;
}

}  // namespace dsp::testing
