#include "layout/partition/partition_dir.hpp"

#include "core/error.hpp"
#include "core/fs.hpp"
#include "graph/npy.hpp"

namespace dsp {
namespace {

Array load_id_map(const std::string& path, int64_t num_nodes) {
  check_file_readable(path);
  Array a = load_npy(path, DType::kInt64, 1);
  DSP_CHECK_FORMAT(num_nodes < 0 || a.dim(0) == num_nodes, "{}: {} ids for {} nodes", path,
                   a.dim(0), num_nodes);
  return a;
}

}  // namespace

bool is_partition_dir(const std::string& dir) { return path_exists(dir + "/partition.json"); }

std::string new2old_path(const std::string& dir) { return dir + "/new2old.npy"; }
std::string old2new_path(const std::string& dir) { return dir + "/old2new.npy"; }

Array load_new2old(const std::string& dir, int64_t num_nodes) {
  return load_id_map(new2old_path(dir), num_nodes);
}

Array load_old2new(const std::string& dir, int64_t num_nodes) {
  return load_id_map(old2new_path(dir), num_nodes);
}

}  // namespace dsp
