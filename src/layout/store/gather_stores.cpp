// One gather round for several feature stores (feature_store.hpp: gather_stores).
#include <algorithm>
#include <memory>

#include "core/error.hpp"
#include "layout/store/feature_store.hpp"

namespace dsp {

namespace {

// Per (peer, store) counts of a round, [p * S + s], and each peer's total in rows and in bytes.
struct RoundCounts {
  std::vector<int64_t> cnt, rows, bytes;
};

RoundCounts totals(const std::vector<int64_t>& cnt, const std::vector<FeatureStore*>& stores,
                   int P) {
  const size_t S = stores.size();
  RoundCounts c{cnt, std::vector<int64_t>(P, 0), std::vector<int64_t>(P, 0)};
  for (int p = 0; p < P; ++p) {
    for (size_t s = 0; s < S; ++s) {
      c.rows[p] += cnt[p * S + s];
      c.bytes[p] += cnt[p * S + s] * static_cast<int64_t>(stores[s]->format().row_bytes);
    }
  }
  return c;
}

int64_t sum(const std::vector<int64_t>& v) {
  int64_t t = 0;
  for (int64_t x : v) t += x;
  return t;
}

}  // namespace

void gather_stores(const std::vector<FeatureStore*>& stores,
                   const std::vector<std::vector<int64_t>>& ids, const std::vector<void*>& outs) {
  const size_t S = stores.size();
  DSP_CHECK_ARG(S > 0 && ids.size() == S && outs.size() == S,
                "gather_stores: {} stores, {} id lists and {} outputs", S, ids.size(), outs.size());
  Communicator& comm = stores[0]->comm_;
  for (FeatureStore* st : stores) {
    DSP_CHECK_ARG(&st->comm_ == &comm, "gather_stores: the stores use different communicators");
  }
  const int P = comm.size();
  std::vector<FeatureStore::Requests> req(S);
  for (size_t s = 0; s < S; ++s) {
    req[s] = stores[s]->prepare(ids[s].data(), static_cast<int64_t>(ids[s].size()), outs[s]);
  }
  // 1: S counts to every peer (fixed sizes, no count exchange).
  std::vector<int64_t> sc_cnt(P * S), rc_cnt(P * S), fixed(P, static_cast<int64_t>(S));
  for (int p = 0; p < P; ++p) {
    for (size_t s = 0; s < S; ++s) sc_cnt[p * S + s] = req[s].send_counts[p];
  }
  OpOptions host_op{{}, "gather.counts"};
  host_op.host_buffers = true;
  comm.all_to_all_v(sc_cnt.data(), fixed, rc_cnt.data(), fixed, DType::kInt64, host_op);
  const RoundCounts out_c = totals(sc_cnt, stores, P), in_c = totals(rc_cnt, stores, P);
  // 2: the slots, per peer store by store.
  std::vector<int64_t> slots_out, first(S, 0);  // first[s]: store s's next request
  slots_out.reserve(sum(out_c.rows));
  for (int p = 0; p < P; ++p) {
    for (size_t s = 0; s < S; ++s) {
      const int64_t k = first[s], m = sc_cnt[p * S + s];
      slots_out.insert(slots_out.end(), req[s].req.begin() + k, req[s].req.begin() + k + m);
      first[s] += m;
    }
  }
  std::vector<int64_t> slots_in(sum(in_c.rows));
  OpOptions slots_op{{}, "gather.slots"};
  slots_op.host_buffers = true;
  comm.all_to_all_v(slots_out.data(), out_c.rows, slots_in.data(), in_c.rows, DType::kInt64,
                    slots_op);
  // 3: the rows, served by store into each peer's bytes, then placed by store.
  const MemorySpace space = comm.memory_space();
  FeatureBackend& be = stores[0]->backend();
  std::shared_ptr<void> rows_out = row_buffer(be, space, sum(in_c.bytes));
  std::shared_ptr<void> rows_in = row_buffer(be, space, sum(out_c.bytes));
  auto* ro = static_cast<unsigned char*>(rows_out.get());
  const int64_t* si = slots_in.data();
  for (int p = 0; p < P; ++p) {
    for (size_t s = 0; s < S; ++s) {
      const int64_t m = rc_cnt[p * S + s];
      stores[s]->peers_->serve(si, m, ro, space);
      si += m;
      ro += m * static_cast<int64_t>(stores[s]->format().row_bytes);
    }
  }
  const OpOptions rows_op{{}, "gather.rows"};
  comm.all_to_all_v(rows_out.get(), in_c.bytes, rows_in.get(), out_c.bytes, DType::kUInt8, rows_op);
  comm.synchronize(rows_op);
  const auto* ri = static_cast<const unsigned char*>(rows_in.get());
  std::fill(first.begin(), first.end(), 0);
  for (int p = 0; p < P; ++p) {
    for (size_t s = 0; s < S; ++s) {
      const int64_t m = sc_cnt[p * S + s];
      stores[s]->receive(ids[s].data(), req[s], first[s], m, ri, space, outs[s]);
      first[s] += m;
      ri += m * static_cast<int64_t>(stores[s]->format().row_bytes);
    }
  }
  for (FeatureStore* st : stores) st->note_traffic();
}

}  // namespace dsp
