#pragma once
// Internal to the partitioners (src/layout/partition*.cpp): progress lines per phase.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/logging.hpp"
#include "core/timer.hpp"
#include "graph/csr.hpp"
#include "graph/dataset.hpp"

namespace dsp::detail {

// A line of /proc/self/status in bytes now ("RssAnon", "RssFile"), -1 if missing. RssAnon is what
// the partitioner holds itself; RssFile the pages of mapped files (the dataset) that peak RSS
// counts as well.
inline long long status_bytes(const char* key) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long long kb = -1;
  const size_t k = std::strlen(key);
  while (std::fgets(line, sizeof(line), f)) {
    if (std::strncmp(line, key, k) == 0 && line[k] == ':' &&
        std::sscanf(line + k + 1, "%lld", &kb) == 1) {
      break;
    }
  }
  std::fclose(f);
  return kb < 0 ? -1 : kb * 1024;
}
inline long long anon_rss_bytes() { return status_bytes("RssAnon"); }

// The partitioners read the dataset through its mappings, and every page read stays in the
// resident set until released: they drop the pages of the whole graph (or dataset) when a phase
// is done with it, and the writer those of each chunk's source rows (partition_io.cpp), so that
// what stays mapped is what one phase or chunk reads, not the dataset (no-ops for owned arrays).
inline void release_pages(const Csr& g) {
  g.indptr.release_pages();
  g.indices.release_pages();
  g.weights.release_pages();
}
inline void release_pages(const Dataset& ds) {
  release_pages(ds.graph);
  for (const Array* a : {&ds.features, &ds.labels, &ds.train_idx, &ds.valid_idx, &ds.test_idx}) {
    a->release_pages();
  }
}

// One line per phase: what, how long, the peak RSS so far, the anonymous memory and the mapped
// file pages now (before the phase's release).
class Progress {
 public:
  explicit Progress(bool on) : on_(on) {}
  // Seconds since the last phase (or construction).
  double phase(const std::string& what) {
    double s = sw_.seconds();
    if (on_) {
      DSP_INFO("partition",
               "{:<28} {:7.2f} s   peak RSS {:.2f} GiB, anon {:.2f} GiB, file {:.2f} GiB", what, s,
               peak_rss_bytes() / 1073741824.0, anon_rss_bytes() / 1073741824.0,
               status_bytes("RssFile") / 1073741824.0);
    }
    sw_.reset();
    return s;
  }
  void reset() { sw_.reset(); }

 private:
  bool on_;
  Stopwatch sw_;
};

// PaGraph halos (partition_pagraph.cpp). The rows replicated rows are cut from: g itself, or each
// row cut to `cap` entries (capped_row).
Csr halo_rows_source(const Csr& g, int64_t cap, uint64_t seed);

struct Halo {
  std::vector<int64_t> ids;  // new ids of the replicated rows, ascending
  Csr rows;                  // their rows: new ids, ascending, index dtype of g
  int64_t reach = 0;         // nodes within `hops` hops of the seeds (own ones included)
};
// The halo of the part owning new ids [begin, end) with training seeds `seeds_new`: every node
// not owned by the part within hops - 1 hops of a seed, where a row is walked whole if the part
// owns it and as `rows` has it otherwise. `depth` is scratch of N entries, all -1 (left so).
Halo build_halo(const Csr& g, const Csr& rows, const std::vector<int64_t>& old2new,
                const std::vector<int64_t>& new2old, int64_t begin, int64_t end,
                const std::vector<int64_t>& seeds_new, int hops, std::vector<int8_t>& depth);

}  // namespace dsp::detail
