#pragma once
// PaGraph's cache sizing (digest pagraph.md): when the user gives no cache ratio, the cache takes
// the memory left once training runs, measured after the first batch, minus what the pipeline
// keeps in flight (the prefetch reservation: the loaded features of the batches queued ahead of
// the trainer). Host: a budget the user gives or the available memory; device: free device
// memory. The arithmetic is a pure function so it is tested without a machine in that state.
#include <cstddef>
#include <cstdint>

namespace dsp {

struct CacheSizing {
  int64_t memory_left = 0;          // bytes free now (budget - in use, available, or device free)
  int64_t batch_feature_bytes = 0;  // feature bytes of the first batch's input nodes
  int64_t prefetch_batches = 2;     // batches loaded ahead of the trainer (queue capacity)
  double headroom = 0.1;            // share of memory_left left free (allocator, stragglers)
  size_t row_bytes = 0;             // bytes of one cached row
  int64_t max_rows = 0;             // rows worth caching (the part's nodes)
};

// Rows of the cache: floor((memory_left * (1 - headroom) - (prefetch_batches + 1) *
// batch_feature_bytes) / row_bytes), clamped to [0, max_rows]. The batch being trained counts
// with the prefetched ones: its features are resident too. InvalidArgument for row_bytes 0,
// negative sizes or a headroom outside [0, 1).
int64_t cache_rows_for_memory(const CacheSizing& s);

// MemAvailable of /proc/meminfo in bytes (the kernel's estimate of memory that can be allocated
// without swapping); IoError when it cannot be read.
int64_t host_available_memory();

}  // namespace dsp
