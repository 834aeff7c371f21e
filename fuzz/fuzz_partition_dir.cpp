// The partition directory reader (load_partition: layout/partition/partition_io.cpp) over whole
// directories: partition.json (PartitionMeta::from_json: offsets, per-part stats, feature
// storage, the hetero layout), each part<p>/part.json and the part's arrays (CSR rows, halo rows,
// seeds, cached ids, training links), and the shared arrays (features with their int8 scales,
// labels, node times, splits, held-out link pairs, in-degrees). The input is a packed directory
// (fuzz/fuzz_dir.hpp); the seeds are small partitions written by dsp partition (random, METIS,
// bfs-blocks and PaGraph halos; float16, bfloat16 and int8 features; link splits, edge and node
// times, multi-label labels, a heterogeneous graph). Whatever the files hold, the reader either
// accepts each part or throws a dsp::Error (naming the file and the fault); it never crashes,
// reads out of bounds, leaks or throws anything else.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "core/error.hpp"
#include "fuzz_dir.hpp"
#include "layout/partition/partition.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static dsp_fuzz::FuzzDir dir;
  if (!dir.unpack(data, size)) return 0;
  int parts = 0;
  try {
    parts = dsp::load_partition_meta(dir.path()).parts;
  } catch (const dsp::Error& e) {
    dsp_fuzz::note_refused(e);
    return 0;
  }
  for (int p = 0; p < std::min(parts, 4); ++p) {
    try {
      dsp::PartitionData d = dsp::load_partition(dir.path(), p, parts);
      if (d.meta.hetero) {
        for (int t = 0; t < d.meta.hetero->num_types(); ++t) dsp::hetero_type_view(d, t);
      }
    } catch (const dsp::Error& e) {
      dsp_fuzz::note_refused(e);
    }
  }
  return 0;
}
