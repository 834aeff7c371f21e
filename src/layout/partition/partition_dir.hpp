#pragma once
// A partition directory from outside layout/ (its files: partition.hpp): whether a directory is
// one, and its two id maps. Train, predict, the Python loader and the tools ask here instead of
// naming the files.
#include <cstdint>
#include <string>

#include "graph/array.hpp"

namespace dsp {

// True when `dir` holds partition.json (a directory `dsp partition` wrote).
bool is_partition_dir(const std::string& dir);

// new2old.npy: int64 [N], new id v -> the dataset's id of v. old2new.npy: the inverse. Both
// mapped; FormatError naming the file when it is not int64 [num_nodes] (num_nodes < 0: any N).
Array load_new2old(const std::string& dir, int64_t num_nodes = -1);
Array load_old2new(const std::string& dir, int64_t num_nodes = -1);

// The paths, for messages that name them.
std::string new2old_path(const std::string& dir);
std::string old2new_path(const std::string& dir);

}  // namespace dsp
