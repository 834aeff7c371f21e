#pragma once
// BGL's dynamic feature cache (digest bgl.md section 2.1): a fixed number of row slots filled
// first-in first-out. A miss is inserted at the tail and overwrites the oldest row; eviction costs
// one map update, no bookkeeping per hit (why BGL picked FIFO: it fits the per-batch budget).
// With proximity-aware seed order (--order bfs) consecutive batches share neighbours, so recently
// inserted rows are the ones the next batches ask for.
//
// FifoIndex is the policy alone (which node holds which slot) over memory its owner supplies, so
// the same code runs in a rank's private memory, in a mapping shared by the ranks of a machine,
// and in `dsp bench cache`'s trace replay (fifo_hit_rate). A node is held at most once: push()
// is only called for nodes find() reports absent, and eviction clears the evicted node's entry.
//
// FifoRowCache adds the rows and a lock. Private (level 1, one per rank) or shared (level 2: a
// POSIX shared memory object that every rank of a machine opening the same name maps; the first
// creates and initialises it). Lookups and inserts hold a process-shared robust mutex, so ranks
// and threads insert and evict concurrently, and a lookup never reads a row while it is being
// overwritten. A rank that dies holding the lock does not wedge its peers: the lock is robust, and
// the next locker rebuilds the map from the slots and drops the slot being written.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dsp {

struct FifoIndex {
  int32_t* slot_of;  // [num_nodes]: slot holding node v, or -1
  int64_t* node_of;  // [capacity]: node held by slot s, or -1
  uint64_t* tail;    // insertions so far; the next slot is *tail % capacity
  int64_t capacity;

  int64_t find(int64_t v) const { return slot_of[v]; }
  // Claims the oldest slot for v (which must not be held) and evicts its node; returns the slot.
  int64_t push(int64_t v) {
    const int64_t s = static_cast<int64_t>((*tail)++ % static_cast<uint64_t>(capacity));
    const int64_t old = node_of[s];
    if (old >= 0) slot_of[old] = -1;
    node_of[s] = v;
    slot_of[v] = static_cast<int32_t>(s);
    return s;
  }
};

// Hit rate of a FIFO of `capacity` rows replaying `ids` batch by batch (batch b is
// ids[batch_end[b-1], batch_end[b])): a batch's ids are looked up first, then its misses inserted
// (at most `capacity` of them), as a loader does. Starts empty; every access counts.
double fifo_hit_rate(const std::vector<int64_t>& ids, const std::vector<int64_t>& batch_end,
                     int64_t num_nodes, int64_t capacity);

struct FifoStats {
  int64_t lookups = 0, hits = 0, inserts = 0, evictions = 0;
};

class FifoRowCache {
 public:
  // `capacity` rows of `row_bytes` for node ids in [0, num_nodes). `shm_name` empty: private
  // memory; else a shared memory object name ("/name"): created if absent, attached otherwise
  // (InvalidArgument if its geometry differs). The creator unlinks the name when destroyed (the
  // mapping lives on in the ranks still attached).
  FifoRowCache(int64_t capacity, int64_t num_nodes, size_t row_bytes,
               const std::string& shm_name = "");
  ~FifoRowCache();
  FifoRowCache(const FifoRowCache&) = delete;
  FifoRowCache& operator=(const FifoRowCache&) = delete;

  int64_t capacity() const { return capacity_; }
  size_t row_bytes() const { return row_bytes_; }
  bool shared() const { return !shm_name_.empty(); }

  // For each ids[i] (in [0, num_nodes)) held by the cache: hit[i] = 1 and its row is appended to
  // `rows` (hits in request order). hit must be zeroed by the caller. Returns the number of hits.
  int64_t lookup(const int64_t* ids, int64_t n, uint8_t* hit, unsigned char* rows);
  // Inserts row k of `rows` for ids[k] unless the node is held already (so never twice), oldest
  // first out; at most capacity() rows per call. Returns the number inserted.
  int64_t insert(const int64_t* ids, const unsigned char* rows, int64_t n);

  // Snapshot of the held nodes by slot (-1: empty) and the counters (of every process sharing).
  std::vector<int64_t> held() const;
  FifoStats stats() const;

 private:
  struct Header;
  class Lock;
  void attach_check(int fd);
  int64_t capacity_, num_nodes_;
  size_t row_bytes_;
  std::string shm_name_;
  bool creator_ = false;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  Header* header_ = nullptr;
  FifoIndex index_{};
  unsigned char* rows_ = nullptr;
};

}  // namespace dsp
