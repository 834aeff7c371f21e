#pragma once
// Learnable node embeddings partitioned across ranks (WholeGraph's distributed embedding, DGL's
// NodeEmbedding with SparseAdam / SparseAdagrad): for link prediction on featureless graphs, one
// row of `dim` floats per node, learnt with the model.
//
// The contract:
//  * Ownership: rank p owns the rows of global ids [offsets[p], offsets[p+1]) (the partition's
//    offsets), their values and their optimizer state. Nothing is replicated.
//  * Initial values: row of global id v is keyed by (seed, dataset id of v): draw j of
//    RngStream(embedding_key(seed), dataset id) as u, value (2u - 1) * init_scale in float, u a
//    24-bit uniform01f, so a dataset node's row does not depend on the rank count or partition.
//  * gather and apply_gradients are collectives: every rank calls them, in the same order,
//    possibly with n = 0. Each is one count exchange and two all_to_all_v rounds (gather: ids to
//    the owners, rows back; apply_gradients: ids, then gradient rows), in host buffers
//    (OpOptions::host_buffers); on one rank none (it serves itself from the same buffers). Ids
//    outside [0, num_nodes) are refused with InvalidArgument on the calling rank before any
//    communication. Repeats are allowed.
//  * No staleness: apply_gradients updates the owners' rows before it returns, so the next gather
//    on any rank sees them.
//  * Gradients: an owner sums the rows it receives for one id in (requester rank, position)
//    order, each scaled by its requester's `scale` first, in float, starting from 0. The order is
//    fixed, so the result does not depend on threads; it does depend on the rank count (the
//    requesters differ), as any all-reduce's does. Then ONE step per touched row, in float32:
//      adam (SparseAdam): t_r += 1 (per row); bc1 = 1 - b1^t_r, bc2 = 1 - b2^t_r (pow in double,
//        rounded to float); m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*(g*g);
//        x -= lr * (m / bc1) / (sqrt(v / bc2) + eps)      (C precedence, left to right)
//      adagrad: s += g*g; x -= lr * g / (sqrt(s) + eps)
//    the constants (b1, 1-b1, b2, 1-b2, lr, eps) computed in double and rounded to float once.
//    Rows no id touched keep their values and state (their step count included).
//  * Threads: not thread-safe; one thread (the trainer's) calls it. The per-row steps run on
//    OpenMP threads (core/parallel.hpp) on the host storage, one device thread per row on a
//    device storage; each row's arithmetic on one thread either way. The host storage keeps its
//    arrays on transparent huge pages, prefetches the rows a few steps ahead, vectorizes a row's
//    cells and takes the bias corrections from a table of the same expression per step count
//    (the rows are scattered: a 1M-row table's step was bound by their memory, not arithmetic).
//  * save/load: one file per rank (not collective), staged and checksummed; load refuses a file of
//    another range, dim, optimizer or partition (dataset ids), or a damaged one, with FormatError
//    naming the file, and leaves the table unchanged then. A loaded table continues bitwise.
//  * Where rows live: in the table's storage (embedding_storage.hpp), chosen by the factory the
//    constructor takes: host memory (the default), or a device storage (KernelEmbeddingStorage:
//    values, optimizer state and step counts in device memory on a GPU rank, RankRuntime's
//    embedding_storage(); the same code on the host when emulated). gather's `out` and
//    apply_gradients' `grads` are in memory() (device memory for a CUDA table); the ids are host
//    arrays. Every storage computes the same bits (embedding_kernels.hpp; CUDA without fused
//    multiply-adds, its double pow within 2 ulp of the host's before the rounding to float).
//  * Staging (a known cost of a device table): the protocol's rounds are host buffers whatever the
//    channel, so the rows a device table serves are copied to the host before the all-to-all and
//    the rows it receives are copied back to the device after it; gradient rows likewise (one
//    device -> host copy of the scaled rows on the requester, one host -> device copy on the
//    owner). The row lists (positions, the step plan) are computed on the host and uploaded.
//  * Memory: allocated in the constructor. footprint() says what a table takes where (values,
//    state and step counts in the storage's memory; the per-row slot on the host), bytes() the
//    sum, for the job's memory check first. A call adds host scratch in proportion to its
//    request (ids, and about two copies of its rows, kept for the next calls: growth-only, so a
//    step does not zero and page in fresh buffers) and, on a device storage, device scratch for
//    the rows it stages (growth-only).
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "ccc/communicator.hpp"
#include "core/choice.hpp"
#include "core/device.hpp"
#include "core/fs.hpp"
#include "layout/partition/owner_ranges.hpp"
#include "layout/store/embedding_storage.hpp"

namespace dsp {

// The table's sparse optimizer (only rows with a gradient change).
enum class EmbeddingOptimizer { kAdam, kAdagrad };
const Names<EmbeddingOptimizer>& names_of(EmbeddingOptimizer);  // adam, adagrad

struct EmbeddingOptions {
  int64_t dim = 0;  // columns (> 0)
  EmbeddingOptimizer optimizer = EmbeddingOptimizer::kAdam;
  double lr = 0.01;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam; adagrad uses eps (and lr)
  double init_scale = 0.1;                        // rows start uniform in [-init_scale, init_scale)
  uint64_t seed = 0;
  // InvalidArgument naming the option: "--embedding-dim must be > 0, got 0".
  void validate() const;
};

// The key of the initial values' streams (the sampler's and dropout's keys differ).
uint64_t embedding_key(uint64_t seed);

// What one rank's table did since construction or reset_stats().
struct EmbeddingStats {
  int64_t gather_calls = 0, grad_calls = 0;
  int64_t rows_requested = 0;  // ids passed to gather by this rank
  int64_t rows_remote = 0;     // ... of them owned by another rank
  int64_t rows_served = 0;     // rows this rank sent back to requesters (itself included)
  int64_t grads_received = 0;  // gradient rows this rank received as owner (itself included)
  int64_t rows_updated = 0;    // optimizer steps (distinct rows per call)
  int64_t bytes_sent = 0;      // payload of this table's rounds, to other ranks only
  int64_t bytes_recv = 0;
};

struct EmbeddingShard;

class EmbeddingTable {
 public:
  // offsets: the partition's (comm.size() + 1 entries, from 0, non-decreasing). dataset_ids:
  // end() - begin() entries (host), the dataset id of each owned global id (the partition's
  // new2old of the owned range); null: the global ids themselves. storage: where the rows live
  // (empty: host memory). InvalidArgument on bad options or offsets.
  EmbeddingTable(Communicator& comm, std::vector<int64_t> offsets, const int64_t* dataset_ids,
                 EmbeddingOptions opts, const EmbeddingStorageFactory& storage = {});

  // Collective: out[i*dim .. (i+1)*dim) = row of ids[i] (global ids, any owner). ids: host;
  // out: memory() (device memory for a CUDA table), complete when this returns.
  void gather(const int64_t* ids, int64_t n, float* out);
  // The same into host memory, whatever the storage (tests, tools).
  std::vector<float> gather(const std::vector<int64_t>& ids);
  // Collective: grads[i*dim ..] is d loss / d row(ids[i]); multiplied by `scale` (the trainer's
  // 1 / global count), sent to the owners, summed and applied as the contract says. ids: host;
  // grads: memory().
  void apply_gradients(const int64_t* ids, int64_t n, const float* grads, float scale);

  // Where gather's out and apply_gradients' grads live (memory()), the storage's device and
  // name; its values() are this rank's rows, [end - begin, dim] in memory().
  const EmbeddingStorage& storage() const { return *storage_; }
  const EmbeddingOptions& options() const { return opts_; }  // dim, optimizer, lr, ...
  void set_lr(double lr);  // the rate of later steps (a schedule's); > 0

  // This rank's rows and optimizer state to `path` (temp file + rename; native byte order) and
  // back. load: FormatError naming the file when its range, dim, optimizer or dataset ids differ
  // from this table's, or a checksum fails; IoError when it cannot be read.
  void save(const std::string& path) const;
  void load(const std::string& path);

  // Which rank owns which rows: this rank's [begin(), end()) of num_ids() global ids.
  const OwnerRanges& ranges() const { return ranges_; }
  std::vector<float> host_rows() const;  // this rank's rows, copied to the host
  const EmbeddingStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

 private:
  Communicator& comm_;
  OwnerRanges ranges_;
  EmbeddingOptions opts_;
  bool adam_;
  int64_t begin_, end_;                        // ranges_'s for this rank
  uint64_t ids_digest_;                        // of the owned range's dataset ids (save/load)
  std::unique_ptr<EmbeddingStorage> storage_;  // values, optimizer state, step counts
  std::vector<int64_t> slot_;                  // per row: its slot in the current step, or -1
  // Host row buffers of the protocol's rounds, kept between calls (growth-only): gather's rows
  // served and received, apply_gradients' scaled and received gradient rows.
  std::vector<float> reply_, rows_, sg_, rg_;
  EmbeddingStats stats_;

  // What save writes into a shard file's header and load checks (embedding_file.hpp).
  EmbeddingShard shard() const;
  // The rounds of a gather: the returned host rows (rows_), row pos[i] that of ids[i].
  const float* fetch(const int64_t* ids, int64_t n, std::vector<int64_t>& pos);
  // Sums the received gradient rows per id in arrival order and steps each touched row once.
  void step_rows(const std::vector<int64_t>& ids, const float* grads);
  EmbeddingStepPlan plan_step(const std::vector<int64_t>& ids);
  void count_bytes(const std::vector<int64_t>& send, const std::vector<int64_t>& recv,
                   int64_t elem);
};

// Bytes one rank needs for `rows` rows (values, optimizer state, per-row bookkeeping), in all
// and split by where they live for a storage in `space` (the per-row slot is always host).
uint64_t embedding_bytes(int64_t rows, int64_t dim, EmbeddingOptimizer optimizer);
struct EmbeddingFootprint {
  uint64_t host = 0, device = 0;
};
EmbeddingFootprint embedding_footprint(int64_t rows, int64_t dim, EmbeddingOptimizer optimizer,
                                       MemorySpace space);

// Refuses (core/memory.hpp's check_memory) a table of `rows` rows on this rank that does not fit
// `budget`, naming --embedding-dim: all of it (a host table).
void check_embedding_memory(int64_t rows, int64_t dim, EmbeddingOptimizer optimizer,
                            uint64_t budget);
// A table in `space`: its host part against `budget`, its device part against `device_free`
// (the device's free bytes: pipeline/rank/backends.hpp's free_device_memory; RankRuntime's
// check_embedding_memory passes them).
void check_embedding_memory(int64_t rows, int64_t dim, EmbeddingOptimizer optimizer,
                            uint64_t budget, MemorySpace space, uint64_t device_free);

}  // namespace dsp
