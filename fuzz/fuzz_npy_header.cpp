// The .npy header parser must reject any byte string with a FormatError, never crash or overread.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "core/error.hpp"
#include "graph/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Copy into an exact-size heap buffer so ASan catches any read past the end.
  std::unique_ptr<unsigned char[]> buf(new unsigned char[size]);
  if (size) std::memcpy(buf.get(), data, size);
  try {
    dsp::NpyHeader h = dsp::parse_npy_header(buf.get(), size, "fuzz.npy");
    // A header that parsed must describe a payload inside the buffer.
    size_t n = 1;
    for (auto d : h.shape) n *= static_cast<size_t>(d);
    if (h.data_offset > size || n * dsp::dtype_size(h.dtype) > size - h.data_offset) __builtin_trap();
    volatile unsigned char sink = 0;
    if (n > 0) sink = buf[h.data_offset + n * dsp::dtype_size(h.dtype) - 1];
    (void)sink;
  } catch (const dsp::Error&) {
  }
  return 0;
}
