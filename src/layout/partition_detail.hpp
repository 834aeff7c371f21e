#pragma once
// Internal to the partitioners (src/layout/partition*.cpp): progress lines per phase.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/logging.hpp"
#include "core/timer.hpp"
#include "graph/csr.hpp"

namespace dsp::detail {

// Anonymous resident memory of this process now (RssAnon of /proc/self/status): what the
// partitioner holds itself, without the pages of the mapped dataset files that peak RSS counts.
inline long long anon_rss_bytes() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long long kb = -1;
  while (std::fgets(line, sizeof(line), f)) {
    if (std::sscanf(line, "RssAnon: %lld kB", &kb) == 1) break;
  }
  std::fclose(f);
  return kb < 0 ? -1 : kb * 1024;
}

// One line per phase: what, how long, the peak RSS so far and the anonymous memory now.
class Progress {
 public:
  explicit Progress(bool on) : on_(on) {}
  // Seconds since the last phase (or construction).
  double phase(const std::string& what) {
    double s = sw_.seconds();
    if (on_) {
      DSP_INFO("partition", "{:<28} {:7.2f} s   peak RSS {:.2f} GiB, anon {:.2f} GiB", what, s,
               peak_rss_bytes() / 1073741824.0, anon_rss_bytes() / 1073741824.0);
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
