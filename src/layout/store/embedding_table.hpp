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
//    (OpOptions::host_buffers). Ids outside [0, num_nodes) are refused with InvalidArgument on
//    the calling rank before any communication. Repeats are allowed.
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
//    OpenMP threads (core/parallel.hpp), each row's arithmetic on one thread.
//  * save/load: one file per rank (not collective), staged and checksummed; load refuses a file of
//    another range, dim, optimizer or partition (dataset ids), or a damaged one, with FormatError
//    naming the file, and leaves the table unchanged then. A loaded table continues bitwise.
//  * Memory: host memory only (a GPU rank's device-resident table is later work). The table is
//    allocated in the constructor: bytes() is what it takes, for the job's memory check first.
//    A call adds scratch in proportion to its request (ids, and about three copies of its rows).
#include <cstdint>
#include <string>
#include <vector>

#include "ccc/communicator.hpp"
#include "core/fs.hpp"

namespace dsp {

struct EmbeddingOptions {
  int64_t dim = 0;                 // columns (> 0)
  std::string optimizer = "adam";  // adam | adagrad (sparse: only rows with a gradient change)
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

class EmbeddingTable {
 public:
  // offsets: the partition's (comm.size() + 1 entries, from 0, non-decreasing). dataset_ids:
  // end() - begin() entries, the dataset id of each owned global id (the partition's new2old of
  // the owned range); null: the global ids themselves. InvalidArgument on bad options or offsets.
  EmbeddingTable(Communicator& comm, std::vector<int64_t> offsets, const int64_t* dataset_ids,
                 EmbeddingOptions opts);

  // Collective: out[i*dim .. (i+1)*dim) = row of ids[i] (global ids, any owner).
  void gather(const int64_t* ids, int64_t n, float* out);
  std::vector<float> gather(const std::vector<int64_t>& ids);
  // Collective: grads[i*dim ..] is d loss / d row(ids[i]); multiplied by `scale` (the trainer's
  // 1 / global count), sent to the owners, summed and applied as the contract says.
  void apply_gradients(const int64_t* ids, int64_t n, const float* grads, float scale);

  void set_lr(double lr);  // the rate of later steps (a schedule's); > 0
  double lr() const { return opts_.lr; }

  // This rank's rows and optimizer state to `path` (temp file + rename; native byte order) and
  // back. load: FormatError naming the file when its range, dim, optimizer or dataset ids differ
  // from this table's, or a checksum fails; IoError when it cannot be read.
  void save(const std::string& path) const;
  void load(const std::string& path);

  // Bytes one rank needs for `rows` rows (values, optimizer state, per-row bookkeeping).
  static uint64_t bytes(int64_t rows, int64_t dim, const std::string& optimizer);

  int64_t dim() const { return opts_.dim; }
  int64_t begin() const { return begin_; }
  int64_t end() const { return end_; }
  int64_t num_nodes() const { return offsets_.back(); }
  const std::string& optimizer() const { return opts_.optimizer; }
  int owner(int64_t id) const;  // rank owning global id `id` (in [0, num_nodes))
  const float* rows() const { return values_.data(); }  // [end-begin, dim]
  const EmbeddingStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

 private:
  Communicator& comm_;
  std::vector<int64_t> offsets_;
  EmbeddingOptions opts_;
  bool adam_;
  int64_t begin_, end_;
  uint64_t ids_digest_;                 // of the owned range's dataset ids (save/load)
  std::vector<float> values_;           // [rows, dim]
  std::vector<float> state1_, state2_;  // adam: m, v; adagrad: s, (empty)
  std::vector<int64_t> steps_;          // adam: per-row step count
  std::vector<int64_t> slot_;           // per row: its slot in the current step, or -1
  EmbeddingStats stats_;

  // The file's sections after its header, in order (absent ones empty).
  struct Section {
    const char* what;
    const void* data;
    size_t bytes;
  };
  std::vector<Section> sections() const;
  void check_header(const std::string& path, const MappedFile& file) const;
  void init_rows(const int64_t* dataset_ids);
  // Requests grouped by owner: send_ids (ids in owner order), pos[i] = position of ids[i] in it.
  void group_by_owner(const int64_t* ids, int64_t n, const char* what, std::vector<int64_t>& send,
                      std::vector<int64_t>& counts, std::vector<int64_t>& pos) const;
  // Sums the received gradient rows per id in arrival order and steps each touched row once.
  void step_rows(const std::vector<int64_t>& ids, const std::vector<float>& grads);
  void count_bytes(const std::vector<int64_t>& send, const std::vector<int64_t>& recv,
                   int64_t elem);
};

// Refuses (core/memory.hpp's check_memory) a table of `rows` rows on this rank that does not fit
// `budget`, naming --embedding-dim.
void check_embedding_memory(int64_t rows, int64_t dim, const std::string& optimizer,
                            uint64_t budget);

}  // namespace dsp
