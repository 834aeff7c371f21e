// The checkpoint reader's checks (train/checkpoint_header.cpp), over the tensors of a checkpoint's
// archive: its header (parse_checkpoint_header: the header's checksum, the JSON, the format,
// version and the types of its fields), the tensors it vouches for (checkpoint_tensors and
// verify_checkpoint_tensor: each one's checksum), the training configuration it records
// (checkpoint_train_config) and its parameter list against the model that configuration builds
// (check_checkpoint_params, check_checkpoint_optimizer). The fuzz build has no LibTorch, so the
// archive itself (a zip LibTorch reads) is not fuzzed: the input is the archive's tensors as raw
// bytes, packed as fuzz/fuzz_dir.hpp packs files (NAME '\n' LENGTH (4 bytes, little-endian)
// DATA), the names the archive's keys: "header", "header_checksum", p<i>, "optimizer", ...
// fuzz/checkpoint_seeds.py writes such inputs from checkpoints dsp train wrote. Each input is read
// twice: with the header_checksum it holds (as the loader reads the file), and with the header's
// true checksum, so a mutated header reaches the checks after the checksum's. Whatever the bytes,
// the reader either accepts them or throws a dsp::Error naming the file; it never crashes, reads
// out of bounds, leaks or throws anything else.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "train/checkpoint_header.hpp"

namespace {

const std::string kPath = "fuzz.pt";

std::map<std::string, std::string> unpack(const uint8_t* data, size_t size) {
  std::map<std::string, std::string> out;
  size_t pos = 0;
  while (pos < size) {
    size_t nl = pos;
    while (nl < size && nl - pos <= 64 && data[nl] != '\n') ++nl;
    if (nl >= size || data[nl] != '\n' || nl + 5 > size) break;
    const std::string name(reinterpret_cast<const char*>(data + pos), nl - pos);
    const uint8_t* l = data + nl + 1;
    const size_t len = static_cast<size_t>(l[0]) | static_cast<size_t>(l[1]) << 8 |
                       static_cast<size_t>(l[2]) << 16 | static_cast<size_t>(l[3]) << 24;
    pos = nl + 5;
    const size_t n = std::min(len, size - pos);
    out[name].assign(reinterpret_cast<const char*>(data + pos), n);
    pos += n;
  }
  return out;
}

void read(const std::map<std::string, std::string>& tensors, const std::string& head,
          const std::string* checksum) {
  const nlohmann::json header = dsp::parse_checkpoint_header(kPath, head, checksum);
  for (const dsp::CheckpointTensor& t : dsp::checkpoint_tensors(header)) {
    const auto it = tensors.find(t.key);
    if (it == tensors.end()) continue;  // LibTorch's reader refuses a missing key
    dsp::verify_checkpoint_tensor(kPath, header, t.key, t.what, it->second.data(),
                                  it->second.size());
  }
  const dsp::TrainConfig c = dsp::checkpoint_train_config(kPath, header);
  // The header's own parameter list as the model's: what a loader with a matching model checks.
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& p : header.value("params", nlohmann::json::array())) {
    names.push_back(p.at("name").get<std::string>());
    shapes.push_back(p.at("shape").get<std::vector<int64_t>>());
  }
  dsp::check_checkpoint_params(kPath, header, names, shapes, c.model);
  dsp::check_checkpoint_optimizer(kPath, header, c.optimizer);
  const nlohmann::json extra = header.value("extra", nlohmann::json::object());
  (void)extra.value("job", nlohmann::json::object()).dump();
}

// Every refusal names the file it refuses.
void refused(const dsp::Error& e) {
  if (std::string(e.what()).find(kPath) == std::string::npos) {
    std::fprintf(stderr, "a refusal that does not name the file: %s\n", e.what());
    __builtin_trap();
  }
  if (std::getenv("DSP_FUZZ_VERBOSE") != nullptr) std::fprintf(stderr, "refused: %s\n", e.what());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::map<std::string, std::string> tensors = unpack(data, size);
  const auto head = tensors.find("header");
  if (head == tensors.end()) return 0;
  const auto sum = tensors.find("header_checksum");
  try {
    read(tensors, head->second, sum == tensors.end() ? nullptr : &sum->second);
  } catch (const dsp::Error& e) {
    refused(e);
  }
  const std::string good = dsp::checkpoint_checksum(head->second.data(), head->second.size());
  try {
    read(tensors, head->second, &good);
  } catch (const dsp::Error& e) {
    refused(e);
  }
  return 0;
}
