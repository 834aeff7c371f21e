#include "layout/store/embedding_file.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/hash.hpp"

namespace dsp {

namespace {

constexpr char kMagic[8] = {'D', 'S', 'P', 'E', 'M', 'B', 'D', '\0'};
constexpr uint32_t kVersion = 1;

// The file: this header, then the sections (values, state1, state2, steps; those the optimizer
// has), each in native byte order, each with its checksum in sums[].
struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t optimizer;  // 0 adam, 1 adagrad
  int64_t dim, begin, end, num_nodes, ranks, rank;
  uint64_t ids_digest;
  uint64_t sums[4];
  uint64_t header_sum;  // of the bytes before it
};
static_assert(sizeof(FileHeader) == 112, "FileHeader has no padding");

uint64_t digest(const void* data, size_t bytes) {
  Hasher h;
  static const char kNone = 0;  // an empty section's data() may be null: no null to memcpy
  h.update(bytes ? data : &kNone, bytes);
  return h.digest();
}

// The file's sections after its header, in order (absent ones empty).
struct Section {
  const char* what;
  EmbeddingSection which;
  size_t bytes;
};

std::vector<Section> sections(const EmbeddingShard& sh) {
  const bool adam = sh.optimizer == EmbeddingOptimizer::kAdam;
  const size_t cells = static_cast<size_t>((sh.end - sh.begin) * sh.dim) * sizeof(float);
  const size_t rows = static_cast<size_t>(sh.end - sh.begin);
  using S = EmbeddingSection;
  return {{"the rows", S::kValues, cells},
          {adam ? "the optimizer state (m)" : "the optimizer state (s)", S::kState1, cells},
          {"the optimizer state (v)", S::kState2, adam ? cells : 0},
          {"the step counts", S::kSteps, adam ? rows * sizeof(int64_t) : 0}};
}

// Writes the sections to `f` (from the host, a device storage's staged one at a time) and their
// checksums to sums[]; false when a write fails.
bool write_sections(std::FILE* f, const EmbeddingShard& sh, const EmbeddingStorage& storage,
                    uint64_t* sums) {
  const std::vector<Section> secs = sections(sh);
  std::vector<unsigned char> staged;
  for (size_t i = 0; i < secs.size(); ++i) {
    const Section& s = secs[i];
    const void* data = s.bytes ? storage.host_view(s.which) : nullptr;
    if (s.bytes && !data) {
      staged.resize(s.bytes);
      storage.read_section(s.which, staged.data(), s.bytes);
      data = staged.data();
    }
    sums[i] = digest(data, s.bytes);
    if (s.bytes && std::fwrite(data, 1, s.bytes, f) != s.bytes) return false;
  }
  return true;
}

// The header of `file` against `sh`: FormatError naming the file and the first difference.
void check_header(const std::string& path, const MappedFile& file, const EmbeddingShard& sh) {
  FileHeader h;
  DSP_CHECK_FORMAT(file.size() >= sizeof(h) && std::memcmp(file.data(), kMagic, 8) == 0,
                   "{} is not a dsp embedding table", path);
  std::memcpy(&h, file.data(), sizeof(h));
  DSP_CHECK_FORMAT(h.header_sum == digest(&h, offsetof(FileHeader, header_sum)),
                   "{}: checksum mismatch in the header: the file is damaged", path);
  DSP_CHECK_FORMAT(h.version == kVersion, "{}: embedding table version {}; this build reads {}",
                   path, h.version, kVersion);
  DSP_CHECK_FORMAT(h.dim == sh.dim, "{}: embedding dim {} but this table's is {}", path, h.dim,
                   sh.dim);
  DSP_CHECK_FORMAT(h.optimizer <= 1, "{}: unknown optimizer state {}", path, h.optimizer);
  const auto opt = h.optimizer == 0 ? EmbeddingOptimizer::kAdam : EmbeddingOptimizer::kAdagrad;
  DSP_CHECK_FORMAT(opt == sh.optimizer, "{}: {} optimizer state but this table uses {}", path, opt,
                   sh.optimizer);
  DSP_CHECK_FORMAT(h.begin == sh.begin && h.end == sh.end && h.num_nodes == sh.num_nodes,
                   "{}: rows [{}, {}) of {} (rank {} of {}) but this rank owns [{}, {}) of {}",
                   path, h.begin, h.end, h.num_nodes, h.rank, h.ranks, sh.begin, sh.end,
                   sh.num_nodes);
  DSP_CHECK_FORMAT(h.ids_digest == sh.ids_digest,
                   "{}: rows [{}, {}) are other dataset nodes than this table's (another "
                   "partition)",
                   path, sh.begin, sh.end);
  const std::vector<Section> secs = sections(sh);
  size_t need = sizeof(h);
  for (const Section& s : secs) need += s.bytes;
  DSP_CHECK_FORMAT(file.size() == need,
                   "{}: {} bytes where the header implies {}: the file is "
                   "damaged",
                   path, file.size(), need);
  const unsigned char* p = file.data() + sizeof(h);
  for (size_t i = 0; i < secs.size(); ++i) {
    DSP_CHECK_FORMAT(h.sums[i] == digest(p, secs[i].bytes),
                     "{}: checksum mismatch in {}: the file is damaged", path, secs[i].what);
    p += secs[i].bytes;
  }
}

}  // namespace

void write_embedding_shard(const std::string& path, const EmbeddingShard& sh,
                           const EmbeddingStorage& storage) {
  FileHeader h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = kVersion;
  h.optimizer = sh.optimizer == EmbeddingOptimizer::kAdam ? 0 : 1;
  h.dim = sh.dim;
  h.begin = sh.begin;
  h.end = sh.end;
  h.num_nodes = sh.num_nodes;
  h.ranks = sh.ranks;
  h.rank = sh.rank;
  h.ids_digest = sh.ids_digest;
  remove_stale_temps(path);
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  std::remove(tmp.c_str());  // created exclusively, as write_file_atomic's temporary file is
  std::FILE* f = std::fopen(tmp.c_str(), "wbx");
  DSP_CHECK_T(IoError, f != nullptr, "{}: cannot open for writing: {}", tmp, std::strerror(errno));
  // The header twice: a placeholder, then with the sections' checksums (computed as they go).
  bool ok = std::fwrite(&h, sizeof(h), 1, f) == 1 && write_sections(f, sh, storage, h.sums);
  h.header_sum = digest(&h, offsetof(FileHeader, header_sum));
  ok = ok && std::fseek(f, 0, SEEK_SET) == 0 && std::fwrite(&h, sizeof(h), 1, f) == 1;
  ok = std::fflush(f) == 0 && ok;
  int err = errno;
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  std::error_code ec;
  if (ok) std::filesystem::rename(tmp, path, ec);
  if (!ok || ec) {
    std::remove(tmp.c_str());
    DSP_THROW_T(IoError, "{}: write failed: {} (nothing was replaced)", path,
                ok ? ec.message() : std::strerror(err));
  }
}

void read_embedding_shard(const std::string& path, const EmbeddingShard& sh,
                          EmbeddingStorage& storage) {
  check_file_readable(path, "no such embedding table file");
  const MappedFile file(path);
  check_header(path, file, sh);  // every check first: a refused file leaves the table unchanged
  const unsigned char* p = file.data() + sizeof(FileHeader);
  for (const Section& s : sections(sh)) {
    storage.write_section(s.which, p, s.bytes);
    p += s.bytes;
  }
}

}  // namespace dsp
