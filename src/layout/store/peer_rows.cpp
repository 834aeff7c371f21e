#include "layout/store/peer_rows.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace dsp {

std::shared_ptr<void> row_buffer(FeatureBackend& be, MemorySpace space, size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  if (space == MemorySpace::kDevice) return be.allocate(bytes);
  return std::shared_ptr<void>(new unsigned char[bytes],
                               [](void* p) { delete[] static_cast<unsigned char*>(p); });
}

void PeerRows::serve(const int64_t* slots, int64_t n, void* rows, MemorySpace space) {
  for (int64_t i = 0; i < n; ++i) {
    DSP_CHECK(slots[i] >= 0 && slots[i] < cache_rows_, "gather: peer asked for cache slot {} of {}",
              slots[i], cache_rows_);
  }
  be_.serve_slots(slots, n, rows, space);
}

std::shared_ptr<void> PeerRows::fetch(const std::vector<int64_t>& slots,
                                      const std::vector<int64_t>& asked) {
  OpOptions slots_op{{}, "gather.slots"};
  slots_op.host_buffers = true;
  const std::vector<int64_t> served = comm_.exchange_counts(asked, {{}, "gather.counts"});
  int64_t total_in = 0;
  for (auto c : served) total_in += c;
  std::vector<int64_t> slots_in(total_in);
  comm_.all_to_all_v(slots.data(), asked, slots_in.data(), served, DType::kInt64, slots_op);
  const MemorySpace space = comm_.memory_space();
  std::shared_ptr<void> rows_out = row_buffer(be_, space, total_in * row_bytes_);
  std::shared_ptr<void> rows_in = row_buffer(be_, space, slots.size() * row_bytes_);
  serve(slots_in.data(), total_in, rows_out.get(), space);
  exchange_rows(rows_out.get(), served, rows_in.get(), asked);
  return rows_in;
}

void PeerRows::fetch_resident(const ResidentPass& r, void* out) {
  const int P = comm_.size();
  const std::vector<int64_t> recv = comm_.exchange_counts(r.send_counts, {{}, "gather.counts"});
  int64_t total_in = 0, n_out = 0;
  for (int p = 0; p < P; ++p) total_in += recv[p], n_out += r.send_counts[p];
  const MemorySpace space = comm_.memory_space();
  const bool device = space == MemorySpace::kDevice;
  // Slots: where the channel takes its buffers (read back for a host channel).
  std::vector<int64_t> slots_host(device ? 0 : n_out), slots_in_host(device ? 0 : total_in);
  if (!device) be_.copy_to_host(r.slots, n_out * sizeof(int64_t), slots_host.data());
  std::shared_ptr<void> slots_in =
      device ? be_.allocate(total_in * sizeof(int64_t) + 8) : std::shared_ptr<void>();
  const OpOptions slots_op{{}, "gather.slots"};
  comm_.all_to_all_v(device ? r.slots : slots_host.data(), r.send_counts,
                     device ? slots_in.get() : slots_in_host.data(), recv, DType::kInt64, slots_op);
  std::shared_ptr<void> rows_out = row_buffer(be_, space, total_in * row_bytes_);
  std::shared_ptr<void> rows_in = row_buffer(be_, space, n_out * row_bytes_);
  if (device) {
    comm_.synchronize(slots_op);
    be_.serve_resident(static_cast<const int64_t*>(slots_in.get()), total_in, rows_out.get());
  } else {
    serve(slots_in_host.data(), total_in, rows_out.get(), space);
  }
  exchange_rows(rows_out.get(), recv, rows_in.get(), r.send_counts);
  be_.place_resident(rows_in.get(), space, r.pos, r.nodes, n_out, out);
}

void PeerRows::exchange_rows(const void* out_rows, const std::vector<int64_t>& served,
                             void* in_rows, const std::vector<int64_t>& asked) {
  const int P = comm_.size();
  std::vector<int64_t> sc(P), rc(P);
  for (int p = 0; p < P; ++p) {
    sc[p] = served[p] * static_cast<int64_t>(row_bytes_);
    rc[p] = asked[p] * static_cast<int64_t>(row_bytes_);
  }
  const OpOptions rows_op{{}, "gather.rows"};
  comm_.all_to_all_v(out_rows, sc, in_rows, rc, DType::kUInt8, rows_op);
  comm_.synchronize(rows_op);
}

}  // namespace dsp
