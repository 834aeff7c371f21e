#include "train/aggregate.hpp"

#include <ATen/Parallel.h>
#include <fmt/ranges.h>

#include <chrono>
#include <limits>
#include <string>

#include "core/error.hpp"
#include "train/aggregate_kernels.hpp"

#ifdef DSP_TRAIN_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "train/cuda/kernels.hpp"
#endif
#include "train/device_io.hpp"

namespace dsp {

namespace {
// A block's edge arrays where the sampler left them (Block::on_device), wrapped without a copy
// (the tensors share the arrays' owner, and record its release fence as they go: the sampler
// reuses the arrays after the kernels that read them), then moved to `device` if elsewhere.
void wrap_device_edges(const Block& b, const torch::Device& device, BlockTensors& t) {
  const BlockEdges& e = *b.on_device;
  const torch::Device where =
      e.device.is_cuda()
          ? torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(e.device.index))
          : torch::Device(torch::kCPU);
  auto opts = torch::TensorOptions().dtype(torch::kInt64).device(where);
  std::shared_ptr<const BlockEdges> keep = b.on_device;
  auto hold = [keep](void*) { record_release(keep->fence, keep->device); };
  t.indptr = torch::from_blob(const_cast<int64_t*>(e.indptr), {b.num_dst + 1}, hold, opts);
  t.indices = e.num_edges > 0
                  ? torch::from_blob(const_cast<int64_t*>(e.indices), {e.num_edges}, hold, opts)
                  : torch::empty({0}, opts);
  if (e.weights) {
    t.weights = e.num_edges > 0 ? torch::from_blob(const_cast<float*>(e.weights), {e.num_edges},
                                                   hold, opts.dtype(torch::kFloat32))
                                : torch::empty({0}, opts.dtype(torch::kFloat32));
  }
  if (where != device) {
    t.indptr = t.indptr.to(device);
    t.indices = t.indices.to(device);
    if (t.weights.defined()) t.weights = t.weights.to(device);
  }
}
}  // namespace

void record_release(const std::shared_ptr<ReleaseFence>& fence, const Device& d) {
  if (!fence) return;
#ifdef DSP_TRAIN_CUDA
  if (d.is_cuda()) {
    return fence->record(
        c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(d.index)).stream());
  }
#endif
  (void)d;
  fence->record(nullptr);
}

BlockTensors block_to_tensors(const Block& b, const torch::Device& device) {
  DSP_CHECK_ARG(b.num_dst >= 0 && b.num_dst <= b.num_src,
                "block has {} destination nodes but only {} source nodes (dst must prefix src)",
                b.num_dst, b.num_src);
  BlockTensors t;
  t.num_dst = b.num_dst;
  t.num_src = b.num_src;
  t.cache = std::make_shared<BlockCache>();
  if (b.on_device) {  // built by the sampler's device backend: its invariants hold there
    wrap_device_edges(b, device, t);
    return t;
  }
  DSP_CHECK_ARG(static_cast<int64_t>(b.indptr.size()) == b.num_dst + 1,
                "block indptr has {} entries, expected num_dst + 1 = {}", b.indptr.size(),
                b.num_dst + 1);
  DSP_CHECK_ARG(b.indptr.front() == 0 && b.indptr.back() == b.num_edges(),
                "block indptr spans [{}, {}] but the block has {} edges", b.indptr.front(),
                b.indptr.back(), b.num_edges());
  auto opts = torch::TensorOptions().dtype(torch::kInt64);
  // from_blob does not copy; the tensors are never written, so the const_cast is safe.
  t.indptr = torch::from_blob(const_cast<int64_t*>(b.indptr.data()), {b.num_dst + 1}, opts);
  t.indices = b.num_edges() > 0
                  ? torch::from_blob(const_cast<int64_t*>(b.indices.data()), {b.num_edges()}, opts)
                  : torch::empty({0}, opts);
  if (!b.weights.empty()) {
    DSP_CHECK_ARG(static_cast<int64_t>(b.weights.size()) == b.num_edges(),
                  "block has {} edge weights for {} edges", b.weights.size(), b.num_edges());
    t.weights = torch::from_blob(const_cast<float*>(b.weights.data()), {b.num_edges()},
                                 opts.dtype(torch::kFloat32));
  }
  if (device != torch::kCPU) {  // queued through pinned memory: no wait for the device
    t.indptr = upload_to_device(t.indptr, device);
    t.indices = upload_to_device(t.indices, device);
    if (t.weights.defined()) t.weights = upload_to_device(t.weights, device);
  }
  return t;
}

std::vector<BlockTensors> blocks_to_tensors(const std::vector<Block>& blocks,
                                            const torch::Device& device) {
  std::vector<BlockTensors> out;
  out.reserve(blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i) {
    out.push_back(block_to_tensors(blocks[i], device));
    if (i > 0) {
      // The destination nodes of a block are the source nodes of the next one.
      DSP_CHECK_ARG(blocks[i].num_src == blocks[i - 1].num_dst,
                    "block {} has {} source nodes but block {} has {} destination nodes", i,
                    blocks[i].num_src, i - 1, blocks[i - 1].num_dst);
    }
  }
  return out;
}

AggregationTimes& aggregation_times() {
  thread_local AggregationTimes t;
  return t;
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// ---- the block's derived data ----------------------------------------------------------------

BlockCache& cache_of(const BlockTensors& b) {
  DSP_CHECK_ARG(b.cache != nullptr,
                "BlockTensors without a cache: build them with "
                "block_to_tensors");
  return *b.cache;
}

torch::Tensor in_degree(const BlockTensors& b) {
  return b.indptr.narrow(0, 1, b.num_dst) - b.indptr.narrow(0, 0, b.num_dst);
}

// Counting sort of the edges by source: rows keep the edges in CSR order, so every transposed
// row lists its destinations ascending (the backward sums run in a fixed order).
void transpose_cpu(const BlockTensors& b, BlockCache& c) {
  const int64_t E = b.num_edges(), S = b.num_src;
  auto opts = b.indices.options();
  c.t_indptr = torch::zeros({S + 1}, opts);
  c.t_dst = torch::empty({E}, opts);
  c.t_eids = torch::empty({E}, opts);
  const int64_t* ip = b.indptr.data_ptr<int64_t>();
  const int64_t* ix = b.indices.data_ptr<int64_t>();
  int64_t* tp = c.t_indptr.data_ptr<int64_t>();
  for (int64_t e = 0; e < E; ++e) ++tp[ix[e] + 1];
  for (int64_t u = 0; u < S; ++u) tp[u + 1] += tp[u];
  std::vector<int64_t> next(tp, tp + S);
  int64_t* td = c.t_dst.data_ptr<int64_t>();
  int64_t* te = c.t_eids.data_ptr<int64_t>();
  for (int64_t v = 0; v < b.num_dst; ++v) {
    for (int64_t e = ip[v]; e < ip[v + 1]; ++e) {
      const int64_t k = next[ix[e]]++;
      td[k] = v;
      te[k] = e;
    }
  }
}

}  // namespace

// The same with device ops: a stable sort by source. Every output size is known on the host
// (edges, sources), so nothing waits for the device: repeat_interleave is told its length and
// the row starts are a search of the sorted sources (bincount would read their maximum back).
void transpose_on_device(const BlockTensors& b, BlockCache& c) {
  auto opts = b.indices.options();
  const int64_t edges = b.indices.numel();
  if (!c.edge_dst.defined()) {
    c.edge_dst = torch::repeat_interleave(in_degree(b), c10::optional<int64_t>(edges));
  }
  auto sorted = at::sort(b.indices, /*stable=*/true, /*dim=*/0, /*descending=*/false);
  c.t_eids = std::get<1>(sorted);
  c.t_dst = c.edge_dst.index_select(0, c.t_eids);
  c.t_indptr = torch::searchsorted(std::get<0>(sorted), torch::arange(b.num_src + 1, opts));
}

namespace {

const BlockCache& transposed(const BlockTensors& b) {
  BlockCache& c = cache_of(b);
  if (!c.t_indptr.defined()) {
    if (b.indices.is_cpu()) {
      transpose_cpu(b, c);
    } else {
      transpose_on_device(b, c);
    }
  }
  return c;
}

torch::Tensor float_of(const torch::Tensor& t) { return t.to(torch::kFloat32); }

const torch::Tensor& mean_scale(const BlockTensors& b) {
  BlockCache& c = cache_of(b);
  if (!c.mean_scale.defined()) c.mean_scale = float_of(in_degree(b)).clamp_min(1.0).reciprocal();
  return c.mean_scale;
}

void gcn_scales(const BlockTensors& b) {
  const BlockCache& t = transposed(b);  // the out-degrees are its row lengths
  BlockCache& c = cache_of(b);
  if (c.gcn_dst_scale.defined()) return;
  c.gcn_dst_scale = (float_of(in_degree(b)) + 1.0).rsqrt();
  auto out_deg = float_of(t.t_indptr.narrow(0, 1, b.num_src) - t.t_indptr.narrow(0, 0, b.num_src));
  out_deg.narrow(0, 0, b.num_dst).add_(1.0);  // the self loops of the destination nodes
  // A source without out-edges is never read in the forward; 1 keeps its gradient 0 (not inf * 0).
  c.gcn_src_scale = out_deg.clamp_min(1.0).rsqrt();
}

// ---- patterns: a CSR over tensors plus its self loops ----------------------------------------

struct Pattern {
  torch::Tensor indptr, cols, eids;  // eids may be undefined (entry position)
  int64_t rows = 0, self_rows = 0, self_col_base = 0, self_eid_base = 0;

  agg::CsrRows rows_view() const {
    agg::CsrRows g;
    g.indptr = indptr.data_ptr<int64_t>();
    g.cols = cols.numel() > 0 ? cols.data_ptr<int64_t>() : nullptr;
    g.eids = eids.defined() && eids.numel() > 0 ? eids.data_ptr<int64_t>() : nullptr;
    g.self_rows = self_rows;
    g.self_col_base = self_col_base;
    g.self_eid_base = self_eid_base;
    return g;
  }
  void save(AutogradContext* ctx, const std::string& p) const {
    ctx->saved_data[p + "indptr"] = indptr;
    ctx->saved_data[p + "cols"] = cols;
    ctx->saved_data[p + "eids"] = eids;
    ctx->saved_data[p + "ints"] =
        std::vector<int64_t>{rows, self_rows, self_col_base, self_eid_base};
  }
  static Pattern load(AutogradContext* ctx, const std::string& p) {
    Pattern g;
    g.indptr = ctx->saved_data[p + "indptr"].toTensor();
    g.cols = ctx->saved_data[p + "cols"].toTensor();
    g.eids = ctx->saved_data[p + "eids"].toTensor();
    auto ints = ctx->saved_data[p + "ints"].toIntVector();
    g.rows = ints[0];
    g.self_rows = ints[1];
    g.self_col_base = ints[2];
    g.self_eid_base = ints[3];
    return g;
  }
};

// Destination rows and their in-edges, with or without one self loop per row.
Pattern forward_pattern(const BlockTensors& b, bool self_loops) {
  Pattern g;
  g.indptr = b.indptr;
  g.cols = b.indices;
  g.rows = b.num_dst;
  g.self_rows = self_loops ? b.num_dst : 0;
  g.self_eid_base = b.num_edges();
  return g;
}

// Source rows and the edges leaving them: cols = destinations (to gather per-node values) or edge
// ids (per-edge values; the self loop of row u is then entry E + u).
Pattern backward_pattern(const BlockTensors& b, bool self_loops, bool cols_are_edges) {
  const BlockCache& c = transposed(b);
  Pattern g;
  g.indptr = c.t_indptr;
  g.cols = cols_are_edges ? c.t_eids : c.t_dst;
  g.eids = cols_are_edges ? torch::Tensor() : c.t_eids;
  g.rows = b.num_src;
  g.self_rows = self_loops ? b.num_dst : 0;
  g.self_col_base = cols_are_edges ? b.num_edges() : 0;
  g.self_eid_base = b.num_edges();
  return g;
}

// ---- running the per-row functions on a device -------------------------------------------------

// Floats per accumulator chunk on the host: one pass over a row's edges covers up to 256
// features (the accumulator stays in L1), so every neighbour row is read once, front to back.
constexpr int kCpuChunk = 256;

// One op's per-row function for the CPU and its launcher for CUDA.
struct SpmmOp {
  using Args = agg::SpmmArgs;
  static constexpr const char* kName = "spmm";
  static int64_t cost(const Args& a) { return a.heads * a.dim * 8; }
  static void row(const Args& a, int64_t r) { agg::spmm_row<1, kCpuChunk>(a, r, 0); }
#ifdef DSP_TRAIN_CUDA
  static cudaError_t launch(const Args& a, int64_t n, cudaStream_t s) {
    return cuda::launch_spmm(a, n, s);
  }
#endif
};
struct SddmmOp {
  using Args = agg::SddmmArgs;
  static constexpr const char* kName = "sddmm";
  static int64_t cost(const Args& a) { return a.heads * a.dim * 8; }
  static void row(const Args& a, int64_t r) { agg::sddmm_row<1, kCpuChunk>(a, r, 0); }
#ifdef DSP_TRAIN_CUDA
  static cudaError_t launch(const Args& a, int64_t n, cudaStream_t s) {
    return cuda::launch_sddmm(a, n, s);
  }
#endif
};
struct EdgeSoftmaxOp {
  using Args = agg::EdgeSoftmaxArgs;
  static constexpr const char* kName = "edge softmax";
  static int64_t cost(const Args& a) { return a.heads * 32; }
  static void row(const Args& a, int64_t r) { agg::edge_softmax_row<1>(a, r, 0); }
#ifdef DSP_TRAIN_CUDA
  static cudaError_t launch(const Args& a, int64_t n, cudaStream_t s) {
    return cuda::launch_edge_softmax(a, n, s);
  }
#endif
};
struct EdgeSoftmaxGradOp {
  using Args = agg::EdgeSoftmaxGradArgs;
  static constexpr const char* kName = "edge softmax backward";
  static int64_t cost(const Args& a) { return a.heads * 32; }
  static void row(const Args& a, int64_t r) { agg::edge_softmax_grad_row<1>(a, r, 0); }
#ifdef DSP_TRAIN_CUDA
  static cudaError_t launch(const Args& a, int64_t n, cudaStream_t s) {
    return cuda::launch_edge_softmax_grad(a, n, s);
  }
#endif
};

// Runs Op's row function on rows [0, rows): in parallel on the CPU, one warp per row on CUDA.
template <class Op>
void run_rows(const typename Op::Args& a, int64_t rows, const torch::Device& dev) {
  if (dev.is_cpu()) {
    const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, Op::cost(a)));
    at::parallel_for(0, rows, grain, [&a](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) Op::row(a, r);
    });
    return;
  }
#ifdef DSP_TRAIN_CUDA
  if (dev.is_cuda()) {
    c10::cuda::CUDAGuard guard(dev);
    const cudaError_t err =
        Op::launch(a, rows, c10::cuda::getCurrentCUDAStream(dev.index()).stream());
    DSP_CHECK_T(Error, err == cudaSuccess, "{} kernel on {}: {}", Op::kName, dev.str(),
                cudaGetErrorString(err));
    return;
  }
#endif
  DSP_THROW_T(NotSupported, "{} on {}: this build has aggregation kernels for the CPU{} only",
              Op::kName, dev.str(),
#ifdef DSP_TRAIN_CUDA
              " and CUDA"
#else
              " (the CUDA ones are built with nvcc against a CUDA LibTorch)"
#endif
  );
}

void run_spmm(const agg::SpmmArgs& a, int64_t rows, const torch::Device& dev) {
  run_rows<SpmmOp>(a, rows, dev);
}
void run_sddmm(const agg::SddmmArgs& a, int64_t rows, const torch::Device& dev) {
  run_rows<SddmmOp>(a, rows, dev);
}
void run_edge_softmax(const agg::EdgeSoftmaxArgs& a, int64_t rows, const torch::Device& dev) {
  run_rows<EdgeSoftmaxOp>(a, rows, dev);
}
void run_edge_softmax_grad(const agg::EdgeSoftmaxGradArgs& a, int64_t rows,
                           const torch::Device& dev) {
  run_rows<EdgeSoftmaxGradOp>(a, rows, dev);
}

const float* ptr_or_null(const torch::Tensor& t) {
  return t.defined() ? t.data_ptr<float>() : nullptr;
}

class Timed {
 public:
  explicit Timed(double& into) : into_(into), t0_(std::chrono::steady_clock::now()) {}
  ~Timed() {
    into_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }

 private:
  double& into_;
  std::chrono::steady_clock::time_point t0_;
};

torch::Tensor checked(const torch::Tensor& t, const char* what, int64_t rows, int64_t dims) {
  DSP_CHECK_ARG(t.scalar_type() == torch::kFloat32 && t.dim() == dims && t.size(0) == rows,
                "{}: expected a float32 tensor of {} dimensions with {} rows, got {} {}", what,
                dims, rows, c10::toString(t.scalar_type()),
                fmt::format("[{}]", fmt::join(t.sizes().vec(), ", ")));
  return t.contiguous();
}

// out = spmm(pattern, x, edge weights, scales); see agg::SpmmArgs. x and out are 2-d, [*, heads *
// dim] with unit column stride: either may be a column block of a wider matrix.
void spmm_into(const Pattern& g, const torch::Tensor& x, const torch::Tensor& edge_w,
               const torch::Tensor& row_scale, const torch::Tensor& col_scale, int64_t heads,
               int64_t dim, const torch::Tensor& out) {
  agg::SpmmArgs a;
  a.g = g.rows_view();
  a.x = x.data_ptr<float>();
  a.x_stride = x.stride(0);
  a.edge_w = ptr_or_null(edge_w);
  a.row_scale = ptr_or_null(row_scale);
  a.col_scale = ptr_or_null(col_scale);
  a.heads = heads;
  a.dim = dim;
  a.out = out.data_ptr<float>();
  a.out_stride = out.stride(0);
  run_spmm(a, g.rows, x.device());
}

torch::Tensor spmm(const Pattern& g, const torch::Tensor& x, const torch::Tensor& edge_w,
                   const torch::Tensor& row_scale, const torch::Tensor& col_scale, int64_t heads,
                   int64_t dim) {
  auto out = torch::empty({g.rows, heads * dim}, x.options());
  spmm_into(g, x, edge_w, row_scale, col_scale, heads, dim, out);
  return out;
}

// ---- the autograd functions --------------------------------------------------------------------

// What an Spmm needs besides its differentiable inputs x and (optional) edge weights.
struct SpmmPlan {
  Pattern fwd, bwd;  // bwd: the transpose, defined when a gradient will be needed
  torch::Tensor row_scale, col_scale;
  int64_t heads = 1, dim = 0;
  // Output [x[v] | aggregate_v] per destination v instead of the aggregate alone (no edge weights).
  bool concat_self = false;
};

class SpmmFunction : public torch::autograd::Function<SpmmFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const c10::optional<torch::Tensor>& edge_w, const SpmmPlan& p) {
    Timed timed(aggregation_times().forward_s);
    torch::Tensor w = edge_w.has_value() ? *edge_w : torch::Tensor();
    ctx->save_for_backward({x, w});
    p.fwd.save(ctx, "f");
    if (p.bwd.indptr.defined()) p.bwd.save(ctx, "b");
    ctx->saved_data["row_scale"] = p.row_scale;
    ctx->saved_data["col_scale"] = p.col_scale;
    ctx->saved_data["shape"] = std::vector<int64_t>{p.heads, p.dim, p.concat_self ? 1 : 0};
    ctx->saved_data["need"] =
        std::vector<int64_t>{x.requires_grad() ? 1 : 0, w.defined() && w.requires_grad() ? 1 : 0};
    if (!p.concat_self) return spmm(p.fwd, x, w, p.row_scale, p.col_scale, p.heads, p.dim);
    const int64_t width = p.heads * p.dim;
    auto out = torch::empty({p.fwd.rows, 2 * width}, x.options());
    out.narrow(1, 0, width).copy_(x.narrow(0, 0, p.fwd.rows));
    spmm_into(p.fwd, x, w, p.row_scale, p.col_scale, p.heads, p.dim, out.narrow(1, width, width));
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    Timed timed(aggregation_times().backward_s);
    auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &w = saved[1];
    auto shape = ctx->saved_data["shape"].toIntVector();
    auto need = ctx->saved_data["need"].toIntVector();
    auto row_scale = ctx->saved_data["row_scale"].toTensor();
    auto col_scale = ctx->saved_data["col_scale"].toTensor();
    auto go = grads[0].contiguous();
    torch::Tensor grad_x, grad_w;
    const bool concat = shape[2] != 0;
    const int64_t width = shape[0] * shape[1];
    if (need[0]) {
      // Transposed: the roles of the two scales swap. With the self block, its gradient goes
      // straight to the destination rows.
      const Pattern b = Pattern::load(ctx, "b");
      grad_x = spmm(b, concat ? go.narrow(1, width, width) : go, w, col_scale, row_scale, shape[0],
                    shape[1]);
      if (concat) grad_x.narrow(0, 0, go.size(0)).add_(go.narrow(1, 0, width));
      grad_x = grad_x.view(x.sizes());
    }
    if (need[1]) {
      const Pattern f = Pattern::load(ctx, "f");
      grad_w = torch::empty_like(w);
      agg::SddmmArgs a;
      a.g = f.rows_view();
      a.grad = go.data_ptr<float>();
      a.x = x.data_ptr<float>();
      a.row_scale = ptr_or_null(row_scale);
      a.col_scale = ptr_or_null(col_scale);
      a.heads = shape[0];
      a.dim = shape[1];
      a.out = grad_w.data_ptr<float>();
      run_sddmm(a, f.rows, x.device());
    }
    return {grad_x, grad_w, torch::Tensor()};
  }
};

class EdgeSoftmaxFunction : public torch::autograd::Function<EdgeSoftmaxFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& el,
                               const torch::Tensor& er, const Pattern& fwd, const Pattern& bwd,
                               double slope) {
    Timed timed(aggregation_times().forward_s);
    const int64_t H = el.size(1);
    auto att = torch::empty({fwd.self_eid_base + fwd.self_rows, H}, el.options());
    agg::EdgeSoftmaxArgs a;
    a.g = fwd.rows_view();
    a.el = el.data_ptr<float>();
    a.er = er.data_ptr<float>();
    a.heads = H;
    a.slope = static_cast<float>(slope);
    a.out = att.data_ptr<float>();
    run_edge_softmax(a, fwd.rows, el.device());
    ctx->save_for_backward({el, er, att});
    fwd.save(ctx, "f");
    if (bwd.indptr.defined()) bwd.save(ctx, "b");
    ctx->saved_data["slope"] = slope;
    return att;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    Timed timed(aggregation_times().backward_s);
    auto saved = ctx->get_saved_variables();
    const torch::Tensor &el = saved[0], &er = saved[1], &att = saved[2];
    const Pattern f = Pattern::load(ctx, "f");
    auto go = grads[0].contiguous();
    auto grad_s = torch::empty_like(att);
    auto grad_er = torch::empty_like(er);
    agg::EdgeSoftmaxGradArgs a;
    a.g = f.rows_view();
    a.el = el.data_ptr<float>();
    a.er = er.data_ptr<float>();
    a.att = att.data_ptr<float>();
    a.grad_att = go.data_ptr<float>();
    a.heads = el.size(1);
    a.slope = static_cast<float>(ctx->saved_data["slope"].toDouble());
    a.grad_s = grad_s.data_ptr<float>();
    a.grad_er = grad_er.data_ptr<float>();
    run_edge_softmax_grad(a, f.rows, el.device());
    // grad_el[u] sums grad_s over the edges leaving u: an unweighted spmm over the transpose whose
    // columns are edge ids, with grad_s as [edges, 1 head, H].
    auto grad_el = spmm(Pattern::load(ctx, "b"), grad_s, torch::Tensor(), torch::Tensor(),
                        torch::Tensor(), 1, el.size(1));
    return {grad_el, grad_er, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

thread_local bool use_reference = false;

bool grad_needed(std::initializer_list<const torch::Tensor*> inputs) {
  if (!torch::GradMode::is_enabled()) return false;
  for (const torch::Tensor* t : inputs) {
    if (t->requires_grad()) return true;
  }
  return false;
}

}  // namespace

ScopedReferenceAggregation::ScopedReferenceAggregation() : previous_(use_reference) {
  use_reference = true;
}
ScopedReferenceAggregation::~ScopedReferenceAggregation() { use_reference = previous_; }

namespace {

torch::Tensor aggregate_impl(const BlockTensors& b, const torch::Tensor& x, Aggregation kind,
                             bool concat_self) {
  auto xc = checked(x, "aggregate: input", b.num_src, 2);
  SpmmPlan p;
  p.dim = xc.size(1);
  const bool gcn = kind == Aggregation::kGcn;
  p.fwd = forward_pattern(b, gcn);
  if (kind == Aggregation::kMean) p.row_scale = mean_scale(b);
  if (gcn) {
    gcn_scales(b);
    p.row_scale = b.cache->gcn_dst_scale;
    p.col_scale = b.cache->gcn_src_scale;
  }
  if (grad_needed({&xc})) p.bwd = backward_pattern(b, gcn, /*cols_are_edges=*/false);
  p.concat_self = concat_self;
  if (!b.weights.defined()) return SpmmFunction::apply(xc, c10::optional<torch::Tensor>(), p);
  // per-entry weights: the E edges', then GCN's self loops (entries E + v) at 1
  torch::Tensor w =
      gcn ? torch::cat({b.weights, torch::ones({b.num_dst}, b.weights.options())}) : b.weights;
  return SpmmFunction::apply(xc, c10::optional<torch::Tensor>(w.contiguous()), p);
}

}  // namespace

torch::Tensor aggregate(const BlockTensors& b, const torch::Tensor& x, Aggregation kind) {
  if (use_reference) return reference::aggregate(b, x, kind);
  return aggregate_impl(b, x, kind, false);
}

torch::Tensor aggregate_concat_self(const BlockTensors& b, const torch::Tensor& x,
                                    Aggregation kind) {
  if (use_reference) {
    return torch::cat({x.narrow(0, 0, b.num_dst), reference::aggregate(b, x, kind)}, 1);
  }
  return aggregate_impl(b, x, kind, true);
}

torch::Tensor edge_softmax(const BlockTensors& b, const torch::Tensor& el, const torch::Tensor& er,
                           double slope) {
  DSP_CHECK_T(NotSupported, !b.weights.defined(),
              "gat: blocks with edge weights (LABOR importance sampling, --labor-importance != 0) "
              "are not supported; use sage or gcn, or --labor-importance 0");
  if (use_reference) return reference::edge_softmax(b, el, er, slope);
  auto elc = checked(el, "edge_softmax: el", b.num_src, 2);
  auto erc = checked(er, "edge_softmax: er", b.num_dst, 2);
  DSP_CHECK_ARG(elc.size(1) == erc.size(1), "edge_softmax: el has {} heads but er has {}",
                elc.size(1), erc.size(1));
  Pattern bwd;
  if (grad_needed({&elc, &erc})) bwd = backward_pattern(b, true, /*cols_are_edges=*/true);
  return EdgeSoftmaxFunction::apply(elc, erc, forward_pattern(b, true), bwd, slope);
}

torch::Tensor aggregate_edges(const BlockTensors& b, const torch::Tensor& z,
                              const torch::Tensor& att) {
  if (use_reference) return reference::aggregate_edges(b, z, att);
  auto zc = checked(z, "aggregate_edges: z", b.num_src, 3);
  auto ac = checked(att, "aggregate_edges: attention", b.num_edges() + b.num_dst, 2);
  DSP_CHECK_ARG(ac.size(1) == zc.size(1), "aggregate_edges: z has {} heads but attention has {}",
                zc.size(1), ac.size(1));
  SpmmPlan p;
  p.heads = zc.size(1);
  p.dim = zc.size(2);
  p.fwd = forward_pattern(b, true);
  if (grad_needed({&zc})) p.bwd = backward_pattern(b, true, /*cols_are_edges=*/false);
  return SpmmFunction::apply(zc, c10::optional<torch::Tensor>(ac), p)
      .view({b.num_dst, p.heads, p.dim});
}

namespace reference {
namespace {

// The COO form: the destination of every edge, then (with self loops) the loops v -> v.
torch::Tensor edge_dst(const BlockTensors& b) {
  auto opts = b.indices.options();
  return torch::repeat_interleave(torch::arange(b.num_dst, opts), in_degree(b));
}
std::pair<torch::Tensor, torch::Tensor> with_self_loops(const BlockTensors& b) {
  auto loop = torch::arange(b.num_dst, b.indices.options());
  return {torch::cat({b.indices, loop}), torch::cat({edge_dst(b), loop})};
}

}  // namespace

torch::Tensor aggregate(const BlockTensors& b, const torch::Tensor& x, Aggregation kind) {
  auto fopts = x.options();
  if (kind != Aggregation::kGcn) {
    auto msg = x.index_select(0, b.indices);
    if (b.weights.defined()) msg = msg * b.weights.unsqueeze(1);
    auto sum = torch::zeros({b.num_dst, x.size(1)}, fopts).index_add_(0, edge_dst(b), msg);
    if (kind == Aggregation::kSum) return sum;
    return sum / float_of(in_degree(b)).clamp_min(1.0).unsqueeze(1);
  }
  auto [src, dst] = with_self_loops(b);
  auto deg_in = float_of(in_degree(b)) + 1.0;
  auto deg_out =
      torch::zeros({b.num_src}, fopts).index_add_(0, src, torch::ones({src.size(0)}, fopts));
  auto norm = (deg_out.index_select(0, src) * deg_in.index_select(0, dst)).rsqrt();
  if (b.weights.defined()) norm = norm * torch::cat({b.weights, torch::ones({b.num_dst}, fopts)});
  return torch::zeros({b.num_dst, x.size(1)}, fopts)
      .index_add_(0, dst, x.index_select(0, src) * norm.unsqueeze(1));
}

torch::Tensor edge_softmax(const BlockTensors& b, const torch::Tensor& el, const torch::Tensor& er,
                           double slope) {
  auto [src, dst] = with_self_loops(b);
  const int64_t H = el.size(1);
  auto e = torch::leaky_relu(el.index_select(0, src) + er.index_select(0, dst), slope);
  // The max is only a shift for stability (softmax is invariant to it): no gradient.
  torch::Tensor m;
  {
    torch::NoGradGuard ng;
    auto dst_h = dst.unsqueeze(1).expand({dst.size(0), H}).contiguous();
    m = torch::full({b.num_dst, H}, -std::numeric_limits<float>::infinity(), e.options())
            .scatter_reduce(0, dst_h, e.detach(), "amax", /*include_self=*/true);
  }
  auto ex = torch::exp(e - m.index_select(0, dst));
  auto denom = torch::zeros({b.num_dst, H}, e.options()).index_add_(0, dst, ex);
  return ex / denom.index_select(0, dst);  // every dst has its self loop: denom > 0
}

torch::Tensor aggregate_edges(const BlockTensors& b, const torch::Tensor& z,
                              const torch::Tensor& att) {
  auto [src, dst] = with_self_loops(b);
  return torch::zeros({b.num_dst, z.size(1), z.size(2)}, z.options())
      .index_add_(0, dst, z.index_select(0, src) * att.unsqueeze(-1));
}

}  // namespace reference
}  // namespace dsp
