#pragma once
// Anonymous copies of read-mostly arrays on transparent huge pages (2 MiB), for data that is read
// at random: a sampler's neighbour array is hundreds of MiB read one entry at a time, and with
// 4 KiB pages nearly every read also misses the TLB. A file mapping cannot be put on huge pages
// portably, an anonymous copy can (madvise MADV_HUGEPAGE, THP in "madvise" or "always" mode).
#include <cstddef>
#include <memory>

namespace dsp {

struct HugePageBuffer {
  std::shared_ptr<void> data;  // null when not made
  size_t bytes = 0;
  bool huge = false;  // the kernel accepted MADV_HUGEPAGE
};

// A copy of [src, src + bytes) in anonymous memory advised for huge pages, or an empty buffer when
// the copy would take more than `max_share` of the memory available now (MemAvailable), or the
// mapping fails: callers then keep reading `src`. DSP_HUGE_PAGES=0 in the environment makes no
// copies: each call judges only its own array against what is available now, so the ranks of a
// node and the several arrays of each may together take most of the memory (a graph larger than
// memory is then read through its mappings, the page cache as the cold tier).
HugePageBuffer huge_page_copy(const void* src, size_t bytes, double max_share = 0.25);

// Bytes of memory available for new allocations without swapping (MemAvailable), 0 if unknown.
size_t available_memory_bytes();

}  // namespace dsp
