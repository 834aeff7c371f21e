#pragma once
// The loader's data path (DSP section 2.4): each rank holds the hot rows of its own part (the
// partitioned cache), and every rank maps the whole renumbered features file read-only (the page
// cache is shared by the ranks of a node).
//
// gather(ids) returns features[ids] in request order: ids cached by another rank are fetched from
// their owner with one all_to_all_v round (slots out, rows back), all others are served by this
// rank (its own cache, or the mapping). Every rank knows where every node lives (the union of the
// parts' cached lists: the feature position list), so no lookup round trip is needed. gather is a
// collective: every rank must call it, possibly with no ids.
//
// Devices: this class is the protocol, written once; the copies go through a FeatureBackend
// (feature_backend.hpp): host memory by default, device memory in the CUDA build (hot rows on
// the GPU, cold rows read from the registered mapping), or the device path on the host in tests.
// gather's output lives in the backend's memory. Slots and counts cross in host memory; rows
// cross in the communicator's memory space (device-space channels: NCCL, or MPI staged through
// pinned memory, ccc/staged_communicator.hpp), so that a GPU rank's peers read its cache without
// dsp copying rows through the host.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ccc/communicator.hpp"
#include "layout/partition/partition.hpp"
#include "layout/store/feature_backend.hpp"
#include "layout/store/fifo_cache.hpp"
#include "layout/store/peer_rows.hpp"

namespace dsp {

struct GatherStats {
  int64_t calls = 0;
  int64_t rows_remote_hot = 0;   // served by another rank's cache through the collective
  int64_t rows_local_hot = 0;    // served by this rank's cache
  int64_t rows_cold = 0;         // read from the mapped file
  int64_t rows_cold_ahead = 0;   // of rows_cold: from the rows read ahead (read_ahead)
  int64_t rows_fifo = 0;         // another rank's rows served by the FIFO cache (no request)
  int64_t rows_fifo_shared = 0;  // ... by the machine's shared FIFO level
  // Bytes of stored rows (a quantized store moves its narrow rows; gather decodes at the end).
  int64_t bytes_remote_hot = 0, bytes_local_hot = 0, bytes_cold = 0;
  int64_t bytes_fifo = 0;  // stored rows served by the FIFO levels
  // A device backend's blocking syncs and device-to-host copies (FeatureBackend::traffic) since
  // the store was made or its stats reset, to the end of the last gather.
  HostTraffic host;
  int64_t bytes() const { return bytes_remote_hot + bytes_local_hot + bytes_cold + bytes_fifo; }
  double hit_rate() const {
    const int64_t hot = rows_remote_hot + rows_local_hot + rows_fifo + rows_fifo_shared;
    const int64_t total = hot + rows_cold;
    return total ? static_cast<double>(hot) / total : 0.0;
  }
  // One gather's local rows and requests (rows of row_bytes each).
  void count(int64_t cold, int64_t cold_ahead, int64_t local_hot, int64_t remote_hot,
             int64_t row_bytes);
  // Rows the FIFO levels served: level 1's, level 2's.
  void count_fifo(const int64_t hits[2], int64_t row_bytes);
};

// A store's rows: as stored, cached and exchanged between ranks (dtype, row_bytes: GatherStats
// counts these bytes), and as gather writes them (out_dtype, out_row_bytes: float32 for bfloat16
// and int8 stores, decoded in the gather; the stored rows otherwise, float16 rows being widened by
// their consumer, on its device).
struct StoreRows {
  int64_t num_nodes = 0, dim = 0;
  DType dtype = DType::kFloat32, out_dtype = DType::kFloat32;
  size_t row_bytes = 0, out_row_bytes = 0;
};

class FeatureStore {
 public:
  // `part` must have been loaded for comm.rank() of a partition with comm.size() parts.
  // `all_cached`: every part's cached list (index p: part p's, hottest first), e.g. a cache policy
  // chosen at train time, the same on every rank; empty: the partition's lists. `backend`: empty
  // for host memory.
  FeatureStore(const PartitionData& part, Communicator& comm,
               const std::vector<Array>& all_cached = {},
               const FeatureBackendFactory& backend = {});
  ~FeatureStore();

  // Its rows as stored, cached and exchanged, and as gather writes them (StoreRows).
  const StoreRows& format() const { return fmt_; }
  // Memory for n output rows in the backend's memory; *fence (when given): its release fence
  // (FeatureBackend::allocate).
  std::shared_ptr<void> allocate_rows(int64_t n, std::shared_ptr<ReleaseFence>* fence = nullptr) {
    return backend_->allocate(std::max<size_t>(static_cast<size_t>(n) * fmt_.out_row_bytes, 1),
                              fence);
  }
  int64_t cached_rows() const { return cache_rows_; }

  // Writes n rows (n * out_row_bytes() bytes, in the backend's memory) to `out`, row i =
  // features[ids[i]] (decoded to float32 when out_dtype() says so). ids (host) must be distinct and
  // in [0, N): InvalidArgument otherwise (on the calling rank, before any communication, so a bad
  // request fails where it was made).
  void gather(const int64_t* ids, int64_t n, void* out);
  // gather for ids in the backend's memory (a device sampler's block sources, left there): on a
  // device backend classified on the device, so no id list crosses to the host; the backend's
  // counts are the one read (FeatureBackend::classify_resident), and with a device-space channel
  // the slots go to their owners and the rows come back in device memory. Ids out of range are
  // InvalidArgument (before any communication); repeated ids are each served (a block's sources
  // are distinct). A host backend (or the FIFO levels, which are host structures) runs gather on
  // the ids where they are (a host backend's memory) or read back. Collective, as gather.
  void gather_resident(const int64_t* ids, int64_t n, void* out);
  // Host convenience: the rows copied to host memory whatever the backend.
  std::vector<unsigned char> gather(const std::vector<int64_t>& ids);
  // Its copies; also superbatches (FeatureBackend::read_ahead: the cold rows the next gathers
  // will request, read now in file order; local, no communication).
  FeatureBackend& backend() { return *backend_; }

  // Adds the FIFO levels (fifo_cache.hpp; replacing any). Not thread-safe against a concurrent
  // gather.
  void enable_fifo(const FifoCacheOptions& opts) {
    fifo_.enable(opts, fmt_.num_nodes, fmt_.row_bytes);
  }
  FifoRowCache* fifo(int level) { return fifo_.level(level); }

  const GatherStats& stats() const { return stats_; }
  void reset_stats() {
    stats_ = {};
    host0_ = backend_->traffic();
  }

 private:
  friend void gather_stores(const std::vector<FeatureStore*>& stores,
                            const std::vector<std::vector<int64_t>>& ids,
                            const std::vector<void*>& outs);
  // A gather's requests for rows other ranks cache: their slots grouped by owner (send_counts[p]
  // each), and where each row goes in `out`.
  struct Requests {
    std::vector<int64_t> req, req_pos, send_counts;
  };
  // gather_resident's local part on a classifying backend: checks, local rows, the request counts.
  ResidentPass prepare_resident(const int64_t* ids, int64_t n, void* out);
  // The local part of gather: checks, local and cold rows, the FIFO levels, the requests.
  Requests prepare(const int64_t* ids, int64_t n, void* out);
  // Received rows [k0, k0 + m) of the requests (contiguous in `rows`) into their places in out,
  // and into the FIFO levels.
  void receive(const int64_t* ids, const Requests& r, int64_t k0, int64_t m, const void* rows,
               MemorySpace space, void* out);
  Communicator& comm_;
  PartitionMeta meta_;
  Array features_;      // mapped [N, F]
  Array feature_rows_;  // int64 [N]: the row of node v in features_ (by reference), or undefined
  StoreRows fmt_;
  int64_t cache_rows_ = 0;
  std::vector<int32_t> slot_;          // slot of every node in its owner's cache, or -1
  std::vector<uint64_t> cached_bits_;  // bit v: node v is cached by some rank
  std::vector<uint64_t> seen_bits_;    // bit v: requested by the current call (duplicates)
  std::vector<uint8_t> peer_;          // per requested id: cached by another rank
  std::unique_ptr<FeatureBackend> backend_;
  std::unique_ptr<PeerRows> peers_;  // the round with the other ranks' caches
  GatherStats stats_;
  HostTraffic host0_;  // the backend's traffic when the stats were last reset
  FifoLevels fifo_;
  // The backend's traffic since the last reset, into stats_.host (the end of a gather).
  void note_traffic() { stats_.host = backend_->traffic() - host0_; }
};

// One gather for several stores on one communicator (a heterogeneous batch's featured node
// types): each store's local pass, checks and FIFO levels as its gather does, then one
// all_to_all_v of the per-store request counts (S per peer), one of the slots (per peer, store by
// store) and one of the rows (bytes, each store's at its width): three collectives for all the
// stores instead of three each. outs[s] is stores[s]'s `out` (its backend's memory) for ids[s].
// Collective: every rank passes the same stores in the same order (some may ask for nothing).
void gather_stores(const std::vector<FeatureStore*>& stores,
                   const std::vector<std::vector<int64_t>>& ids, const std::vector<void*>& outs);

// Host memory: copies row idx[i] of `base` to row out_pos[i] of `out` (row i when out_pos is
// null), i < n. Software-prefetches a few rows ahead: measured here, that beats a plain per-row
// copy loop (rows are scattered, so the copy is latency bound).
void gather_rows(const unsigned char* base, size_t row_bytes, const int64_t* idx, int64_t n,
                 unsigned char* out, const int64_t* out_pos = nullptr);

}  // namespace dsp
