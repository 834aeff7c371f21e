#pragma once
// One rank's shard of an embedding table on disk (EmbeddingTable::save and load; a checkpoint's
// `<ckpt>.embedding.<rank>-of-<ranks>`): a 112-byte header (magic "DSPEMBD", version, optimizer,
// dim, the owned range of the node count, the writing rank, the range's dataset-id digest, each
// section's checksum and the header's own), then the sections (the rows, the optimizer state
// (Adam's m and v, Adagrad's s), Adam's step counts; those the optimizer has), each in native byte
// order. Private to layout/store.
#include <cstdint>
#include <string>

#include "layout/store/embedding_storage.hpp"
#include "layout/store/embedding_table.hpp"

namespace dsp {

// What a shard holds: written into its header; a read compares the file's with the table's.
struct EmbeddingShard {
  EmbeddingOptimizer optimizer = EmbeddingOptimizer::kAdam;
  int64_t dim = 0, begin = 0, end = 0, num_nodes = 0;
  int rank = 0, ranks = 1;
  uint64_t ids_digest = 0;  // of the owned range's dataset ids
};

// `storage`'s sections to `path` (from the host, a device storage's staged one at a time;
// temporary file + rename): IoError naming `path` when a write fails, nothing replaced then.
void write_embedding_shard(const std::string& path, const EmbeddingShard& shard,
                           const EmbeddingStorage& storage);
// `path` checked against `shard` first (FormatError naming the file and the first difference:
// range, dim, optimizer, dataset ids, a checksum; IoError when it cannot be read), then its
// sections into `storage`: a refused file leaves the storage unchanged.
void read_embedding_shard(const std::string& path, const EmbeddingShard& shard,
                          EmbeddingStorage& storage);

}  // namespace dsp
