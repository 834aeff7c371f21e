#pragma once
// The device seam of the feature store: where one rank's rows live and how they are copied.
//
// FeatureStore (feature_store.hpp) runs the gather protocol once for every device: validate and
// classify the requested ids against the feature position list, one all-to-all round each way for
// rows cached by other ranks. The copies go through this interface:
//
//   local_pass   validates the ids and writes every row this rank serves without communication
//                (cold rows, read from the shared features mapping, and rows of its own cache)
//                to its place in `out`; flags the rows another rank caches;
//   serve_slots  rows of this rank's cache, by slot, for the peers that asked;
//   place_rows   rows received from peers into their places in `out`.
//
// Rows are cached, served and exchanged in the stored dtype (FeatureSource::row_bytes each);
// `out` rows are out_row_bytes each: the same rows for float32 and float16 stores, float32 rows
// decoded in the same pass for bfloat16 and int8 stores (core/quant.hpp: decode_row on the host,
// its per-element form in the kernel), so narrow rows are what the caches hold and the
// collective moves.
//
// `out` lives in the backend's memory (device()). The rows of serve_slots and place_rows live
// where the store's communicator takes its buffers (RowSpace): host memory, or the backend's
// memory when the channel is device-space (NCCL, or MPI staged), so rows go from one GPU's cache
// to another's without a host copy in dsp. Backends:
//   host     make_host_feature_backend (host_features.cpp): the CPU build's fused, prefetching
//            pass; its own hot rows are read from the mapping (same tier as a copy), the cache copy
//            serves peers.
//   device   KernelFeatureBackend<Exec> (kernel_features.hpp): hot rows in device memory, cold
//            rows read from the mapping registered for device access; CudaExec on a GPU
//            (cuda/feature_backend.cu, cuda_feature_backend), HostExec in every CPU test
//            (make_emulated_feature_backend).
// A new backend implements FeatureBackend, is built by a FeatureBackendFactory from the rank's
// FeatureSource, and must pass the backend-parameterised gather tests (tests/layout).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ccc/communicator.hpp"
#include "core/device.hpp"
#include "core/host_traffic.hpp"
#include "core/quant.hpp"
#include "core/release_fence.hpp"
#include "graph/array.hpp"

namespace dsp {

// What a backend serves from, prepared by the store (host memory, valid for the store's life).
struct FeatureSource {
  Array features;                    // [N, F] (normally the shared read-only mapping)
  size_t row_bytes = 0;              // of a stored row
  size_t out_row_bytes = 0;          // of an output row: row_bytes, or 4 F when the codec decodes
  FeatureCodec codec;                // column scales in host memory
  const float* row_scale = nullptr;  // int8 per-node scales [N] (host), or null
  int64_t num_nodes = 0;
  int64_t begin = 0, end = 0;     // the node ids this rank owns
  Array cached;                   // int64: this rank's cached ids in slot order (hottest first)
  const int32_t* slot = nullptr;  // [N]: slot of every node in its owner's cache, or -1
  const uint64_t* cached_bits = nullptr;  // bit v: node v is cached by some rank
  // Row of `features` holding node v (PartitionData::feature_rows: the dataset's features read
  // by reference), or null: row v.
  const int64_t* row_of = nullptr;
  int64_t stored_row(int64_t v) const { return row_of ? row_of[v] : v; }
};

// The position of a requested id: which rank serves it and how.
enum class RowSource { kOutOfRange, kDuplicate, kHere, kPeer };

// Per-id classification, shared by every backend's local pass: `lo`, `hi` is the rank's own id
// range, `seen` marks ids of the current request (the caller clears the bits it set); rows a rank
// caches itself are served here. A plain read-modify-write of `seen`, not an atomic: see
// host_features.cpp for why and for its one consequence. Scalars rather than a FeatureSource, so
// a caller's copy loop keeps them in registers.
inline RowSource classify_row(uint64_t v, uint64_t num_nodes, uint64_t lo, uint64_t hi,
                              const uint64_t* cached_bits, uint64_t* seen) {
  if (v >= num_nodes) return RowSource::kOutOfRange;
  const uint64_t bit = uint64_t{1} << (v & 63);
  const uint64_t word = seen[v >> 6];
  seen[v >> 6] = word | bit;
  if (word & bit) return RowSource::kDuplicate;
  const bool hot = (cached_bits[v >> 6] >> (v & 63)) & 1;
  return !hot || (v >= lo && v < hi) ? RowSource::kHere : RowSource::kPeer;
}

struct LocalPass {
  int64_t rows_cold = 0, rows_local_hot = 0;
  int64_t rows_ahead = 0;              // of rows_cold: served from the rows read ahead (read_ahead)
  int64_t bad_pos = -1, dup_pos = -1;  // first position found out of range / repeated, or -1
};

// A local pass over ids in the backend's memory (FeatureStore::gather_resident), classified where
// the ids are: the rows this rank serves are written to `out` as local_pass writes them, and the
// rows other ranks cache are grouped by owner in the backend's memory (slots, their output rows and
// node ids, send_counts[p] each), valid until the backend's next call. `bad`: ids out of range.
struct ResidentPass {
  int64_t rows_cold = 0, rows_local_hot = 0, bad = 0;
  std::vector<int64_t> send_counts;  // [P]
  const int64_t* slots = nullptr;
  const int64_t* pos = nullptr;
  const int64_t* nodes = nullptr;
};

class FeatureBackend {
 public:
  virtual ~FeatureBackend() = default;
  virtual std::string name() const = 0;
  virtual Device device() const = 0;
  // Validates ids[0, n) and copies rows it serves to out row i; peer[i] (zeroed by the caller) is
  // set to 1 for each row another rank caches. On a bad id it stops early and reports its
  // position, having set the `seen` bits of no more than the positions it visited.
  virtual LocalPass local_pass(const int64_t* ids, int64_t n, void* out, uint8_t* peer,
                               uint64_t* seen) = 0;
  // slots: host memory. rows: n * row_bytes in `space` (kHost: host memory; kDevice: the
  // backend's memory, e.g. from allocate). Both complete on return.
  virtual void serve_slots(const int64_t* slots, int64_t n, void* rows, MemorySpace space) = 0;
  // Stored row k of `rows` (in `space`) to output row pos[k] of out; node[k] is its node id
  // (pos and node: host memory; node picks per-node scales).
  virtual void place_rows(const void* rows, MemorySpace space, const int64_t* pos,
                          const int64_t* node, int64_t n, void* out) = 0;
  // Superbatches (Ginex, VLDB'22): `ids` (host, any order, repeats allowed) are every id the next
  // gathers will request. A backend whose cold rows are read from disk reads theirs now, in file
  // order, and local_pass then serves them from memory until the next call, which replaces them
  // (n = 0: frees them). reads_ahead(): whether read_ahead reads anything (false: the rows are in
  // memory, and read_ahead does nothing).
  virtual bool reads_ahead() const { return false; }
  virtual void read_ahead(const int64_t* ids, int64_t n) {
    (void)ids;
    (void)n;
  }
  // Ids in the backend's memory (a device sampler's block sources left there): classifies() says
  // whether the backend classifies them where they are (a device backend); a host backend's memory
  // is the host's, and the store runs local_pass. classify_resident reads back only the counts
  // (one copy of P + 4 words, whatever n); `offsets`: the P + 1 part offsets, `rank`: this one.
  // Repeated ids are each served. serve_resident: slots in the backend's memory, rows written
  // there. place_resident: `rows` in `space`, pos and node in the backend's memory.
  virtual bool classifies() const { return false; }
  virtual ResidentPass classify_resident(const int64_t* ids, int64_t n, void* out,
                                         const std::vector<int64_t>& offsets, int rank);
  virtual void serve_resident(const int64_t* slots, int64_t n, void* rows);
  virtual void place_resident(const void* rows, MemorySpace space, const int64_t* pos,
                              const int64_t* node, int64_t n, void* out);
  // `bytes` of the backend's memory; with `fence`, *fence is set to the release fence the consumer
  // records where its work on the memory went when it lets go (core/release_fence.hpp), so the
  // backend reuses it after that point without a host wait (null: none needed, host memory).
  // And copies to and from the host (tests, tools).
  virtual std::shared_ptr<void> allocate(size_t bytes, std::shared_ptr<ReleaseFence>* fence) = 0;
  std::shared_ptr<void> allocate(size_t bytes) { return allocate(bytes, nullptr); }
  virtual void copy_to_host(const void* src, size_t bytes, void* host) = 0;
  virtual void copy_from_host(void* dst, const void* host, size_t bytes) = 0;
  // Device backends: the blocking syncs and device-to-host copies their executor has issued since
  // construction (core/host_traffic.hpp); the host backend has none.
  virtual HostTraffic traffic() const { return {}; }
};

using FeatureBackendFactory = std::function<std::unique_ptr<FeatureBackend>(const FeatureSource&)>;

std::unique_ptr<FeatureBackend> make_host_feature_backend(const FeatureSource& src);
// The device backend (KernelFeatureBackend) executed on the host, for CPU tests.
std::unique_ptr<FeatureBackend> make_emulated_feature_backend(const FeatureSource& src);

}  // namespace dsp
