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
#include <functional>
#include <memory>
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

// BGL's dynamic cache of the rows other ranks serve, in front of a FeatureStore's requests, so
// every backend uses it: rows found in it are placed in the gather's output and not requested;
// rows received from peers are inserted. Level 1 is the rank's own; level 2 (shared_rows > 0) a
// shared memory object that the ranks of a machine opening the same `shared_name` share.
struct FifoCacheOptions {
  int64_t rows = 0;         // level 1 capacity (rows); 0: no FIFO cache
  int64_t shared_rows = 0;  // level 2 capacity; 0: no second level
  std::string shared_name;  // level 2's name ("/name"), the same on the ranks of a machine
};

class FifoLevels {
 public:
  // Replaces any levels (rows == 0: none). InvalidArgument for a negative capacity or a second
  // level without a first.
  void enable(const FifoCacheOptions& opts, int64_t num_nodes, size_t row_bytes);
  bool on() const { return first_ != nullptr; }
  FifoRowCache* level(int l) const { return l == 0 ? first_.get() : shared_.get(); }
  // Rows a level found: host memory, `h` rows for ids[k] at their request positions pos[k].
  using Place = std::function<void(const unsigned char* rows, const int64_t* pos,
                                   const int64_t* ids, int64_t h)>;
  // The ids[i] (i < n) flagged in `wanted` that a level holds: level 1, then level 2 for its
  // misses (level 2's hits move into level 1, as BGL's CPU cache feeds the GPU cache). Each
  // level's hits go to `place`, their flags cleared; hits[l]: the rows level l found.
  void serve(const int64_t* ids, int64_t n, uint8_t* wanted, const Place& place, int64_t hits[2]);
  // Rows received from peers (m rows in host memory for ids[k]) into both levels.
  void insert(const int64_t* ids, const unsigned char* rows, int64_t m);

 private:
  size_t row_bytes_ = 0;
  std::unique_ptr<FifoRowCache> first_, shared_;
};

}  // namespace dsp
