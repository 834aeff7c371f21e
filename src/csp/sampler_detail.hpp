#pragma once
// Host-side helpers that the sampler's files share (sampler.cpp: the protocol; sampler_pull.cpp,
// sampler_labor.cpp, sampler_walks.cpp): prefix offsets, host all-to-alls, and moving a buffer's
// elements between the host and the backend. Private to src/csp.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "ccc/communicator.hpp"
#include "csp/backend.hpp"

namespace dsp::csp_detail {

// Prefix offsets of per-rank counts.
inline std::vector<int64_t> prefix(const std::vector<int64_t>& c) {
  std::vector<int64_t> o(c.size() + 1, 0);
  for (size_t i = 0; i < c.size(); ++i) o[i + 1] = o[i] + c[i];
  return o;
}

// all_to_all_v of host vectors with known receive counts (walks).
template <class T>
std::vector<T> a2a(Communicator& c, const std::vector<T>& send, const std::vector<int64_t>& sc,
                   const std::vector<int64_t>& rc, const char* label) {
  int64_t total = 0;
  for (auto x : rc) total += x;
  std::vector<T> out(static_cast<size_t>(total));
  OpOptions o;
  o.label = label;
  o.host_buffers = true;
  c.all_to_all_v(send.data(), sc, out.data(), rc, dtype_of<T>(), o);
  return out;
}

// A buffer's first n elements readable on the host: the buffer itself for a host backend.
template <class T>
const T* host_view(SamplerBackend& be, const BackendBuffer& buf, int64_t n, std::vector<T>& tmp) {
  if (be.memory() == MemorySpace::kHost) return buf.as<T>();
  tmp.resize(n);
  be.to_host(tmp.data(), buf.data(), n * sizeof(T));
  return tmp.data();
}
// Host memory that becomes a buffer's first n elements: the buffer itself for a host backend,
// else a host array copied over by done(). (Pull mode's host steps.)
template <class T>
class HostFill {
 public:
  HostFill(SamplerBackend& be, BackendBuffer& buf, int64_t n) : be_(be), buf_(buf), n_(n) {
    if (be.memory() == MemorySpace::kHost) {
      p_ = buf.reserve_n<T>(n);
    } else {
      tmp_.resize(n);
      p_ = tmp_.data();
    }
  }
  T* data() { return p_; }
  void done() {
    if (be_.memory() == MemorySpace::kHost) return;
    be_.to_backend(buf_.reserve_n<T>(n_), p_, n_ * sizeof(T));
  }

 private:
  SamplerBackend& be_;
  BackendBuffer& buf_;
  int64_t n_;
  T* p_ = nullptr;
  std::vector<T> tmp_;
};
// n host elements where the backend reads them: v itself for a host backend, else uploaded to buf.
template <class T>
const T* in_backend(SamplerBackend& be, BackendBuffer& buf, const T* v, int64_t n) {
  if (be.memory() == MemorySpace::kHost) return v;
  T* d = buf.reserve_n<T>(std::max<int64_t>(n, 1));
  be.to_backend(d, v, n * sizeof(T));
  return d;
}
// n elements of backend memory readable on the host (the memory itself for a host backend).
template <class T>
const T* on_host(SamplerBackend& be, const T* p, int64_t n, std::vector<T>& tmp) {
  if (be.memory() == MemorySpace::kHost) return p;
  tmp.resize(n);
  if (n) be.to_host(tmp.data(), p, n * sizeof(T));
  return tmp.data();
}
// v into buf; with `own_only`, for the backend's own later calls only (to_backend_async: no wait).
template <class T>
void upload(SamplerBackend& be, BackendBuffer& buf, const std::vector<T>& v,
            bool own_only = false) {
  T* d = buf.reserve_n<T>(static_cast<int64_t>(v.size()));
  if (own_only) {
    be.to_backend_async(d, v.data(), v.size() * sizeof(T));
  } else {
    be.to_backend(d, v.data(), v.size() * sizeof(T));
  }
}
inline int64_t sum(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{0});
}
// cum[i] = w[0] + ... + w[i] (i < deg), a sequential double sum: a row's inclusive prefix of its
// weights, the same wherever it is computed (the owner's precomputed prefixes, pull mode's).
inline void row_prefix(const float* w, int64_t deg, double* cum) {
  double acc = 0;
  for (int64_t i = 0; i < deg; ++i) {
    acc += static_cast<double>(w[i]);
    cum[i] = acc;
  }
}

}  // namespace dsp::csp_detail
