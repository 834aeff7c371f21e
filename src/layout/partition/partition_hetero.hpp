#pragma once
// Internal to the partitioner (partition_io.cpp, partition_hetero.cpp): the heterogeneous steps.
#include <cstdint>
#include <string>
#include <vector>

#include "graph/hetero.hpp"
#include "layout/partition/partition.hpp"

namespace dsp::detail {

// The type layout of a renumbering (part p's new ids follow union ids, so types come in order).
HeteroLayout make_hetero_layout(const HeteroUnion& u, const std::vector<int64_t>& offsets,
                                const std::vector<int64_t>& new2old);
// Type t's rows of its dataset feature file in new id order (what features_<type>.npy gathers).
std::vector<int64_t> type_rows(const HeteroLayout& h, const HeteroUnion& u,
                               const std::vector<int64_t>& new2old, int t);
// Part [begin, end)'s rows into <pd>/indptr.npy, indices.npy and relation_indptr.npy: every row
// its relations in order, each segment renumbered and ascending. Returns the part's entries.
int64_t write_hetero_patch(const Csr& g, const HeteroUnion& u, const std::vector<int64_t>& old2new,
                           const std::vector<int64_t>& new2old, int64_t begin, int64_t end,
                           const std::string& pd);
// A loaded part's relation_indptr against its rows and the layout (FormatError naming `file`):
// segments span each row, only relations into the row's type, entries of the source type,
// ascending.
void check_relation_segments(const PartitionData& d, const std::string& file);

// Loads a heterogeneous part's relation_indptr.npy (checked) and the per-type feature files.
void load_hetero_part(PartitionData& d);

}  // namespace dsp::detail
