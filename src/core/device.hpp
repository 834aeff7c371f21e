#pragma once
#include <string>

namespace dsp {

// Where a rank computes: the CPU build always runs on kCpu; the CUDA build on one GPU per rank.
struct Device {
  enum class Kind { kCpu, kCuda };
  Kind kind = Kind::kCpu;
  int index = 0;

  static Device cpu() { return {}; }
  static Device cuda(int i) { return {Kind::kCuda, i}; }
  bool is_cuda() const { return kind == Kind::kCuda; }
  bool operator==(const Device& o) const { return kind == o.kind && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const;
  // Parses "cpu", "cuda", "cuda:N"; throws InvalidArgument otherwise.
  static Device parse(const std::string& s);
};

}  // namespace dsp
