#pragma once
// Where an EmbeddingTable's rows and optimizer state live (layout/store/embedding_table.hpp): the
// table runs the protocol (ids and rows between ranks, in host buffers) and hands each storage the
// per-row work on its memory, with the row lists it computed on the host.
//
//   host       host memory (std::vector), the kernels of embedding_kernels.hpp on OpenMP threads
//   KernelEmbeddingStorage<Exec> (kernel_embedding.hpp): values, optimizer state and step counts
//              in Exec buffers, the same kernels through the executor: CudaExec = the CUDA
//              storage (cuda/embedding_storage.hpp, device memory), HostExec = the emulated one
//              (host memory, run as a device runs it: every row list uploaded, every copy a
//              kernel, every host row staged)
//
// Row lists (`rows`, `src`, `pos`, the step plan) are host arrays; `host_*` rows are host memory;
// `out` and `grads` are in memory() (device memory for a CUDA storage). Every call has completed
// when it returns (host buffers may be reused; device outputs are ready for any stream).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ccc/communicator.hpp"
#include "core/device.hpp"
#include "layout/store/embedding_kernels.hpp"

namespace dsp {

// The saved sections, in file order.
enum class EmbeddingSection { kValues = 0, kState1 = 1, kState2 = 2, kSteps = 3 };

// The touched rows of one apply_gradients and the gradient rows each sums, in order.
struct EmbeddingStepPlan {
  std::vector<int64_t> touched;  // local rows, first-arrival order
  std::vector<int64_t> start;    // touched.size() + 1 offsets into order
  std::vector<int64_t> order;    // received gradient rows, slot by slot, arrival order within
};

class EmbeddingStorage {
 public:
  virtual ~EmbeddingStorage() = default;
  virtual std::string name() const = 0;  // host | emulated-device | cuda
  virtual Device device() const = 0;
  virtual MemorySpace memory() const = 0;  // where gather's out and apply_gradients' grads live

  // Allocates `rows` rows of `dim` (optimizer state zero, step counts 0) and sets them to their
  // initial values (kernels::EmbeddingInitRow; dataset_ids: host, `rows` entries, or null).
  virtual void allocate(int64_t rows, int64_t dim, bool adam, const int64_t* dataset_ids,
                        int64_t begin, uint64_t key, float scale) = 0;
  // host_out row k = row rows[k], k < n.
  virtual void read_rows(const int64_t* rows, int64_t n, float* host_out) = 0;
  // out row i = host_rows row src[i], i < n; host_rows holds m rows.
  virtual void place_rows(const float* host_rows, int64_t m, const int64_t* src, int64_t n,
                          float* out) = 0;
  // host_out row pos[i] = grads row i * scale, i < n (host_out holds n rows).
  virtual void scale_rows(const float* grads, int64_t n, const int64_t* pos, float scale,
                          float* host_out) = 0;
  // One step per touched row of `plan` over host_grads (m received rows).
  virtual void step(const EmbeddingStepPlan& plan, const float* host_grads, int64_t m,
                    const EmbeddingStepConsts& c) = 0;
  // A section in host memory where the storage holds it there, else null (then read_section).
  virtual const void* host_view(EmbeddingSection s) const = 0;
  virtual void read_section(EmbeddingSection s, void* host, size_t bytes) const = 0;
  virtual void write_section(EmbeddingSection s, const void* host, size_t bytes) = 0;
  virtual const float* values() const = 0;  // [rows, dim] in memory()
  virtual uint64_t bytes() const = 0;       // what allocate took, in memory()
};

// A storage per table; empty: the host storage.
using EmbeddingStorageFactory = std::function<std::unique_ptr<EmbeddingStorage>()>;

std::unique_ptr<EmbeddingStorage> make_host_embedding_storage();
// The device storage executed on the host (HostExec): tests, RankOptions::emulate_device.
std::unique_ptr<EmbeddingStorage> make_emulated_embedding_storage();

}  // namespace dsp
