#include "train/inference.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <torch/torch.h>

#include "core/error.hpp"
#include "graph/npy.hpp"
#include "layout/partition/partition_dir.hpp"
#include "train/device_io.hpp"
#include "train/step_embedding.hpp"

namespace dsp {

namespace {

// One batch's block: destinations `first_row + [b, e)` of the part (their whole in-neighbour
// rows), sources the destinations then new neighbours in first-seen order. Each row's neighbours
// are in the order of their dataset ids (`orig`: new2old), not the partition's, so that every
// node's aggregation sums in the same order whatever the rank count: outputs are identical at
// any P. `pos` (one entry per graph node, -1 outside a call) is the scratch map from global id to
// source position.
template <class Id>
Block full_block(const Csr& patch, const int64_t* orig, int64_t first_row, int64_t b, int64_t e,
                 std::vector<int32_t>& pos) {
  Block blk;
  blk.num_dst = e - b;
  const int64_t* ptr = patch.rowptr();
  const Id* nbr = patch.indices.data<Id>();
  blk.src_ids.reserve(static_cast<size_t>(blk.num_dst));
  for (int64_t r = b; r < e; ++r) {
    pos[first_row + r] = static_cast<int32_t>(blk.src_ids.size());
    blk.src_ids.push_back(first_row + r);
  }
  blk.indptr.assign(1, 0);
  blk.indices.reserve(static_cast<size_t>(ptr[e] - ptr[b]));
  std::vector<int64_t> row;
  for (int64_t r = b; r < e; ++r) {
    row.assign(nbr + ptr[r], nbr + ptr[r + 1]);
    const auto by_orig = [orig](int64_t x, int64_t y) { return orig[x] < orig[y]; };
    // Rows whose renumbering kept the dataset's order (every row of a 1-part partition) need
    // no sort: a linear check instead of n log n per row, layer and evaluation.
    if (!std::is_sorted(row.begin(), row.end(), by_orig))
      std::sort(row.begin(), row.end(), by_orig);
    for (const int64_t u : row) {
      if (pos[u] < 0) {
        pos[u] = static_cast<int32_t>(blk.src_ids.size());
        blk.src_ids.push_back(u);
      }
      blk.indices.push_back(pos[u]);
    }
    blk.indptr.push_back(static_cast<int64_t>(blk.indices.size()));
  }
  blk.num_src = static_cast<int64_t>(blk.src_ids.size());
  for (int64_t u : blk.src_ids) pos[u] = -1;
  return blk;
}

Block full_block(const Csr& patch, const int64_t* orig, int64_t first_row, int64_t b, int64_t e,
                 std::vector<int32_t>& pos) {
  return patch.index_dtype() == DType::kInt32
             ? full_block<int32_t>(patch, orig, first_row, b, e, pos)
             : full_block<int64_t>(patch, orig, first_row, b, e, pos);
}

}  // namespace

std::vector<float> fetch_rows(Communicator& comm, const PartitionMeta& meta,
                              const std::vector<float>& table, int64_t width,
                              const std::vector<int64_t>& ids) {
  const int P = comm.size(), me = comm.rank();
  const int64_t first = meta.offsets[me];
  const size_t row_bytes = static_cast<size_t>(width) * sizeof(float);
  std::vector<float> out(ids.size() * static_cast<size_t>(width));
  std::vector<std::vector<int64_t>> want(P), at(P);
  for (size_t i = 0; i < ids.size(); ++i) {
    const int p = meta.owner(ids[i]);
    if (p == me) {
      std::memcpy(&out[i * width], &table[(ids[i] - first) * width], row_bytes);
    } else {
      want[p].push_back(ids[i]);
      at[p].push_back(static_cast<int64_t>(i));
    }
  }
  std::vector<int64_t> send, counts(P), recv_counts;
  for (int p = 0; p < P; ++p) {
    counts[p] = static_cast<int64_t>(want[p].size());
    send.insert(send.end(), want[p].begin(), want[p].end());
  }
  OpOptions o;
  o.label = "infer:ids";
  const std::vector<int64_t> asked = comm.all_to_all_v(send, counts, &recv_counts, o);
  std::vector<float> reply(asked.size() * static_cast<size_t>(width));
  for (size_t i = 0; i < asked.size(); ++i) {
    std::memcpy(&reply[i * width], &table[(asked[i] - first) * width], row_bytes);
  }
  for (auto& c : recv_counts) c *= width;
  o.label = "infer:rows";
  const std::vector<float> rows = comm.all_to_all_v(reply, recv_counts, nullptr, o);
  size_t k = 0;
  for (int p = 0; p < P; ++p) {
    for (int64_t i : at[p]) std::memcpy(&out[i * width], &rows[(k++) * width], row_bytes);
  }
  return out;
}

namespace {

// GCN's source scales: (out-degree + 1)^-1/2 of every node in the whole graph, the out-degrees
// counted over every part's rows (one all_reduce).
std::vector<float> gcn_source_scales(const PartitionData& part, Communicator& comm) {
  const int64_t N = part.meta.num_nodes;
  std::vector<int32_t> deg(static_cast<size_t>(N), 0);
  const Csr& g = part.patch;
  for (int64_t k = 0; k < g.num_edges(); ++k) {
    const int64_t u = g.index_dtype() == DType::kInt32 ? g.indices.data<int32_t>()[k]
                                                       : g.indices.data<int64_t>()[k];
    ++deg[u];
  }
  OpOptions o;
  o.label = "infer:out_degrees";
  o.host_buffers = true;
  comm.all_reduce(deg.data(), N, DType::kInt32, ReduceOp::kSum, o);
  std::vector<float> scale(static_cast<size_t>(N));
  for (int64_t v = 0; v < N; ++v) scale[v] = 1.0f / std::sqrt(static_cast<float>(deg[v]) + 1.0f);
  return scale;
}

torch::Tensor host_ids(const std::vector<int64_t>& v, int64_t minus, DeviceIo& io) {
  auto t = torch::empty({static_cast<int64_t>(v.size())}, torch::kInt64);
  int64_t* p = t.data_ptr<int64_t>();
  for (size_t i = 0; i < v.size(); ++i) p[i] = v[i] - minus;
  return io.upload(t);
}

// The previous layer's rows of `ids` (a block's sources) on the trainer's device: this rank's
// from its `table` (this part's rows, on the device), other ranks' from their owners (one
// all_to_all_v of ids and one of rows, host buffers: the rows asked of this rank read from the
// device once). Collective (not at one rank: every row is this rank's).
torch::Tensor source_rows(Communicator& comm, const PartitionMeta& meta, const torch::Tensor& table,
                          const std::vector<int64_t>& ids, DeviceIo& io) {
  const int P = comm.size(), me = comm.rank();
  const int64_t first = meta.offsets[me], width = table.size(1);
  if (P == 1) return table.index_select(0, host_ids(ids, first, io));
  std::vector<int64_t> own, own_at;
  std::vector<std::vector<int64_t>> want(P), at(P);
  for (size_t i = 0; i < ids.size(); ++i) {
    const int p = meta.owner(ids[i]);
    (p == me ? own : want[p]).push_back(ids[i]);
    (p == me ? own_at : at[p]).push_back(static_cast<int64_t>(i));
  }
  std::vector<int64_t> send, counts(P), recv_counts, remote_at;
  for (int p = 0; p < P; ++p) {
    counts[p] = static_cast<int64_t>(want[p].size());
    send.insert(send.end(), want[p].begin(), want[p].end());
    remote_at.insert(remote_at.end(), at[p].begin(), at[p].end());
  }
  OpOptions o;
  o.label = "infer:ids";
  const std::vector<int64_t> asked = comm.all_to_all_v(send, counts, &recv_counts, o);
  std::vector<float> reply(asked.size() * static_cast<size_t>(width));
  if (!asked.empty()) {
    const torch::Tensor r = io.read(table.index_select(0, host_ids(asked, first, io)));
    std::copy(r.data_ptr<float>(), r.data_ptr<float>() + r.numel(), reply.begin());
  }
  for (auto& c : recv_counts) c *= width;
  o.label = "infer:rows";
  std::vector<float> rows = comm.all_to_all_v(reply, recv_counts, nullptr, o);
  auto out = torch::empty({static_cast<int64_t>(ids.size()), width}, table.options());
  if (!own.empty()) {
    out.index_copy_(0, host_ids(own_at, 0, io), table.index_select(0, host_ids(own, first, io)));
  }
  if (!remote_at.empty()) {
    const auto got = torch::from_blob(rows.data(), {static_cast<int64_t>(remote_at.size()), width},
                                      torch::kFloat32);
    out.index_copy_(0, host_ids(remote_at, 0, io), io.upload(got));
  }
  return out;
}

// The block's rows of GCN's whole-graph source scales (`scales`, on the device), or undefined.
torch::Tensor source_scales(const torch::Tensor& scales, const Block& blk, DeviceIo& io) {
  if (!scales.defined()) return {};
  return scales.index_select(0, host_ids(blk.src_ids, 0, io));
}

}  // namespace

// The layers' tables (this part's rows of the layer's input and output) live on the trainer's
// device: a batch's source rows are selected there, its output rows written there, and only the
// rows other ranks ask for, and the last layer's table at the end, are read back.
std::vector<float> layerwise_inference(RankRuntime& rt, Trainer& trainer,
                                       const InferenceOptions& o) {
  DSP_CHECK_ARG(o.batch_size > 0, "layer-wise inference: batch size must be > 0");
  const PartitionData& part = rt.part();
  const PartitionMeta& meta = part.meta;
  const int64_t first = meta.offsets[rt.rank()];
  const int64_t rows = part.patch.num_nodes;
  CoordinatedCommunicator& tc = rt.channel(WorkerKind::kTrainer);
  CoordinatedCommunicator& lc = rt.channel(WorkerKind::kLoader);
  DeviceIo& io = trainer.device_io();
  int64_t step = o.first_step;
  tc.set_step(o.epoch, step++);
  int64_t batches = (rows + o.batch_size - 1) / o.batch_size;
  OpOptions host;
  host.label = "infer:batches";
  host.host_buffers = true;  // a scalar on the host, whatever the trainer channel's memory space
  tc.all_reduce(&batches, 1, DType::kInt64, ReduceOp::kMax, host);
  const bool gcn = trainer.config().model.model == ModelKind::kGcn;
  torch::Tensor scales;
  if (gcn) {
    const std::vector<float> s = gcn_source_scales(part, tc);
    scales = io.upload(torch::from_blob(const_cast<float*>(s.data()),
                                        {static_cast<int64_t>(s.size())}, torch::kFloat32)
                           .clone());
  }
  std::vector<int32_t> pos(static_cast<size_t>(meta.num_nodes), -1);
  const Array new2old = load_new2old(rt.partition_dir(), meta.num_nodes);
  const int64_t* orig = new2old.data<int64_t>();
  const int layers = o.layers > 0 ? o.layers : trainer.config().model.layers;
  DSP_CHECK_ARG(layers <= trainer.config().model.layers,
                "layer-wise inference: {} layers of a "
                "{}-layer model",
                layers, trainer.config().model.layers);
  const auto on_device = torch::TensorOptions().dtype(torch::kFloat32).device(io.device());
  torch::Tensor in, out;
  for (int l = 0; l < layers; ++l) {
    out = torch::zeros({rows, trainer.eval().layer_width(l)}, on_device);
    for (int64_t s = 0; s < batches; ++s, ++step) {
      const int64_t b = std::min(rows, s * o.batch_size), e = std::min(rows, b + o.batch_size);
      LoadedBatch lb;
      lb.sample.blocks.push_back(full_block(part.patch, orig, first, b, e, pos));
      const Block& blk = lb.sample.blocks.front();
      torch::Tensor h;
      if (l == 0) {
        lb.sample.epoch = o.epoch;
        lb.sample.batch = step;
        lb.sample.seeds.assign(blk.src_ids.begin(), blk.src_ids.begin() + blk.num_dst);
        lc.set_step(o.epoch, step);
        lb = rt.features().load(std::move(lb.sample));
        tc.set_step(o.epoch, step);
        trainer.embedding().gather(lb);  // collective: learnable embeddings' rows, if any
      } else {
        tc.set_step(o.epoch, step);
        h = source_rows(tc, meta, in, lb.sample.blocks.front().src_ids, io);
      }
      if (e > b) {
        const Block& bl = lb.sample.blocks.front();
        out.narrow(0, b, e - b)
            .copy_(trainer.eval().infer_layer(l, lb, h, source_scales(scales, bl, io)));
      }
      if (o.progress) o.progress(l * batches + s + 1, layers * batches);
    }
    in = out;
  }
  const torch::Tensor last = io.read(in);
  return std::vector<float>(last.data_ptr<float>(), last.data_ptr<float>() + last.numel());
}

InferenceBytes layerwise_inference_bytes(const PartitionMeta& meta, int rank,
                                         const std::vector<int64_t>& widths, int64_t batch_size,
                                         bool on_device) {
  const PartStats& ps = meta.part.at(rank);
  const int64_t rows = ps.end - ps.begin;
  int64_t two_layers = 0, widest = meta.feature_dim;
  for (size_t l = 0; l < widths.size(); ++l) {
    two_layers = std::max(two_layers, (l > 0 ? widths[l - 1] : 0) + widths[l]);
    widest = std::max(widest, widths[l]);
  }
  // A batch: its edges (indices, transposed pattern: about 32 bytes each) and its source rows
  // (input, fetched copy and the layer's temporaries: about 4 copies of the widest row).
  const int64_t dst = std::min(rows, batch_size);
  const int64_t edges = rows > 0 ? (ps.edges + rows - 1) / rows * dst : 0;
  const int64_t src = std::min(meta.num_nodes, dst + edges);
  const int64_t tables = 4 * rows * two_layers, batch_rows = 4 * 4 * widest * src;
  const int64_t host = 8 * meta.num_nodes + 32 * edges;  // positions and the batch's block
  if (!on_device) return {host + tables + batch_rows, 0};
  return {host, tables + batch_rows + 32 * edges};  // the block's edges uploaded for aggregation
}

void tally_rows(const std::vector<float>& logits, int64_t width, int64_t first_row,
                const std::vector<int64_t>& ids, const Array& labels, EvalTally* tally) {
  const bool matrix = labels.ndim() == 2;
  DSP_CHECK_ARG(!matrix || (labels.dtype() == DType::kInt8 && labels.dim(1) == width),
                "multi-label labels of {} columns for a model of {} outputs",
                matrix ? labels.dim(1) : 0, width);
  for (int64_t v : ids) {
    const float* row = &logits[(v - first_row) * width];
    if (matrix) {
      tally->add(row, 1, labels.data<int8_t>() + v * width);
    } else {
      tally->add(row, 1, labels.data<int64_t>() + v);
    }
  }
}

}  // namespace dsp
