// The dataset directory reader (load_dataset: graph/dataset.cpp, graph/validate.cpp) over whole
// directories: dataset.json and every array of the format, the new ones included (link_*.npy
// splits and their negatives, edge_time.npy / node_time.npy, int8 [N, L] multi-label labels.npy,
// float16 features). The input is a packed directory (fuzz/fuzz_dir.hpp); the seeds are small
// datasets written by dsp generate. Whatever the files hold, load_dataset either accepts them or
// throws a dsp::Error (naming the file and the fault); it never crashes, reads out of bounds,
// leaks or throws anything else, with mapped arrays and with arrays read into memory.
#include <cstddef>
#include <cstdint>

#include "core/error.hpp"
#include "fuzz_dir.hpp"
#include "graph/dataset.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static dsp_fuzz::FuzzDir dir;
  if (!dir.unpack(data, size)) return 0;
  // Mapped or read arrays by the parity of the bytes' sum: any edit may switch, and the seeds'
  // mutants take both paths whatever byte they change.
  unsigned sum = 0;
  for (size_t i = 0; i < size; ++i) sum += data[i];
  dsp::LoadOptions opts;
  opts.mmap = (sum & 1) == 0;
  try {
    dsp::Dataset ds = dsp::load_dataset(dir.path(), opts);
    // An accepted dataset's metadata survives a round trip through dataset.json unchanged.
    const nlohmann::json j = ds.meta.to_json();
    if (dsp::DatasetMeta::from_json(j, "roundtrip").to_json() != j) __builtin_trap();
  } catch (const dsp::Error& e) {
    dsp_fuzz::note_refused(e);
  }
  return 0;
}
