#pragma once
// Internal to the heterogeneous data layer (hetero.cpp, generate_hetero.cpp, import_hetero.cpp):
// the one way a relation's CSR is built from its edge list, and the files of a relation or type.
#include <cstdint>
#include <string>

#include "graph/csr.hpp"
#include "graph/hetero.hpp"

namespace dsp::detail {

// The in-neighbour CSR of the relation edges src[i] -> dst[i], i < m: rows = dst ids in
// [0, num_dst), entries = src ids in [0, num_src), each row ascending without repeats (repeated
// edges are dropped; self loops too when `remove_self_loops`, for a relation within one type).
// Built with build_in_csr over max(num_src, num_dst) ids, then cut to num_dst rows. An id out of
// range is a FormatError prefixed `what` naming the edge; importers check ids with file and line
// first. Index dtype int32 when both counts are below 2^31.
Csr build_relation_csr(int64_t num_src, int64_t num_dst, const int64_t* src, const int64_t* dst,
                       int64_t m, const std::string& what, bool remove_self_loops = false);

// DIR/relations/<src>___<name>___<dst> and DIR/nodes/<type>.
std::string relation_dir(const std::string& dir, const RelationInfo& r);
std::string node_type_dir(const std::string& dir, const std::string& type);

// A type or relation name: non-empty, without "___" (the key separator) or '/' (a path).
bool valid_hetero_name(const std::string& name);

}  // namespace dsp::detail
