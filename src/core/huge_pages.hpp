#pragma once
// Anonymous copies of read-mostly arrays on transparent huge pages (2 MiB), for data that is read
// at random: a sampler's neighbour array is hundreds of MiB read one entry at a time, and with
// 4 KiB pages nearly every read also misses the TLB. A file mapping cannot be put on huge pages
// portably, an anonymous copy can (madvise MADV_HUGEPAGE, THP in "madvise" or "always" mode).
#include <cstddef>
#include <functional>
#include <memory>

namespace dsp {

struct HugePageBuffer {
  std::shared_ptr<void> data;  // null when not made
  size_t bytes = 0;
  bool huge = false;  // the kernel accepted MADV_HUGEPAGE
};

// A copy of [src, src + bytes) in anonymous memory advised for huge pages, or an empty buffer when
// the copy would not fit this process's share of memory, or the mapping fails: callers then keep
// reading `src` (a graph larger than memory is read through its mappings, the page cache as the
// cold tier). The share is one budget for all the copies a process holds at once: they may
// together take `max_share` of the memory available to the process (MemAvailable now plus what its
// live copies hold), divided among the ranks of the node the launcher reports
// (OMPI_COMM_WORLD_LOCAL_SIZE or MPI_LOCALNRANKS), so several arrays and several ranks stay
// within `max_share` of the machine together. DSP_HUGE_PAGES=0 in the environment makes no copies.
HugePageBuffer huge_page_copy(const void* src, size_t bytes, double max_share = 0.25);
// The same buffer under the same budget, its `bytes` written by `fill(p)` (e.g. rows gathered in
// another order) instead of copied from one source.
HugePageBuffer huge_page_fill(size_t bytes, const std::function<void(void*)>& fill,
                              double max_share = 0.25);

// `bytes` of zeroed anonymous memory on a 2 MiB boundary, advised for huge pages (unless
// DSP_HUGE_PAGES=0): for large arrays written and read at random (a learnable embedding table and
// its optimizer state), where 4 KiB pages make nearly every access miss the TLB. Not counted in
// huge_page_copy's share (the caller budgets it). Error naming the size when it cannot be mapped.
HugePageBuffer huge_page_zeros(size_t bytes);

// Whether `bytes` exceed this process's share of the memory available now (MemAvailable divided
// among the node's ranks, as huge_page_copy's budget is): a mapping that large read at random is
// mostly read from disk, each missing page a read its faulting thread waits on.
// Arrays a process reads at random compete for the same page cache: once note_random_reads has
// noted their total, each counts as that large (every one is then mostly read from disk).
// DSP_BEYOND_MEMORY=1 in the environment says yes for any size (the disk paths on a small graph:
// tests, and measurements with the page cache dropped).
bool beyond_memory_share(size_t bytes);
// The bytes of every array this process reads at random through a file mapping, together (a
// rank's neighbour array and feature rows, noted when its partition is loaded); 0: none noted.
void note_random_reads(size_t bytes);

// For an array read at random through a read-only file mapping (no copy made: it did not fit, or
// DSP_HUGE_PAGES=0): when it is beyond_memory_share, the page cache cannot keep it, and each page
// fault's read-around (128 KiB or more, for a row of a few hundred bytes) would mostly read bytes
// evicted unused: advises random reads (madvise MADV_RANDOM, so a fault reads its own page), and
// logs it naming `what`. Returns whether it advised; a refusal is ignored. DSP_RANDOM_READS=0 in
// the environment never advises (to compare the two).
bool advise_random_reads(const void* data, size_t bytes, const char* what);

// madvise(advice) over the pages of [data, data + bytes) of a mapping, rounded outward to whole
// pages (madvise needs an aligned start; advice may cover partial pages). Returns whether the
// kernel took it: advice only, a refusal loses speed, nothing else.
bool advise_pages(const void* data, size_t bytes, int advice);

// Bytes of memory available for new allocations without swapping (MemAvailable), 0 if unknown.
size_t available_memory_bytes();

// Bytes the live huge-page copies of this process hold.
size_t huge_page_bytes_held();

}  // namespace dsp
