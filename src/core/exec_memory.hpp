#pragma once
// Typed use of an executor's buffers (core/host_exec.hpp) and the idioms every device data path
// repeats: reserve T's, upload host values and get where they went, read values back, and the
// exclusive prefix with its leading zero. Free functions over the executor, so that the device
// backends (csp/kernel_backend.hpp, layout/store/kernel_features.hpp,
// layout/store/kernel_embedding.hpp) share one definition of each.
//
// A reservation is never empty (at least one T; an upload at least 16 bytes), so a pointer it
// returns is valid to name in a capture even for n = 0. Reads are issued on the executor's stream;
// `download` does not wait (the caller syncs once for several), `read_back` does.
#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace dsp {

template <class T, class Buffer>
T* reserve(Buffer& buf, int64_t count) {
  return static_cast<T*>(buf.reserve(static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(T)));
}

template <class T, class Exec>
T* upload(Exec& ex, typename Exec::Buffer& buf, const T* host, int64_t count) {
  const size_t bytes = static_cast<size_t>(count) * sizeof(T);
  void* d = buf.reserve(std::max<size_t>(bytes, 16));
  if (bytes) ex.to_device(d, host, bytes);
  return static_cast<T*>(d);
}

template <class T, class Exec>
void download(Exec& ex, T* host, const T* dev, int64_t count) {
  if (count) ex.to_host(host, dev, static_cast<size_t>(count) * sizeof(T));
}

template <class Exec>
int64_t read_back(Exec& ex, const int64_t* dev) {
  int64_t v = 0;
  ex.to_host(&v, dev, sizeof(v));
  ex.sync();
  return v;
}

// out[0] = 0, out[i + 1] = in[0] + ... + in[i]: n + 1 entries.
template <class Exec>
void scan_into(Exec& ex, int64_t* out, const int64_t* in, int64_t n) {
  ex.zero(out, sizeof(int64_t));
  if (n) ex.inclusive_scan(in, out + 1, n);
}

// scan_into a reservation of n + 1 entries of buf.
template <class Exec>
int64_t* prefix_with_zero(Exec& ex, typename Exec::Buffer& buf, const int64_t* in, int64_t n) {
  auto* out = reserve<int64_t>(buf, n + 1);
  scan_into(ex, out, in, n);
  return out;
}

}  // namespace dsp
