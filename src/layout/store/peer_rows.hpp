#pragma once
// A gather's collective round with the other ranks (FeatureStore::gather, gather_resident and
// gather_stores): the rows a rank needs from peers' caches travel as their cache slots to the
// owners, each owner serves them from its cache, and the rows come back in the communicator's
// memory space: the backend's memory on a device-space channel (NCCL, or MPI staged through
// pinned memory), so that a peer's hot rows reach the output without dsp copying them through the
// host; host memory otherwise.
#include <cstdint>
#include <memory>
#include <vector>

#include "ccc/communicator.hpp"
#include "layout/store/feature_backend.hpp"

namespace dsp {

// Memory for `bytes` (at least 1) in `space`: the backend's memory when kDevice, host otherwise.
std::shared_ptr<void> row_buffer(FeatureBackend& be, MemorySpace space, size_t bytes);

class PeerRows {
 public:
  // Rows of row_bytes each; this rank's cache holds cache_rows of them (the slots peers may ask).
  PeerRows(Communicator& comm, FeatureBackend& be, size_t row_bytes, int64_t cache_rows)
      : comm_(comm), be_(be), row_bytes_(row_bytes), cache_rows_(cache_rows) {}
  // The rows of `slots` (host; grouped by owner, asked[p] for rank p) from their owners: one count
  // exchange, the slots out (host buffers: small), the rows back, contiguous in slot order in the
  // communicator's memory space. Complete on return. Collective.
  std::shared_ptr<void> fetch(const std::vector<int64_t>& slots, const std::vector<int64_t>& asked);
  // The same round for slots in the backend's memory (FeatureBackend::classify_resident's): on a
  // device-space channel they go to their owners and are served without leaving it; the rows are
  // placed into `out` by the backend (place_resident). Collective.
  void fetch_resident(const ResidentPass& r, void* out);
  // Rows of this rank's cache by slot, for peers, into `rows` in `space`; a slot outside the
  // cache is an error naming it.
  void serve(const int64_t* slots, int64_t n, void* rows, MemorySpace space);

 private:
  // The served rows out (served[p] rows to peer p), the asked rows in (asked[p] from p), as bytes
  // in the communicator's memory space; complete on return.
  void exchange_rows(const void* out_rows, const std::vector<int64_t>& served, void* in_rows,
                     const std::vector<int64_t>& asked);

  Communicator& comm_;
  FeatureBackend& be_;
  size_t row_bytes_;
  int64_t cache_rows_;
};

}  // namespace dsp
